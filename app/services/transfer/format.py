"""The export format, version 1: its records as pydantic models, and reading a file.

One JSON object a line, in this order:

    {"type": "embornal-export", "version": 1, "embedding_width": 768}
    {"type": "path", "path": "/a", "created_at": 1800000000.0, "tags": {"k": "v"}}
    {"type": "fact", "id": 7, "path": "/a", "content": "...", "owner": "alice",
     "tags": {"owner": "alice"}, "supersedes_id": null, "deleted_at": null,
     "created_at": 1800000000.0, "last_recall_at": null, "recall_count": 0,
     "stability_days": 1.0, "embedding": "<base64 float32 LE, --with-embeddings>"}
    {"type": "policy", "line": "p, alice, path:/a/*, read, allow"}
    {"type": "end", "paths": 3, "facts": 12, "policies": 5}

Every node is a path line; facts come in id order; times are UNIX seconds as
stored (a JSON float reads back as the same double, which is what lets an import
recognise a fact it already holds). The end line makes a file that was cut short
fail instead of importing half a memory.

The models are the format: the export dumps them, the import validates each line
with them, and a bad line is named by its number. A file is data someone else may
have made, so every line meets the checks the API gives the same thing (strict types,
no unknown field; the path, tag, content and subject rules of a store; no `owner`
path tag; no role's name as a fact's owner) and the ones its own writes guarantee:
times finite, from 1970 to a day past the importer's clock, a deletion no earlier
than the creation; a stability of at least a new fact's; vectors of finite numbers
with a direction. One bad line refuses the file (app.services.transfer.importer
writes nothing before every line passed).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

from app.acl.model import ADMIN, EVERYONE, PolicyLine, parse_policy_line
from app.auth.subjects import validate_subject
from app.errors import InvalidInput
from app.rules import MAX_ID, OWNER_KEY
from app.services.strength import NEW_FACT_STABILITY_DAYS
from app.services.validation import check_content, check_path_tags, check_tag, fold_path
from app.settings import MAX_EMBEDDING_WIDTH, LimitsSettings

EXPORT_TYPE = "embornal-export"
FORMAT_VERSION = 1
# A stored time may lie this far past the importer's clock (clocks of two machines
# disagree); further, and every strength and listing of the fact would be nonsense.
CLOCK_SKEW_SECONDS = 86_400.0
# Recalls multiply a stability by at most 3.75: far above what centuries of recalls
# reach, far below where its arithmetic (in SQL too) would overflow.
MAX_STABILITY_DAYS = 1_000_000.0


class _Record(BaseModel):
    # Strict: a file is data, and "1" is not a number nor true a count.
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    _line: int = PrivateAttr(default=0)

    @property
    def line(self) -> int:
        """The line of the file this record was read from (0 when made by the export)."""
        return self._line


def _moment(value: float | None, info: ValidationInfo) -> float | None:
    """A stored time (UNIX seconds): from 1970 to a day past the importer's clock."""
    if value is None:
        return None
    now = (info.context or {}).get("now")
    latest = (now if now is not None else math.inf) + CLOCK_SKEW_SECONDS
    if not 0.0 <= value <= latest:
        raise InvalidInput(
            f"{info.field_name} {value!r} is not a time between 1970 and a day from now"
        )
    return value


def _check_tags(value: dict[str, str]) -> dict[str, str]:
    tags: dict[str, str] = {}
    for raw_key, raw in value.items():
        key, checked = check_tag(raw_key, raw)
        if key in tags:
            raise InvalidInput(f"tag {key!r} is given twice")
        tags[key] = checked
    return tags


class Header(_Record):
    type: Literal["embornal-export"]
    version: int
    embedding_width: int = Field(ge=1, le=MAX_EMBEDDING_WIDTH)

    @field_validator("version")
    @classmethod
    def _readable(cls, version: int) -> int:
        if version != FORMAT_VERSION:
            raise InvalidInput(
                f"export format version {version!r} is not one this build reads ({FORMAT_VERSION})"
            )
        return version


