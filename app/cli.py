"""The `embornal` command: the local owner, acting as subject `default` on memory.db.

Every command calls the same services as the HTTP routers. A user error prints
one line on stderr and exits 1; nothing prints a traceback.
"""

from __future__ import annotations

import io
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, redirect_stdout, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

try:  # typer >= 0.20 vendors click; its exceptions live there
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

from app import __version__
from app.dirs import Dirs, move_legacy_files, resolve_dirs
from app.errors import Conflict, EmbornalError
from app.identifiers import for_display
from app.rules import LIST_SORTS, LOCAL_SUBJECT, MODES, ON_DUPLICATE

# Start-up time is the first thing a user meets (bench/cli_startup.py): this module
# imports only what `--help` needs. The settings (pydantic, ~0.1 s), the memory
# (SQLAlchemy, Alembic, Casbin, numpy), the server (FastAPI, uvicorn) and the model
# (onnxruntime) are imported by the commands that use them; tests/cli/test_startup.py
# holds this.
if TYPE_CHECKING:
    from app.settings import Settings
    from app.usecases.memory import Fact, Memory

app = typer.Typer(
    help="embornal: a memory of small facts for AI agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
memory_app = typer.Typer(help="Store, read and search facts.", no_args_is_help=True)
policy_app = typer.Typer(help="Manage access policy lines (Casbin).", no_args_is_help=True)
token_app = typer.Typer(
    help="Tokens signed with the local key: issue, list, revoke.", no_args_is_help=True
)
model_app = typer.Typer(help="The embedding model.", no_args_is_help=True)
app.add_typer(memory_app, name="memory")
app.add_typer(policy_app, name="policy")
app.add_typer(token_app, name="token")
app.add_typer(model_app, name="model")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]


class State:
    dirs: Dirs
    settings: Settings | None = None


state = State()


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"embornal {__version__}")
        raise typer.Exit()


