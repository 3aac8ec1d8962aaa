"""The `embornal` command: the local owner, acting as subject `default` on memory.db.

Every command calls the same services as the HTTP routers. A user error prints
one line on stderr and exits 1; nothing prints a traceback.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, redirect_stdout, suppress
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

try:  # typer >= 0.20 vendors click; its exceptions live there
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

from app import __version__
from app.dirs import Dirs, make_private_dir, move_legacy_files, resolve_dirs
from app.errors import EmbornalError
from app.identifiers import for_display
from app.rules import LIST_SORTS, LOCAL_SUBJECT, MODES, ON_DUPLICATE
from app.settings import Settings, load_settings

# Start-up time is the first thing a user meets (bench/cli_startup.py): this module
# imports only what `--help` and `paths` need. The memory (SQLAlchemy, Alembic,
# Casbin, numpy), the server (FastAPI, uvicorn) and the model (onnxruntime) are
# imported by the commands that use them; tests/cli/test_startup.py holds this.
if TYPE_CHECKING:
    from app.usecases.memory import Fact, Memory

app = typer.Typer(
    help="embornal: a memory of small facts for AI agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
memory_app = typer.Typer(help="Store, read and search facts.", no_args_is_help=True)
policy_app = typer.Typer(help="Manage access policy lines (Casbin).", no_args_is_help=True)
token_app = typer.Typer(help="Issue tokens signed with the local key.", no_args_is_help=True)
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
    with memory():
        typer.echo(f"memory at {settings().database_shown} is at the head revision")


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
        verifier = TokenVerifier(config)
        uvicorn.run(
            create_app(config, runtime=rt, verifier=verifier),
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
    """Say once, on stderr, why a server has no model and the command that gives it one."""
    rt = mem.runtime
    if rt.embedder is None and rt.settings.embedding.model != "none":
        typer.echo(
            f"no embedding model ({rt.model_problem}); serving keyword search, facts "
            f"wait for a model. {offline_hint()}",
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
    """Serve the memory to a local agent over MCP on stdin/stdout, acting as `default`
    or as --subject."""
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
        anyio.run(serve_stdio, mem, subject)


def check_port_free(host: str, port: int) -> None:
    """Refuse a busy port in one line, before the model loads (uvicorn would log a
    traceback-like error after seconds of start-up). Bound the way uvicorn binds."""
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return  # uvicorn says what is wrong with the host
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
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
    as_json: JsonOpt = False,
) -> None:
    """Print a token signed with the local key."""
    token, expires_at = _issue(subject, expires)
    if as_json:
        emit_json({"token": token, "subject": subject, "expires_at": expires_at})
    else:
        typer.echo(token)


def _issue(subject: str, expires: str) -> tuple[str, datetime]:
    """A token for `subject` signed with the local key, and when it expires (what
    `token issue` and `ui` print); warns when no policy names the subject."""
    from app.auth.tokens import parse_duration

    lifetime = parse_duration(expires)
    with memory() as mem:
        token, expires_at = mem.sign_token(subject, lifetime)
        named = subject == ME or mem.is_named_by_a_policy(subject)
    if not named:
        # The token would work, but every call would answer "not found": say why now.
        typer.echo(
            f"warning: no policy names {subject!r}: it sees only what 'everyone' may; grant "
            f'it rights with: embornal policy add "p, {subject}, path:/agents/{subject}/*, '
            'write, allow" (and a read line)',
            err=True,
        )
    return token, expires_at


@app.command("ui")
def ui_command(
    expires: Annotated[
        str, typer.Option(help="How long the sign-in token is valid: 1h, 30m, 1d ...")
    ] = "1h",
) -> None:
    """Print how to sign in to the web console as `default`: its address and a
    short-lived token to paste (never put in a URL, where logs and history keep it)."""
    token, expires_at = _issue(ME, expires)
    config = settings()
    host = config.server.host
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    if ":" in shown:
        shown = f"[{shown}]"
    typer.echo(f"Open http://{shown}:{config.server.port}/ui/login (with `embornal serve` running)")
    typer.echo(f"and paste this token for {ME}, valid until {expires_at:%Y-%m-%d %H:%M} UTC:")
    typer.echo("")
    typer.echo(token)


# --- memory ------------------------------------------------------------------


@memory_app.command("store")
def memory_store(
    path: Annotated[str, typer.Argument(help="Topic path, e.g. /projects/embornal")],
    text: Annotated[str, typer.Argument(help="The fact: one small statement")],
    tag: Annotated[list[str] | None, typer.Option("--tag", help="key=value (repeatable)")] = None,
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
    raw = NewFact(path, text, parse_tag_options(tag), supersedes)
    # Checked before the memory is opened: bad input creates no file and loads no model.
    (item,) = check_facts([raw], settings().limits)
    with memory(load_model=True) as mem:
        fact = mem.store(ME, item, on_duplicate=duplicates)
        problem = mem.runtime.model_problem if settings().embedding.model != "none" else None
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
    """Browse a path: its tags, children and facts (not a recall). With --as-of, the
    facts at the node then; its tags, children and counts are today's."""
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
    else:
        typer.echo(f"{node.path}  tags: {node.tags}")


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
    if as_json:
        emit_json(found)
        return
    typer.echo(f"mode: {found.mode}")
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
    file: Annotated[Path, typer.Argument(help="Where to write the copy (a new file)")],
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
    created_at) is skipped, so a second import changes nothing. Facts keep their
    owners, times and recall state.

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
    import yaml

    from app.usecases import models

    spec = models.spec(name)
    config_file = state.dirs.config_file
    data: dict[str, Any] = {}
    if config_file.exists():
        data = yaml.safe_load(config_file.read_text(encoding="utf-8")) or {}
    data.setdefault("embedding", {})
    data["embedding"] = {**(data["embedding"] or {}), "model": spec.name, "width": spec.width}
    make_private_dir(config_file.parent)
    config_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    state.settings = None
    config = settings()  # validated again, env overrides included
    if (config.embedding.model, config.embedding.width) != (spec.name, spec.width):
        raise EmbornalError(
            "EMBORNAL_EMBEDDING__* variables override config.yaml; unset them to switch models"
        )
    typer.echo(f"{config_file}: embedding.model = {spec.name}, embedding.width = {spec.width}")
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
    for key, value in info.items():
        typer.echo(f"{key}: {value}")


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


def main() -> None:
    """Entry point: run the command; turn user errors into one line and exit 1."""
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