class PathRecord(_Record):
    type: Literal["path"] = "path"
    path: str
    created_at: float | None = None
    tags: dict[str, str] = Field(default_factory=dict)

    @field_validator("path")
    @classmethod
    def _fold(cls, path: str) -> str:
        return fold_path(path)

    @field_validator("tags")
    @classmethod
    def _tags(cls, tags: dict[str, str]) -> dict[str, str]:
        # As PUT /v1/paths/.../tags checks them: an `owner` there, a key given twice
        # and more than a node carries are refused.
        return check_path_tags(tags)

    @field_validator("created_at")
    @classmethod
    def _created(cls, value: float | None, info: ValidationInfo) -> float | None:
        return _moment(value, info)


class FactRecord(_Record):
    type: Literal["fact"] = "fact"
    id: int = Field(ge=1, le=MAX_ID)
    path: str
    content: str
    owner: str
    tags: dict[str, str] = Field(default_factory=dict)
    supersedes_id: int | None = Field(default=None, ge=1, le=MAX_ID)
    deleted_at: float | None = None
    created_at: float
    last_recall_at: float | None = None
    recall_count: int = Field(default=0, ge=0, le=MAX_ID)
    stability_days: float = Field(
        default=NEW_FACT_STABILITY_DAYS, ge=NEW_FACT_STABILITY_DAYS, le=MAX_STABILITY_DAYS
    )
    # Raw float32 little-endian; base64 text in the file (--with-embeddings).
    embedding: bytes | None = None

    @field_validator("created_at", "deleted_at", "last_recall_at")
    @classmethod
    def _times(cls, value: float | None, info: ValidationInfo) -> float | None:
        return _moment(value, info)

    @field_validator("path")
    @classmethod
    def _fold(cls, path: str) -> str:
        return fold_path(path)

    @field_validator("tags")
    @classmethod
    def _tags(cls, tags: dict[str, str]) -> dict[str, str]:
        return _check_tags(tags)

    @field_validator("owner")
    @classmethod
    def _owner(cls, owner: str, info: ValidationInfo) -> str:
        try:
            validate_subject(owner)
        except InvalidInput as exc:
            raise InvalidInput(f"owner {owner!r}: {exc.detail.removeprefix('subject ')}") from None
        refuse_role_owner(owner, (info.context or {}).get("roles", ()))
        return owner

    @field_validator("content")
    @classmethod
    def _content(cls, content: str, info: ValidationInfo) -> str:
        return check_content(content, _limits(info).content_chars)

    @field_validator("embedding", mode="before")
    @classmethod
    def _decode(cls, value: Any, info: ValidationInfo) -> bytes | None:
        if value is None:
            return None
        if not isinstance(value, str):
            raise InvalidInput("embedding must be base64 text")
        try:
            blob = base64.b64decode(value, validate=True)
        except binascii.Error:
            raise InvalidInput("embedding is not valid base64") from None
        width = (info.context or {}).get("width")
        if width is not None and len(blob) != 4 * width:
            raise InvalidInput(
                f"embedding holds {len(blob) // 4} float32 values; the header says {width}"
            )
        if len(blob) % 4:
            raise InvalidInput("embedding is not a whole number of float32 values")
        vector = np.frombuffer(blob, dtype="<f4")
        if not np.isfinite(vector).all():
            raise InvalidInput("embedding holds a value that is not a finite number (NaN, inf)")
        if not vector.any():
            raise InvalidInput("embedding is all zeros: a vector with no direction")
        return blob

    @field_serializer("embedding")
    def _encode(self, blob: bytes | None) -> str | None:
        return None if blob is None else base64.b64encode(blob).decode("ascii")

    @model_validator(mode="after")
    def _owner_tag(self, info: ValidationInfo) -> FactRecord:
        if self.deleted_at is not None and self.deleted_at < self.created_at:
            raise InvalidInput(
                f"deleted_at {self.deleted_at!r} is before created_at {self.created_at!r}"
            )
        # The owner tag mirrors the owner column: the memory writes it, a file cannot differ.
        if self.tags.setdefault(OWNER_KEY, self.owner) != self.owner:
            raise InvalidInput(f"the owner tag {self.tags[OWNER_KEY]!r} is not the owner")
        limit = _limits(info).tags_per_fact
        if len(self.tags) - 1 > limit:
            raise InvalidInput(f"a fact carries at most {limit} tags besides owner")
        return self