@app.callback()
def _startup(
    _version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Every command first moves files an older build left in ~/.embornal."""
    state.dirs = resolve_dirs()
    home = Path.home()
    for line in move_legacy_files(state.dirs, home):
        typer.echo(line, err=True)


def settings() -> Settings:
    if state.settings is None:
        from app.settings import load_settings

        state.settings = load_settings(state.dirs)
    return state.settings


@contextmanager
def memory(
    load_model: bool = False,
    download: bool = False,
    progress: bool = False,
    check_width: bool = True,
) -> Iterator[Memory]:
    """The local memory, acting as the subject `default`, closed at the end."""
    from app.usecases.memory import open_memory

    with open_memory(
        settings(),
        load_model=load_model,
        download=download,
        progress=progress,
        check_width=check_width,
    ) as mem:
        yield mem


ME = LOCAL_SUBJECT
T = TypeVar("T", bound=str)
AsOfOpt = Annotated[
    str | None,
    typer.Option(
        "--as-of",
        help=(
            "Answer as the memory stood at this RFC 3339 time with a timezone "
            "(e.g. 2026-12-01T09:30:00Z); never a recall. Strength, recalls, path "
            "tags and access rules are today's."
        ),
    ),
]


def emit_json(data: Any) -> None:
    """Print a result as the HTTP API would return it (app.schemas.render)."""
    from app.schemas.render import to_json

    typer.echo(json.dumps(to_json(data), indent=2, ensure_ascii=False))


def show_fact(fact: Fact) -> None:
    tags = " ".join(f"{k}={v}" for k, v in fact.effective_tags.items())
    flags = []
    if fact.deleted_at:
        flags.append("deleted")
    if fact.superseded_by_id:
        flags.append(f"superseded by #{fact.superseded_by_id}")
    elif fact.superseded:
        flags.append("superseded")
    extra = f" ({', '.join(flags)})" if flags else ""
    typer.echo(
        f"#{fact.id} {fact.path}  strength {fact.strength:.2f}  "
        f"stability {fact.stability_days:.1f}d  recalls {fact.recall_count}{extra}"
    )
    typer.echo(f"  {for_display(fact.content)}")
    if tags:
        typer.echo(f"  [{tags}]")


def _choice(option: str, value: str, allowed: tuple[T, ...]) -> T:
    for choice in allowed:
        if value == choice:
            return choice
    raise EmbornalError(f"{option} must be {', '.join(allowed[:-1])} or {allowed[-1]}")


def tag_text(tags: dict[str, str]) -> str:
    """Tags as a person writes them: `k=v k2=v2`, or `none`."""
    return " ".join(f"{k}={v}" for k, v in tags.items()) or "none"


def tell_fallback(mem: Memory) -> None:
    """Say, on stderr, that this very command moved the memory to the offline model."""
    if mem.runtime.fell_back and mem.runtime.model_note:
        typer.echo(f"note: {mem.runtime.model_note}", err=True)


def parse_tag_options(values: list[str] | None) -> dict[str, str]:
    tags: dict[str, str] = {}
    for text in values or []:
        key, sep, value = text.partition("=")
        if not sep:
            raise EmbornalError(f"--tag {text!r} must be key=value")
        tags[key] = value
    return tags


# --- top level ---------------------------------------------------------------


@app.command("paths")
def paths_command(as_json: JsonOpt = False) -> None:
    """Print where config.yaml, memory.db and the model weights live."""
    dirs = state.dirs
    places = {
        "config": dirs.config_file,
        "database": settings().database_shown,
        "weights": dirs.weights_dir,
    }
    if as_json:
        emit_json(places)
        return
    for name, place in places.items():
        typer.echo(f"{name:<9} {place}")


@app.command("migrate")
def migrate_command() -> None:
    """Bring the schema of memory.db to head (serve does it too)."""
    with memory() as mem:
        found, head = mem.schema_revisions()
    where = f"memory at {settings().database_shown}"
    if found == head:
        typer.echo(f"{where} is at the head revision ({head})")
    elif found is None:
        typer.echo(f"{where} is new, made at the head revision ({head})")
    else:
        typer.echo(f"{where} upgraded from revision {found} to {head}")


@app.command("serve")
def serve_command(
    host: Annotated[str | None, typer.Option(help="Address to bind (server.host)")] = None,
    port: Annotated[int | None, typer.Option(help="Port (server.port)", min=1, max=65535)] = None,
    forwarded_allow_ips: Annotated[
        str | None,
        typer.Option(
            help="Proxies whose X-Forwarded-* headers are trusted "
            "(default: $FORWARDED_ALLOW_IPS, else 127.0.0.1)"
        ),
    ] = None,
) -> None:
    """Run the HTTP service (uvicorn); it migrates the memory first."""
    import uvicorn

    from app.api.observability import configure_logging
    from app.api.timeouts import request_timeouts
    from app.auth.tokens import TokenVerifier
    from app.main import create_app

    config = settings()
    configure_logging(config.server.log_format, config.server.log_level)
    # Opened here rather than in the app's lifespan, so that a start-up problem (a
    # width disagreement, a bad key) is one line and exit 1, not a server traceback.
    # The configured model is fetched at start when missing (embedding.download).
    bind_host, bind_port = host or config.server.host, port or config.server.port
    check_port_free(bind_host, bind_port)
    with memory(load_model=True, download=config.embedding.download) as mem:
        rt = mem.runtime
        warn_without_model(mem)
        warn_without_vectors(mem)
        verifier = TokenVerifier(config)
        uvicorn.run(
            # The app closes the runtime at shutdown: on SIGTERM uvicorn raises the
            # signal again once the app has stopped, and the process ends before this
            # `with` could close it, leaving memory.db's WAL beside it (docs/operations.md).
            create_app(config, runtime=rt, close_runtime=True, verifier=verifier),
            host=bind_host,
            port=bind_port,
            log_level=config.server.log_level,
            log_config=None,  # keep configure_logging's handler (JSON or text, request ids)
            access_log=False,  # the observability middleware logs each request once
            proxy_headers=True,
            forwarded_allow_ips=forwarded_allow_ips,
            # Read deadlines for headers and body: uvicorn would wait on a dribbling
            # client for ever (server.header_timeout_seconds, body_timeout_seconds).
            http=request_timeouts(config.server),
        )


def warn_without_model(mem: Memory) -> None:
    """Say once, on stderr, which model a server chose when it is not the configured one
    (Runtime.load_model), or why it has none and the one command that gives it one."""
    rt = mem.runtime
    if rt.model_note:
        typer.echo(rt.model_note, err=True)
    elif rt.embedder is None and rt.settings.embedding.model != "none":
        typer.echo(
            f"no embedding model ({rt.model_problem}); serving keyword search, facts "
            f"wait for a model. {offline_hint()}",
            err=True,
        )


def warn_without_vectors(mem: Memory) -> None:
    """Say once, on stderr, what of the vectors' schema the database lacks (a restore
    that left it out) and how to put it back: /readyz says the same while it lasts."""
    missing = mem.runtime.vectors_missing
    if missing is None:
        return
    if missing.usable:
        typer.echo(f"warning: {missing.detail}", err=True)
    else:
        typer.echo(
            f"not ready: {missing.detail}. Until then /readyz answers 503, and searches by "
            "meaning and stores with a model are refused (503); keyword search works.",
            err=True,
        )


@app.command("mcp")
def mcp_command(
    subject: Annotated[
        str,
        typer.Option(
            "--subject",
            envvar="EMBORNAL_SUBJECT",
            help="Act as this subject (its policies decide), not the owner `default`",
        ),
    ] = ME,
) -> None:
    """Serve the memory to a local agent over MCP on stdin/stdout.

    It acts as the owner `default`, or as --subject (whose policies then decide).
    """
    import anyio

    from app.api.observability import configure_logging
    from app.mcp.stdio import serve_stdio

    config = settings()
    configure_logging(config.server.log_format, config.server.log_level)  # to stderr
    with ExitStack() as stack:
        # stdout is the protocol channel: whatever opening the memory prints goes to stderr.
        with redirect_stdout(sys.stderr):
            mem = stack.enter_context(memory(load_model=True))
        # A role's name is never a subject: the API refuses such a token, so does this.
        mem.refuse_role_name(subject)
        warn_without_model(mem)
        stopped = anyio.run(serve_stdio, mem.via("mcp"), subject)
    if stopped:  # by SIGTERM, the memory closed: the status a signal's end gives
        sys.exit(128 + signal.SIGTERM)


def check_port_free(host: str, port: int) -> None:
    """Refuse a busy port, or a host that does not resolve to an address of this machine,
    in one line before the model loads (uvicorn would log errors after seconds of start-up
    and exit 3). Resolved and bound the way uvicorn binds."""
    import errno
    import socket

    try:
        family, kind, proto, _name, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise EmbornalError(
                f"port {port} on {host} is in use (another server?); "
                "choose another with --port or server.port"
            ) from None
        raise EmbornalError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


def embornal_command() -> str:
    """How the user runs this command: `embornal` when that is on PATH, else its full
    path (a venv's script, as `make run` leaves it), so a hint can be pasted as is."""
    import shutil

    if shutil.which("embornal"):
        return "embornal"
    script = Path(sys.argv[0])
    if script.name == "embornal" and script.is_file():
        return str(script.resolve())
    beside = Path(sys.executable).with_name("embornal")
    return str(beside) if beside.is_file() else f"{sys.executable} -m app.cli"


def offline_hint() -> str:
    from app.usecases.models import OFFLINE_MODEL

    return f"For the offline model, run: {embornal_command()} model use {OFFLINE_MODEL}"


# --- tokens ------------------------------------------------------------------


@token_app.command("issue")
def token_issue(
    subject: Annotated[str, typer.Option("--subject", help="The token's subject (sub)")],
    expires: Annotated[str, typer.Option(help="Lifetime: 30d, 12h, 2w, 1d12h ...")] = "30d",
    label: Annotated[str | None, typer.Option(help="What it is for, shown in `token list`")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print a token signed with the local key (recorded: `token list` shows it)."""
    from app.auth.tokens import parse_duration

    lifetime = parse_duration(expires)
    with memory() as mem:
        issued = mem.sign_token(subject, lifetime, label=label)
    if not (subject == ME or issued.named):
        # The token would work, but every call would answer "not found": say why now.
        typer.echo(
            f"warning: no policy names {subject!r}: it sees only what 'everyone' may; grant "
            f'it rights with: embornal policy add "p, {subject}, path:/agents/{subject}/*, '
            'write, allow" (and a read line)',
            err=True,
        )
    record = issued.record
    if as_json:
        emit_json(
            {
                "token": issued.token,
                "jti": record.jti,
                "subject": subject,
                "label": record.label,
                "expires_at": record.expires_at,
            }
        )
    else:
        typer.echo(issued.token)


@token_app.command("list")
def token_list(
    include_expired: Annotated[
        bool, typer.Option("--all", help="Expired tokens too (kept for activity.keep_days)")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """List the tokens this memory signed (never the tokens themselves), newest first."""
    with memory() as mem:
        records = mem.list_tokens(ME, include_expired=include_expired)
    if as_json:
        emit_json({"tokens": records})
        return
    if not records:
        typer.echo("no tokens" + ("" if include_expired else " (--all shows expired ones)"))
        return
    for record in records:
        when = f"expires {record.expires_at:%Y-%m-%d %H:%M} UTC" if record.expires_at else ""
        if record.revoked_at is not None:
            when = f"revoked {record.revoked_at:%Y-%m-%d %H:%M} UTC by {record.revoked_by}"
        elif record.status == "expired":
            when = f"expired {record.expires_at:%Y-%m-%d %H:%M} UTC"
        who = record.subject or "(not issued here)"
        label = f"  {for_display(record.label)}" if record.label else ""
        typer.echo(f"{record.jti}  {who:<16} {record.status:<7}  {when}{label}")


@token_app.command("revoke")
def token_revoke(
    jti: Annotated[str, typer.Argument(help="The token's id, as `token list` shows it")],
) -> None:
    """Revoke a token: every server refuses it from its next request (by default)."""
    with memory() as mem:
        revoked = mem.revoke_token(ME, jti)
    whose = (
        f" of {revoked.subject}" if revoked.subject else " (not issued here: refused all the same)"
    )
    typer.echo(f"revoked {revoked.jti}{whose}")


@app.command("ui")
def ui_command(
    open_browser: Annotated[
        bool, typer.Option("--open/--no-open", help="Open the link in a browser, where one runs")
    ] = True,
    port: Annotated[
        int | None,
        typer.Option(help="The port `serve` listens on, if not server.port", min=1, max=65535),
    ] = None,
) -> None:
    """Print (and open) a one-time sign-in link to the web console for `default`.

    Valid for five minutes and one use; it carries a code, never a token.
    """
    config = settings()
    with memory() as mem:
        code, _expires_at = mem.signin_code(ME)
    link = f"{console_url(config, port)}/ui/login?code={code}"
    typer.echo("Sign in to the console as default with this link (valid 5 minutes, once;")
    typer.echo("`embornal serve` must be running):")
    typer.echo("")
    typer.echo(f"  {link}")
    if open_browser and can_open_browser():
        import webbrowser

        with suppress(Exception):
            if webbrowser.open(link):
                typer.echo("")
                typer.echo("(opened in your browser)")


def console_url(config: Settings, port: int | None = None) -> str:
    """Where the console is: http.public_url, else the address `serve` listens on."""
    if config.http.public_url and port is None:
        return config.http.public_url
    host = config.server.host
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port or config.server.port}"


def can_open_browser() -> bool:
    """Whether a graphical browser can open: on Linux only with a display (Python's
    webbrowser would otherwise start a text browser in this terminal)."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


# --- activity ----------------------------------------------------------------


@app.command("activity")
def activity_command(
    subject: Annotated[str | None, typer.Option(help="Only this subject's changes")] = None,
    action: Annotated[
        str | None,
        typer.Option(help="Only this kind: store, supersede, delete, tag_set, ... token_revoke"),
    ] = None,
    under: Annotated[str | None, typer.Option(help="Only changes in this subtree")] = None,
    since: Annotated[
        str | None, typer.Option(help="From this RFC 3339 time (e.g. 2026-12-01T00:00:00Z)")
    ] = None,
    until: Annotated[str | None, typer.Option(help="Up to this RFC 3339 time")] = None,
    limit: Annotated[int, typer.Option(help="At most this many entries (1-100)")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """Who changed what, newest first: stores, supersedes, deletes, tags, policies, tokens."""
    from app.rules import ACTIVITY_ACTIONS
    from app.usecases.memory import ActivityFilters

    wanted = ActivityFilters(
        subject=subject,
        action=None if action is None else _choice("--action", action, ACTIVITY_ACTIONS),
        under=under,
        since=since,
        until=until,
    )
    with memory() as mem:
        page = mem.activity(ME, wanted, limit=limit)
    if as_json:
        emit_json(page)
        return
    if not page.entries:
        typer.echo("no activity matches")
    for entry in page.entries:
        typer.echo(describe_entry(entry))


def describe_entry(entry: Any) -> str:
    """One line an owner reads: when, who, how, what."""
    what = []
    if entry.fact_id is not None:
        what.append(f"#{entry.fact_id}")
    if entry.supersedes_id is not None:
        what.append(f"(supersedes #{entry.supersedes_id})")
    for value in (entry.path, entry.tag, entry.policy, entry.jti, entry.note):
        if value is not None:
            what.append(for_display(str(value)))
    return (
        f"{entry.at:%Y-%m-%d %H:%M:%S} UTC  {entry.subject:<12} {entry.via:<4} "
        f"{entry.action:<13} {' '.join(what)}"
    ).rstrip()


# --- memory ------------------------------------------------------------------


@memory_app.command("store")
def memory_store(
    path: Annotated[str, typer.Argument(help="Topic path, e.g. /projects/embornal")],
    text: Annotated[str, typer.Argument(help="The fact: one small statement")],
    tag: Annotated[
        list[str] | None,
        typer.Option("--tag", help="key=value (repeatable); a supersede without it keeps the old"),
    ] = None,
    supersedes: Annotated[int | None, typer.Option(help="Id of the fact this corrects")] = None,
    on_duplicate: Annotated[
        str,
        typer.Option(
            help="allow: store and name the similar facts; refuse: store nothing if there is one"
        ),
    ] = "allow",
    as_json: JsonOpt = False,
) -> None:
    """Store a fact (and name the facts already saying nearly the same)."""
    from app.usecases.memory import NewFact, check_facts

    duplicates = _choice("--on-duplicate", on_duplicate, ON_DUPLICATE)
    # No --tag: none for a new fact; a supersede keeps the old fact's (the use case decides).
    raw = NewFact(path, text, parse_tag_options(tag) if tag else None, supersedes)
    # Checked before the memory is opened: bad input creates no file and loads no model.
    (item,) = check_facts([raw], settings().limits)
    with memory(load_model=True) as mem:
        try:
            fact = mem.store(ME, item, on_duplicate=duplicates)
        except Conflict as exc:
            raise refused_as_duplicate(exc) from None
        problem = mem.runtime.model_problem if settings().embedding.model != "none" else None
        tell_fallback(mem)
    emit_json(fact) if as_json else show_fact(fact)
    if not as_json:
        for near in fact.similar:
            typer.echo(
                f"  similar: #{near.id} {near.path} (cosine {near.cosine:.2f}); "
                f"--supersedes {near.id} corrects it instead",
            )
    if problem:
        typer.echo(
            f"note: the fact waits for an embedding model: {problem}. {offline_hint()}", err=True
        )


def refused_as_duplicate(exc: Conflict) -> Conflict:
    """A `--on-duplicate refuse` store's refusal in the command line's own words: the use
    case's sentence names REST's and MCP's parameters (supersedes_id, on_duplicate)."""
    similar = exc.extensions.get("similar")
    if not similar:
        return exc
    hit = similar[0]
    return Conflict(
        f"this fact is similar to fact {hit['id']} at {hit['path']} (cosine "
        f"{hit['cosine']:.2f}): store it with --supersedes {hit['id']} to correct that fact, "
        "or without --on-duplicate refuse to keep both",
        extensions=exc.extensions,
    )


@memory_app.command("get")
def memory_get(
    fact_id: Annotated[int, typer.Argument(help="Fact id")],
    peek: Annotated[bool, typer.Option(help="Read without counting a recall")] = False,
    include_deleted: Annotated[bool, typer.Option(help="Show a deleted fact too")] = False,
    as_of: AsOfOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Read one fact by id (a recall, unless --peek or --as-of)."""
    with memory() as mem:
        fact = mem.get(ME, fact_id, peek=peek, include_deleted=include_deleted, as_of=as_of)
    emit_json(fact) if as_json else show_fact(fact)


@memory_app.command("recall")
def memory_recall(fact_id: Annotated[int, typer.Argument()], as_json: JsonOpt = False) -> None:
    """Recall a fact explicitly: its stability grows."""
    with memory() as mem:
        fact = mem.recall(ME, fact_id)
    emit_json(fact) if as_json else show_fact(fact)


@memory_app.command("show")
def memory_show(
    path: Annotated[str, typer.Argument(help="A path; / is the root")] = "/",
    sort: Annotated[str, typer.Option(help="created or strength")] = "created",
    limit: Annotated[int, typer.Option(help="At most this many facts (1-100)")] = 50,
    as_of: AsOfOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Browse a path: its tags, children and facts (not a recall).

    With --as-of, the facts at the node as they stood then; its tags, children and
    counts are today's.
    """
    order = _choice("--sort", sort, LIST_SORTS)
    with memory() as mem:
        node = mem.browse(ME, path, sort=order, limit=limit, as_of=as_of)
    if as_json:
        emit_json(node)
        return
    tags = " ".join(f"{k}={v}" for k, v in node.effective_tags.items())
    typer.echo(f"{node.path}  ({node.fact_count} facts){'  [' + tags + ']' if tags else ''}")
    for child in node.children:
        typer.echo(f"  {child.path}/  ({child.fact_count} facts)")
    for fact in node.facts:
        show_fact(fact)


@memory_app.command("list")
def memory_list(
    under: Annotated[str, typer.Option(help="Only this subtree; / is all")] = "/",
    tag: Annotated[list[str] | None, typer.Option("--tag", help="key=value that must hold")] = None,
    sort: Annotated[str, typer.Option(help="created (newest first) or strength")] = "created",
    as_of: AsOfOpt = None,
    limit: Annotated[int, typer.Option(help="At most this many facts (1-100)")] = 20,
    cursor: Annotated[
        str | None, typer.Option(help="Go on from a previous page (its last line names it)")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the current facts of a subtree, newest or strongest first (not a recall)."""
    order = _choice("--sort", sort, LIST_SORTS)
    tags = tag or []
    parse_tag_options(tags)  # key=value, said before the memory is opened
    with memory() as mem:
        page = mem.list_facts(
            ME, under=under, tags=tags, sort=order, limit=limit, cursor=cursor, as_of=as_of
        )
    if as_json:
        emit_json(page)
        return
    if not page.facts:
        where = f"under {under}" + "".join(f" tagged {t}" for t in tags)
        typer.echo(f"no facts {where}{f' as of {as_of}' if as_of else ''}")
    for fact in page.facts:
        show_fact(fact)
    if page.next_cursor:
        typer.echo(f"more: the same command with --cursor {page.next_cursor}")


@memory_app.command("history")
def memory_history(
    fact_id: Annotated[int, typer.Argument()], as_of: AsOfOpt = None, as_json: JsonOpt = False
) -> None:
    """The supersede chain of a fact, oldest first (with --as-of, as it stood then)."""
    from app.usecases.memory import moment_of

    with memory() as mem:
        chain = mem.history(ME, fact_id, as_of=as_of)
    if as_json:
        from app.schemas.facts import FactsOut

        out = FactsOut.model_validate(
            {"facts": chain, "as_of": moment_of(as_of)}, from_attributes=True
        )
        emit_json(out.model_dump(mode="json"))
        return
    for fact in chain:
        show_fact(fact)


@memory_app.command("delete")
def memory_delete(fact_id: Annotated[int, typer.Argument()]) -> None:
    """Delete a fact (it stays in history)."""
    with memory() as mem:
        mem.delete(ME, fact_id)
    typer.echo(f"deleted #{fact_id}")


@memory_app.command("tag")
def memory_tag(
    path: Annotated[str, typer.Argument()],
    tag: Annotated[list[str] | None, typer.Option("--tag", help="key=value to set")] = None,
    remove: Annotated[list[str] | None, typer.Option("--remove", help="key to remove")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Set or remove tags on a path (facts below inherit them, nearest wins; needs `tag`)."""
    new_tags = parse_tag_options(tag)
    with memory() as mem:
        node = mem.tag_path(ME, path, set_tags=new_tags, remove=remove or [])
    if as_json:
        emit_json(node)
        return
    typer.echo(f"{node.path}  tags: {tag_text(node.tags)}")
    if node.effective_tags != node.tags:
        typer.echo(f"  with inherited: {tag_text(node.effective_tags)}")


@memory_app.command("search")
def memory_search(
    query: Annotated[str, typer.Argument(help="What to look for")],
    mode: Annotated[
        str | None, typer.Option(help="keyword, semantic or hybrid (default: hybrid with a model)")
    ] = None,
    under: Annotated[str | None, typer.Option(help="Only this subtree")] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="key=value that must hold")] = None,
    min_strength: Annotated[float | None, typer.Option(help="Only facts this strong (0-1)")] = None,
    limit: Annotated[int, typer.Option(help="At most this many results (1-100)")] = 10,
    peek: Annotated[bool, typer.Option(help="Do not count the results as recalls")] = False,
    as_of: AsOfOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Search facts by keyword, by meaning, or both (with --as-of, as the memory stood then)."""
    from app.usecases.memory import SearchRequest

    request = SearchRequest(
        q=query,
        mode=None if mode is None else _choice("--mode", mode, MODES),
        under=under,
        tags=tuple(tag or ()),
        min_strength=min_strength,
        limit=limit,
        peek=peek,
        as_of=as_of,
    )
    with memory(load_model=mode != "keyword") as mem:
        found = mem.search(ME, request)
        tell_fallback(mem)
    if as_json:
        emit_json(found)
        return
    if not found.results:
        typer.echo(f"no facts match {query!r} ({found.mode} search)")
        return
    typer.echo(f"{len(found.results)} found ({found.mode} search)")
    for result in found.results:
        typer.echo(f"score {result.score:.4f}  ", nl=False)
        show_fact(result.fact)


@contextmanager
def progress_bar(label: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr (stdout may be the data); `advance(done, total)`."""
    from rich.console import Console
    from rich.progress import Progress

    console = Console(stderr=True)
    # Drawn only for a person at a terminal: a log or a pipe gets the one result line.
    with Progress(console=console, transient=False, disable=not console.is_terminal) as progress:
        task = progress.add_task(label, total=None)

        def advance(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        yield advance


@memory_app.command("reindex")
def memory_reindex(
    rebuild: Annotated[
        bool, typer.Option(help="Recreate the vector index at the configured width; re-embed all")
    ] = False,
) -> None:
    """Embed the facts waiting for the model, in batches, with a progress bar."""
    # The width check waits for the model: a rebuild is what changes the width.
    with (
        memory(load_model=True, download=True, progress=True, check_width=not rebuild) as mem,
        progress_bar("embedding") as advance,
    ):
        done = mem.reindex(rebuild=rebuild, on_batch=advance)
    typer.echo(f"embedded {done} facts")


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


@memory_app.command("backup")
def memory_backup(
    file: Annotated[Path, typer.Argument(help="A new file to write, or a folder for a dated one")],
    force: Annotated[bool, typer.Option("--force", help="Overwrite FILE if it exists")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Take a consistent copy of the live memory (SQLite online backup, or pg_dump).

    Safe while a server writes. The copy passes SQLite's and FTS5's integrity
    checks before it replaces FILE, and is readable by its owner only (0600).
    """
    from app.usecases.memory import backup_file

    report = backup_file(settings(), file, force=force)
    if as_json:
        emit_json(report)
        return
    typer.echo(
        f"backed up {report.facts} facts ({_size(report.size_bytes)}) to {report.path} "
        f"in {report.seconds:.2f} s"
    )


@memory_app.command("export")
def memory_export(
    file: Annotated[
        Path | None, typer.Argument(help="Where to write (default, or -: standard output)")
    ] = None,
    with_embeddings: Annotated[
        bool, typer.Option(help="Include the vectors (base64 float32); larger, no reindex")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite FILE if it exists")] = False,
) -> None:
    """Write the whole memory as JSON Lines: paths, facts with history, policies.

    Everything is exported, every owner's facts and deleted ones included, from one
    consistent snapshot. A FILE is written whole or not at all, mode 0600.
    """
    from app.files import private_file

    with memory() as mem:
        if file is None or str(file) == "-":
            _export_to_stdout(mem, with_embeddings)
            return
        with private_file(file, force=force) as out, progress_bar("exporting facts") as advance:
            counts = mem.export(ME, out, with_embeddings=with_embeddings, on_progress=advance)
    typer.echo(
        f"exported {counts['facts']} facts, {counts['paths']} paths and "
        f"{counts['policies']} policies to {file}"
    )


def _export_to_stdout(mem: Memory, with_embeddings: bool) -> None:
    # UTF-8 whatever the locale says, as a file export is.
    out = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", newline="\n")
    try:
        mem.export(ME, out, with_embeddings=with_embeddings)
        out.flush()
    except BrokenPipeError:
        # `embornal memory export | head`: the reader left. One line, no traceback,
        # and no second error when Python flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise EmbornalError("the export stopped: its reader closed standard output") from None
    finally:
        with suppress(ValueError):
            out.detach()


@memory_app.command("import")
def memory_import(
    file: Annotated[Path, typer.Argument(help="A file from `memory export` (- for stdin)")],
    with_policies: Annotated[
        bool,
        typer.Option(
            "--with-policies",
            help="Also apply the file's policy lines and path tags (each one added is named)",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Load an export, all or nothing.

    Every line is checked as the API checks the same thing (times, vectors, tags,
    owners...); one bad line refuses the file, named by its number, and nothing is
    written. Into a fresh memory (only what its migration wrote) the facts are
    restored as they are: same ids. Into any other memory they are merged: new ids
    (supersede chains follow), a fact already present (same path, content, owner and
    created_at; for the /memory facts every memory writes at its creation, same path,
    content and owner) is skipped, so a second import changes nothing. Facts keep
    their owners, times and recall state.

    The file's policy lines and path tags decide who reads what: they are applied only
    with --with-policies (a restore then takes the file's policies; a merge adds the
    lines and path tags the memory lacks, keeping its own values), each one named.
    """
    # Every line is checked (by the use case) before the write lock is taken.
    try:
        with memory() as mem, progress_bar("importing facts") as advance:
            if str(file) == "-":
                lines = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8")
                report = mem.import_lines(
                    ME, lines, with_policies=with_policies, on_progress=advance
                )
            else:
                with file.open(encoding="utf-8") as opened:
                    report = mem.import_lines(
                        ME, opened, with_policies=with_policies, on_progress=advance
                    )
    except OSError as exc:
        raise EmbornalError(f"cannot read {file}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise EmbornalError(f"{file} is not UTF-8 text") from None
    if as_json:
        emit_json(report)
        return
    typer.echo(
        f"{report.mode}: {report.facts_added} facts added, {report.facts_skipped} already "
        f"present; {report.paths_added} paths added"
    )
    if report.memory_facts_superseded:
        retired = ", ".join(f"#{i}" for i in report.memory_facts_superseded)
        typer.echo(f"facts of this memory superseded by the file's: {retired}")
    # Each change to who may read what, by name: the person importing must see them.
    for line in report.policies_added:
        typer.echo(f"policy added: {for_display(line)}")
    for tag in report.path_tags_added:
        typer.echo(f"path tag added: {for_display(tag)}")
    if report.path_tags_kept:
        typer.echo(f"{report.path_tags_kept} path tags of the file kept this memory's value")
    if report.policies_not_applied or report.path_tags_not_applied:
        typer.echo(
            f"not applied: {report.policies_not_applied} policy lines and "
            f"{report.path_tags_not_applied} path tags of the file (import with "
            "--with-policies to apply them)"
        )
    if report.facts_waiting_for_embedding:
        typer.echo(
            f"{report.facts_waiting_for_embedding} facts wait for embedding: "
            "run `embornal memory reindex`"
        )


# --- model -------------------------------------------------------------------


@model_app.command("pull")
def model_pull(
    name: Annotated[str | None, typer.Argument(help="Catalog name (default: configured)")] = None,
) -> None:
    """Fetch the model's files into the weights directory (progress bar, sha256 check)."""
    from app.errors import Unavailable
    from app.usecases import models

    try:
        where = models.pull(settings(), name)
    except Unavailable as exc:
        offline = (name or settings().embedding.model) != models.OFFLINE_MODEL
        raise EmbornalError(f"{exc.detail}. {offline_hint()}" if offline else exc.detail) from None
    typer.echo(f"model files ready in {where}")


@model_app.command("use")
def model_use(
    name: Annotated[str, typer.Argument(help="Catalog name, e.g. minilm-l6 (offline)")],
) -> None:
    """Switch to another model: write config.yaml, move the vectors, re-embed every fact."""
    from app.config_edit import set_embedding_model
    from app.usecases import models

    spec = models.spec(name)
    # Its files first: a model that cannot be fetched leaves config.yaml and the memory
    # as they were (a config naming it would stop the next start on the width check).
    model_pull(spec.name)
    # The two keys change; the rest of the owner's file stays as written (nothing is
    # written when EMBORNAL_EMBEDDING__* variables would override them).
    state.settings = set_embedding_model(state.dirs, spec.name, spec.width)
    typer.echo(
        f"{state.dirs.config_file}: embedding.model = {spec.name}, embedding.width = {spec.width}"
    )
    memory_reindex(rebuild=True)


@model_app.command("info")
def model_info_command(
    name: Annotated[str | None, typer.Argument(help="Catalog name (default: configured)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Describe the model: width, pooling, prefixes, files and whether they are present."""
    from app.usecases import models

    info = models.describe(settings(), name)
    if as_json:
        emit_json(info)
        return
    if name is None:
        with memory() as mem:
            recorded = mem.recorded_model()
        if recorded is not None and info["name"] == "none":
            # `none` is this process's choice: it embeds with no model, the memory's either.
            typer.echo(
                f"this memory's vectors come from {recorded}; with embedding.model: none "
                "this process searches by keyword only and stored facts wait for "
                "embedding. The configured model:"
            )
        elif recorded not in (None, info["name"]):
            # The memory's own model (a fallback, or a switch by another process) is in use.
            typer.echo(
                f"this memory embeds with {recorded} (see `embornal model info {recorded}`); "
                "the configured model:"
            )
    files = info.pop("files")
    for key, value in info.items():
        shown = "yes" if value is True else "no" if value is False else value
        typer.echo(f"{key}: {'none' if shown is None or shown == '' else shown}")
    for f in files:
        state = "verified" if f.get("verified") else "present" if f.get("present") else "missing"
        size = _size(f["expected_size"]) if f.get("expected_size") else "?"
        typer.echo(f"file {f['name']}: {state}, {size}, sha256 {f['sha256']}")
        if f.get("source"):
            typer.echo(f"  from {f['source']}")


# --- policies ----------------------------------------------------------------


# The policy commands act as the owner of the database file, whatever its policies say:
# the way back for an owner whose tokens lost the admin role (Memory._policies).


@policy_app.command("list")
def policy_list(as_json: JsonOpt = False) -> None:
    """List the policy lines (whatever the policies say: this is the database's owner)."""
    with memory() as mem:
        lines = mem.list_policies(ME, owner=True)
    if as_json:
        emit_json({"policies": lines})
        return
    for line in lines:
        typer.echo(str(line["line"]))


@policy_app.command("add")
def policy_add(
    line: Annotated[str, typer.Argument(help='e.g. "p, alice, path:/a/*, read, allow"')],
) -> None:
    """Add a policy line (actions: read, write, delete, tag; or "g, MEMBER, ROLE").

    Works whatever the policies say: `embornal policy add "g, default, admin"` gives the
    owner back the admin role."""
    with memory() as mem:
        added = mem.add_policy(ME, line, owner=True)
    typer.echo(f"added: {added['line']}")


@policy_app.command("remove")
def policy_remove(line: Annotated[str, typer.Argument()]) -> None:
    """Remove a policy line (not the last one that gives anyone the admin role)."""
    with memory() as mem:
        removed = mem.remove_policy(ME, line, owner=True)
    typer.echo(f"removed: {removed['line']}")


def _exit_on_sigterm(signum: int, _frame: Any) -> None:
    # SIGTERM (a service manager, an agent closing its `embornal mcp`) unwinds the
    # command as an exit does, so the memory it opened is closed and its WAL folded
    # into memory.db; by default the process died with the WAL beside the file.
    sys.exit(128 + signum)


def main() -> None:
    """Entry point: run the command; turn user errors into one line and exit 1."""
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        # Without standalone mode, click returns an Exit's code instead of exiting.
        code = app(standalone_mode=False)
        if isinstance(code, int) and code != 0:
            sys.exit(code)
    except EmbornalError as exc:
        # The owner at the console may know more than a client is told (console_detail).
        typer.echo(f"error: {exc.console_detail}", err=True)
        sys.exit(1)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("aborted", err=True)
        sys.exit(1)
    except click_exceptions.NoArgsIsHelpError as exc:
        exc.show()  # `embornal memory` alone: the help, not an error
        sys.exit(0)
    except click_exceptions.ClickException as exc:
        typer.echo(f"error: {exc.format_message()}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