class PolicyRecord(_Record):
    type: Literal["policy"] = "policy"
    line_text: str = Field(alias="line")
    _policy: PolicyLine | None = PrivateAttr(default=None)
    model_config = ConfigDict(populate_by_name=True)

    @model_validator(mode="after")
    def _parse(self) -> PolicyRecord:
        self._policy = parse_policy_line(self.line_text)
        return self

    @property
    def policy(self) -> PolicyLine:
        assert self._policy is not None
        return self._policy


class EndRecord(_Record):
    type: Literal["end"] = "end"
    paths: int = Field(ge=0)
    facts: int = Field(ge=0)
    policies: int = Field(ge=0)


_BODY: dict[str, type[_Record]] = {
    "path": PathRecord,
    "fact": FactRecord,
    "policy": PolicyRecord,
    "end": EndRecord,
}


def refuse_role_owner(owner: str, roles: Iterable[str]) -> None:
    """A role's name is no subject (SPEC: separate namespaces): it owns no fact."""
    if owner in (EVERYONE, ADMIN) or owner in roles:
        raise InvalidInput(f"owner {owner!r} is a role's name: a fact is owned by a subject")


def _limits(info: ValidationInfo) -> LimitsSettings:
    limits = (info.context or {}).get("limits")
    return limits if isinstance(limits, LimitsSettings) else LimitsSettings()


@dataclass
class ExportFile:
    """A whole export, every line checked."""

    embedding_width: int
    paths: list[PathRecord] = field(default_factory=list)
    facts: list[FactRecord] = field(default_factory=list)
    policies: list[PolicyRecord] = field(default_factory=list)


# --- writing -----------------------------------------------------------------

# JSON leaves these unescaped in strings, but str.splitlines() (and JavaScript before
# ES2019) take them for line breaks: escaped, one record is always one line.
_LINE_BREAKS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def dump(record: _Record) -> dict[str, Any]:
    """A record as its JSON object (an unset embedding is left out, not null)."""
    data = record.model_dump(by_alias=True)
    if isinstance(record, FactRecord) and record.embedding is None:
        data.pop("embedding")
    return data


def write_records(records: Iterable[_Record], out: IO[str]) -> dict[str, int]:
    """Write records as JSON Lines; return the counts of the end record."""
    counts: dict[str, int] = {}
    for record in records:
        line = json.dumps(dump(record), ensure_ascii=False, separators=(",", ":"))
        out.write(line.translate(_LINE_BREAKS))
        out.write("\n")
        if isinstance(record, EndRecord):
            counts = {"paths": record.paths, "facts": record.facts, "policies": record.policies}
    return counts


# --- reading -----------------------------------------------------------------


def _parse(model: type[_Record], record: Mapping[str, Any], context: dict[str, Any]) -> Any:
    try:
        parsed = model.model_validate(record, context=context)
    except ValidationError as exc:
        raise InvalidInput(_first_problem(exc)) from None
    parsed._line = context["line"]
    return parsed


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors(include_url=False)[0]
    name = ".".join(str(part) for part in error["loc"]) or "the record"
    if error["type"] == "extra_forbidden":
        return f"unknown field {name!r}"
    if error["type"] == "missing":
        return f"missing field {name!r}"
    return f"{name}: {error['msg']}"


def read_export(
    lines: Iterable[str],
    limits: LimitsSettings | None = None,
    *,
    now: float,
    roles: Iterable[str] = (),
) -> ExportFile:
    """Parse and check a whole export; raise InvalidInput naming the first bad line.

    `now` is the importer's clock (no stored time may lie more than a day past it);
    `roles` the memory's role names (no fact may be owned by one, nor by a role the
    file's own g lines make).
    """
    context: dict[str, Any] = {
        "limits": limits or LimitsSettings(),
        "now": now,
        "roles": frozenset(roles),
    }
    data: ExportFile | None = None
    ended: EndRecord | None = None
    fact_ids: dict[int, float] = {}  # each fact's created_at, by the file's id
    superseded: dict[int, int] = {}  # superseded id -> line that supersedes it
    number = 0
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        context["line"] = number
        try:
            if ended is not None:
                raise InvalidInput("nothing may follow the end line")
            try:
                record = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise InvalidInput(f"not JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise InvalidInput("not a JSON object")
            kind = record.get("type")
            if data is None:
                if kind != EXPORT_TYPE:
                    raise InvalidInput(f'the first line must be the "{EXPORT_TYPE}" header')
                header: Header = _parse(Header, record, context)
                data = ExportFile(embedding_width=header.embedding_width)
                context["width"] = header.embedding_width
                continue
            model = _BODY.get(kind) if isinstance(kind, str) else None
            if model is None:
                raise InvalidInput(f"unknown record type {kind!r}")
            parsed = _parse(model, record, context)
            if isinstance(parsed, PathRecord):
                data.paths.append(parsed)
            elif isinstance(parsed, FactRecord):
                previous = data.facts[-1].id if data.facts else 0
                _check_chain(parsed, previous, fact_ids, superseded)
                data.facts.append(parsed)
            elif isinstance(parsed, PolicyRecord):
                data.policies.append(parsed)
            else:
                ended = parsed
        except InvalidInput as exc:
            message = f"line {number}: {exc.detail}"
            raise InvalidInput(
                message, errors=[{"loc": ["line", number], "msg": exc.detail}]
            ) from None
    if data is None:
        raise InvalidInput(f'the file is empty: it has no "{EXPORT_TYPE}" header')
    if ended is None:
        raise InvalidInput(
            f"the file stops at line {number} without its end line: it was cut short"
        )
    held = {"paths": len(data.paths), "facts": len(data.facts), "policies": len(data.policies)}
    counted = {"paths": ended.paths, "facts": ended.facts, "policies": ended.policies}
    if held != counted:
        raise InvalidInput(f"the end line counts {counted}, but the file holds {held}")
    # Policy lines follow the facts: a role they make is known only now.
    file_roles = {r.policy.values[1] for r in data.policies if r.policy.ptype == "g"}
    check_owners(data, file_roles)
    return data


def check_owners(data: ExportFile, roles: Iterable[str]) -> None:
    """InvalidInput naming the first fact line whose owner is one of `roles`."""
    roles = frozenset(roles)
    for fact in data.facts:
        try:
            refuse_role_owner(fact.owner, roles)
        except InvalidInput as exc:
            raise InvalidInput(
                f"line {fact.line}: {exc.detail}",
                errors=[{"loc": ["line", fact.line], "msg": exc.detail}],
            ) from None


def _check_chain(
    fact: FactRecord, previous: int, ids: dict[int, float], superseded: dict[int, int]
) -> None:
    """Ids increase, and a fact supersedes an earlier fact of the file, once, made no
    earlier than it (`ids`: each earlier fact's created_at)."""
    if fact.id <= previous:
        raise InvalidInput(f"fact ids must increase: {fact.id} comes after {previous}")
    if fact.supersedes_id is not None:
        if fact.supersedes_id not in ids:
            raise InvalidInput(
                f"fact {fact.id} supersedes fact {fact.supersedes_id}, "
                "which no earlier line of the file holds"
            )
        if fact.supersedes_id in superseded:
            raise InvalidInput(
                f"fact {fact.supersedes_id} is superseded twice "
                f"(lines {superseded[fact.supersedes_id]} and {fact.line})"
            )
        check_successor_time(fact, ids[fact.supersedes_id])
        superseded[fact.supersedes_id] = fact.line
    ids[fact.id] = fact.created_at


def check_successor_time(fact: FactRecord, replaced_at: float) -> None:
    """A fact is superseded by one made at its time or later, as the API supersedes:
    a file's successor dated earlier would rewrite what the memory believed then."""
    if fact.created_at < replaced_at:
        raise InvalidInput(
            f"fact {fact.id} supersedes fact {fact.supersedes_id} but was created before "
            f"it ({fact.created_at!r} < {replaced_at!r})"
        )
