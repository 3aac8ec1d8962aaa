"""The console's pages: each one makes its calls on the app's Memory as the signed-in
subject, exactly as the routers do, and renders what comes back.

A page without a session redirects to /ui/login. Every POST carries the session's
CSRF token (a form field), checked before anything is called; a refused change
shows the problem the API would have answered, with its status.
"""

from __future__ import annotations

import hmac
import re
import secrets
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import (
    FileResponse,
    HTMLResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from app.auth.tokens import TokenVerifier
from app.durations import parse_duration
from app.errors import EmbornalError, Forbidden, InvalidInput, Unauthorized, invalid
from app.rules import ACTIVITY_ACTIONS, MAX_ID, MODES, OWNER_KEY, Mode
from app.ui import render
from app.ui.sessions import MAX_SESSION_SECONDS, Session, Sessions
from app.usecases.memory import ActivityFilters, Memory, NewFact, SearchRequest

SESSION_COOKIE = "embornal_session"
LOGIN_COOKIE = "embornal_login"  # the sign-in form's CSRF value, before any session
FORM_TYPE = "application/x-www-form-urlencoded"
MAX_FORM_FIELDS = 64
PAGE = 25
# h11's bound on a request's head (uvicorn's default): a longer line never reaches a route.
REQUEST_LINE_BYTES = 64 * 1024

router = APIRouter(prefix="/ui", include_in_schema=False)

templates = Environment(
    loader=PackageLoader("app.ui", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
templates.globals.update(
    path_href=render.path_href,
    when=render.when,
    size=render.size,
    content_html=render.content_html,
    via_name=render.via_name,
    change_line=render.change_line,
    entry_what=render.entry_what,
    modes=MODES,
)


class NotSignedIn(Exception):
    """No valid session: the page answers with a redirect to the sign-in form."""


class Refused(Exception):
    """A console-level refusal (bad form, CSRF) shown as a page with `status`."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Signed:
    """The person at the console: their session, and whether they hold the admin role."""

    session_id: str
    session: Session
    is_admin: bool

    @property
    def subject(self) -> str:
        return self.session.subject


def memory_of(request: Request) -> Memory:
    """The app's memory as the console uses it: its changes are recorded as the console's."""
    memory: Memory = request.app.state.memory
    return memory.via("ui")


def sessions_of(request: Request) -> Sessions:
    sessions: Sessions = request.app.state.ui_sessions
    return sessions


def signed_in(request: Request) -> Signed:
    """The session of this request's cookie, its token checked again (a key change or
    expiry ends it), and the subject still a subject (not a role's name)."""
    sessions = sessions_of(request)
    session_id = request.cookies.get(SESSION_COOKIE)
    session = sessions.get(session_id)
    if session is None or session_id is None:
        raise NotSignedIn
    verifier: TokenVerifier = request.app.state.verifier
    try:
        verifier.verify(session.token)
        roles = memory_of(request).whoami(session.subject)["roles"]
    except Unauthorized:
        sessions.close(session_id)
        raise NotSignedIn from None
    return Signed(session_id, session, "admin" in roles)


def _origin(url: str) -> str:
    """scheme://host[:port] of a URL, lowercase, without the scheme's default port."""
    parts = urlsplit(url.lower())
    default = {"http": 80, "https": 443}.get(parts.scheme)
    try:
        port = parts.port
    except ValueError:
        return ""
    host = f"[{parts.hostname}]" if parts.hostname and ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}" + (f":{port}" if port not in (None, default) else "")


def refuse_other_origins(request: Request) -> None:
    """Refuse a form that a page of another origin made the browser post.

    Cookies ignore ports: a page served on another port of this host is same-site, so
    it can plant the sign-in form's cookie and post the form with its own token (its
    own CSRF pair), and SameSite=Strict lets it through: the victim's console would be
    the attacker's. The browser says where a post came from (Sec-Fetch-Site, Origin),
    and no other page can make it say this console's origin. A client that sends
    neither is no browser another page could drive.
    """
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        # A browser that sends it says it of every request: it decides. "none" is the
        # person's own action (a bookmark, a reload), no page of anyone's.
        if site in ("same-origin", "none"):
            return
        raise Refused(403, f"the form came from another origin ({site}); sign in from the console")
    origin = request.headers.get("origin")
    if origin is None:
        return
    own = {_origin(str(request.base_url))}
    public_url = request.app.state.settings.http.public_url
    if public_url:
        own.add(_origin(public_url))
    if _origin(origin) not in own:
        raise Refused(403, "the form came from another origin; sign in from the console")


async def form_fields(request: Request) -> dict[str, str]:
    """The urlencoded form of a POST (the console sends nothing else), sent from the
    console's own origin."""
    refuse_other_origins(request)
    body = await request.body()
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if body and media != FORM_TYPE:
        raise Refused(415, f"the console takes forms sent as {FORM_TYPE}")
    try:
        pairs = parse_qsl(
            body.decode("utf-8"),
            keep_blank_values=True,
            strict_parsing=False,
            max_num_fields=MAX_FORM_FIELDS,
        )
    except (UnicodeDecodeError, ValueError):
        raise Refused(400, "the form could not be read") from None
    return dict(pairs)


def posted(
    signed: Annotated[Signed, Depends(signed_in)],
    form: Annotated[dict[str, str], Depends(form_fields)],
) -> tuple[Signed, dict[str, str]]:
    """A signed-in POST whose form carries this session's CSRF token; else 403."""
    sent = form.get("csrf", "")
    if not sent or not hmac.compare_digest(sent.encode(), signed.session.csrf.encode()):
        raise Refused(403, "the form's CSRF token is missing or wrong: reload the page")
    return signed, form


SignedDep = Annotated[Signed, Depends(signed_in)]
PostedDep = Annotated[tuple[Signed, dict[str, str]], Depends(posted)]


def page(
    name: str,
    signed: Signed | None,
    *,
    status: int = 200,
    **values: Any,
) -> HTMLResponse:
    html = templates.get_template(name).render(
        signed=signed,
        csrf=signed.session.csrf if signed else "",
        nav=values.pop("nav", ""),
        **values,
    )
    return HTMLResponse(html, status_code=status)


def problem_page(signed: Signed | None, exc: EmbornalError, *, back: str) -> HTMLResponse:
    """The refusal as the API words it: its status, title and detail."""
    return page(
        "problem.html",
        signed,
        status=exc.status,
        title=exc.title,
        detail=exc.detail,
        problem_status=exc.status,
        back=back,
    )


def change(signed: Signed, do: Callable[[], object], *, back: str) -> Response:
    """A change the person asked for: back to `back` once done, or the API's refusal as
    it is (the same problem detail), with a way back there."""
    try:
        do()
    except EmbornalError as exc:
        return problem_page(signed, exc, back=back)
    return see_other(back)


def confirmed(form: dict[str, str]) -> bool:
    """Whether a destructive form is the second POST, sent from its confirmation page."""
    return form.get("confirm") == "yes"


def confirm_page(
    signed: Signed,
    *,
    title: str,
    action: str,
    button: str,
    back: str,
    consequences: list[str],
    fields: dict[str, str] | None = None,
    fact: Any = None,
    token: Any = None,
    code: str | None = None,
) -> HTMLResponse:
    """What a destructive change will do, and a form that posts it again with `confirm`
    (and the session's CSRF token, as every form): the first POST changes nothing."""
    return page(
        "confirm.html",
        signed,
        title=title,
        action=action,
        button=button,
        back=back,
        consequences=consequences,
        fields=fields or {},
        fact=fact,
        token=token,
        code=code,
    )


def see_other(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def secure(request: Request) -> bool:
    # uvicorn's proxy_headers gives the scheme a trusted proxy saw.
    return request.url.scheme == "https"


# --- sign-in -----------------------------------------------------------------


@router.get("/login")
def login_form(
    request: Request, code: Annotated[str | None, Query(max_length=128)] = None
) -> HTMLResponse:
    """The sign-in form; with `code` (the one-time link `embornal ui` prints), a form
    that posts the code at once (console.js): a link preview's GET uses nothing up."""
    nonce = secrets.token_urlsafe(32)
    response = page("login.html", None, login_csrf=nonce, error=None, code=code or "")
    _set_login_cookie(request, response, nonce)
    return response


def _set_login_cookie(request: Request, response: Response, nonce: str) -> None:
    response.set_cookie(
        LOGIN_COOKIE,
        nonce,
        max_age=3600,
        path="/ui/login",
        httponly=True,
        samesite="strict",
        secure=secure(request),
    )


@router.post("/login")
def login(request: Request, form: Annotated[dict[str, str], Depends(form_fields)]) -> Response:
    expected = request.cookies.get(LOGIN_COOKIE, "")
    sent = form.get("csrf", "")
    if not expected or not sent or not hmac.compare_digest(sent.encode(), expected.encode()):
        raise Refused(403, "the sign-in form's CSRF token is missing or wrong: reload the page")
    verifier: TokenVerifier = request.app.state.verifier
    code = form.get("code", "").strip()
    token = form.get("token", "").strip()
    try:
        if code:
            # A one-time code: exchanged for a token of its own, recorded (so revoking
            # it ends the session), as long as a session lives.
            lifetime = timedelta(seconds=MAX_SESSION_SECONDS)
            subject, token, expires_at = memory_of(request).redeem_signin_code(code, lifetime)
        else:
            subject, expires_at = verifier.verify_until(token)
        # The same refusal as every request's: a role's name is never a subject.
        memory_of(request).whoami(subject)
    except EmbornalError as exc:
        nonce = secrets.token_urlsafe(32)
        response = page(
            "login.html", None, status=exc.status, login_csrf=nonce, error=exc.detail, code=""
        )
        _set_login_cookie(request, response, nonce)
        return response
    # Signing in as someone in a browser that held a session ends that one: two
    # subjects' sessions behind one cookie jar, the first still valid, help no one.
    sessions_of(request).close(request.cookies.get(SESSION_COOKIE))
    session_id, session = sessions_of(request).open(subject, token, expires_at)
    redirect = see_other("/ui")
    redirect.set_cookie(
        SESSION_COOKIE,
        session_id,
        max_age=sessions_of(request).seconds_left(session),
        path="/ui",
        httponly=True,
        samesite="strict",
        secure=secure(request),
    )
    redirect.delete_cookie(LOGIN_COOKIE, path="/ui/login")
    return redirect


@router.post("/logout")
def logout(request: Request, post: PostedDep) -> RedirectResponse:
    signed, _form = post
    sessions_of(request).close(signed.session_id)
    response = see_other("/ui/login")
    response.delete_cookie(SESSION_COOKIE, path="/ui")
    return response


# --- overview ----------------------------------------------------------------


@router.get("")
def overview(request: Request, signed: SignedDep) -> HTMLResponse:
    view = memory_of(request).overview(signed.subject)
    return page("overview.html", signed, nav="overview", view=view)


# --- the tree ----------------------------------------------------------------


def _crumbs(path: str) -> list[tuple[str, str]]:
    crumbs = [("root", "/")]
    current = ""
    for segment in path.strip("/").split("/") if path != "/" else []:
        current += "/" + segment
        crumbs.append((segment, current))
    return crumbs


@router.get("/paths")
@router.get("/paths/{path:path}")
def tree(
    request: Request,
    signed: SignedDep,
    path: str = "",
    cursor: Annotated[str | None, Query(max_length=1024)] = None,
) -> HTMLResponse:
    memory = memory_of(request)
    wanted = "/" + path.strip("/")
    try:
        node = memory.browse(signed.subject, wanted, limit=PAGE, cursor=cursor)
        may_tag = memory.may_tag(signed.subject, node.path)
    except EmbornalError as exc:
        return problem_page(signed, exc, back="/ui/paths/")
    return page(
        "tree.html",
        signed,
        nav="tree",
        node=node,
        crumbs=_crumbs(node.path),
        may_tag=may_tag,
        inherited={k: v for k, v in node.effective_tags.items() if k not in node.tags},
        origins=memory.tag_origins(signed.subject, node.path),
        next_url=f"{render.path_href(node.path)}?{urlencode({'cursor': node.next_cursor})}"
        if node.next_cursor
        else None,
    )


def _node_path(path: str) -> str:
    return "/" + path.strip("/")


@router.post("/paths/{path:path}/tags")
def set_path_tag(request: Request, post: PostedDep, path: str) -> Response:
    signed, form = post
    node = _node_path(path)
    back = render.path_href(node) if render.SAFE_PATH.match(node) else "/ui/paths/"

    def set_tag() -> None:
        key, value = form.get("key", "").strip(), form.get("value", "").strip()
        if not key:
            raise InvalidInput("a path tag needs a key")
        memory_of(request).set_path_tags(signed.subject, node, {key: value})

    return change(signed, set_tag, back=back)


@router.post("/paths/{path:path}/untag")
def remove_path_tag(request: Request, post: PostedDep, path: str) -> Response:
    signed, form = post
    node = _node_path(path)
    back = render.path_href(node) if render.SAFE_PATH.match(node) else "/ui/paths/"
    memory = memory_of(request)
    return change(
        signed, lambda: memory.remove_path_tag(signed.subject, node, form.get("key", "")), back=back
    )


# --- one fact ----------------------------------------------------------------


def _fact_id(fact_id: int) -> int:
    if not 1 <= fact_id <= MAX_ID:
        raise Refused(404, f"fact {fact_id} not found")
    return fact_id


@router.get("/facts/{fact_id:int}")
def fact_page(request: Request, signed: SignedDep, fact_id: int) -> HTMLResponse:
    memory = memory_of(request)
    try:
        view = memory.fact_view(signed.subject, _fact_id(fact_id))
    except EmbornalError as exc:
        return problem_page(signed, exc, back="/ui")
    now = memory.now()
    # Who stored, superseded or deleted it, as far as the reader may see the record.
    changes = memory.activity(signed.subject, ActivityFilters(fact_id=view.fact.id), limit=10)
    return page(
        "fact.html",
        signed,
        nav="tree",
        view=view,
        fact=view.fact,
        curve=render.curve(view.fact, now),
        crumbs=_crumbs(view.fact.path),
        changes=changes.entries,
        tags_text=tags_text(view.fact.tags),
    )


@router.post("/facts/{fact_id:int}/supersede")
def supersede(request: Request, post: PostedDep, fact_id: int) -> Response:
    signed, form = post
    memory = memory_of(request)
    try:
        old = memory.get(signed.subject, _fact_id(fact_id), peek=True)
        new = memory.store(
            signed.subject,
            # No tags given: the supersede keeps the old fact's (decided by the use case).
            NewFact(old.path, form.get("content", ""), None, supersedes_id=old.id),
        )
    except EmbornalError as exc:
        return problem_page(signed, exc, back=f"/ui/facts/{fact_id}")
    return see_other(f"/ui/facts/{new.id}")


@router.post("/facts/{fact_id:int}/recall")
def recall(request: Request, post: PostedDep, fact_id: int) -> Response:
    signed, _form = post
    memory = memory_of(request)
    return change(
        signed,
        lambda: memory.recall(signed.subject, _fact_id(fact_id)),
        back=f"/ui/facts/{fact_id}",
    )


@router.post("/facts/{fact_id:int}/delete")
def delete(request: Request, post: PostedDep, fact_id: int) -> Response:
    """First POST: what the delete would do (or its refusal); with `confirm`, do it."""
    signed, form = post
    memory = memory_of(request)
    back = f"/ui/facts/{fact_id}"
    if not confirmed(form):
        try:
            fact = memory.fact_to_delete(signed.subject, _fact_id(fact_id))
        except EmbornalError as exc:
            return problem_page(signed, exc, back=back)
        return confirm_page(
            signed,
            title=f"Delete fact #{fact.id}?",
            action=f"/ui/facts/{fact.id}/delete",
            button="Delete",
            back=back,
            fact=fact,
            consequences=[
                f"It drops out of searches, listings and {fact.path} for every reader.",
                "Its history keeps it, and a read by id with include_deleted shows it.",
                "A delete cannot be undone; to correct a fact, supersede it instead.",
            ],
        )
    return change(signed, lambda: memory.delete(signed.subject, _fact_id(fact_id)), back=back)


# --- search ------------------------------------------------------------------


@dataclass
class Column:
    mode: Mode
    results: list[Any]
    problem: EmbornalError | None = None


@router.get("/search")
def search(
    request: Request,
    signed: SignedDep,
    # Read past the API's bounds, so that the page, not a bare problem, says what is
    # wrong with them (the search's own check refuses a query the API refuses); the
    # server refuses a request line longer than REQUEST_LINE_BYTES itself.
    q: Annotated[str, Query(max_length=REQUEST_LINE_BYTES)] = "",
    mode: Annotated[str, Query(max_length=64)] = "hybrid",
    under: Annotated[str, Query(max_length=2200)] = "",
    tag: Annotated[list[str] | None, Query(max_length=512)] = None,
    min_strength: Annotated[str, Query(max_length=32)] = "",
) -> HTMLResponse:
    memory = memory_of(request)
    tags = [t for t in (tag or []) if t.strip()]
    columns: list[Column] = []
    problem: EmbornalError | None = None
    first: Mode = mode if mode in MODES else "hybrid"
    if q.strip():
        floor = None
        try:
            if mode not in MODES:
                raise InvalidInput(f"mode must be one of {', '.join(MODES)}")
            floor = float(min_strength) if min_strength.strip() else None
            if floor is not None and not 0.0 <= floor <= 1.0:
                raise ValueError
        except ValueError:
            problem = InvalidInput("min_strength must be a number from 0 to 1")
        except EmbornalError as exc:
            problem = exc
        if problem is None:
            for each in sorted(MODES, key=lambda m: m != first):
                request_ = SearchRequest(
                    q=q,
                    mode=each,
                    under=under.strip() or None,
                    tags=tags,
                    min_strength=floor,
                    limit=10,
                    peek=True,  # looking at results is not handing them to an agent
                )
                try:
                    columns.append(Column(each, memory.search(signed.subject, request_).results))
                except InvalidInput as exc:  # the question itself: every mode would say so
                    columns, problem = [], exc
                    break
                except EmbornalError as exc:
                    columns.append(Column(each, [], exc))
    return page(
        "search.html",
        signed,
        nav="search",
        q=q,
        mode=first,
        under=under,
        tags=tags,
        min_strength=min_strength,
        columns=columns,
        problem=problem,
        status=problem.status if problem else 200,
    )


# --- access (admin) ----------------------------------------------------------


def _require_admin(signed: Signed) -> None:
    if not signed.is_admin:
        raise Forbidden("the access page needs the admin role")


@router.get("/policies")
def policies(
    request: Request,
    signed: SignedDep,
    see_subject: Annotated[str, Query(max_length=128)] = "",
    see_path: Annotated[str, Query(max_length=2200)] = "/",
    cursor: Annotated[str | None, Query(max_length=1024)] = None,
) -> HTMLResponse:
    memory = memory_of(request)
    try:
        _require_admin(signed)
        lines = memory.list_policies(signed.subject)
    except EmbornalError as exc:
        return problem_page(signed, exc, back="/ui")
    seen = seen_problem = None
    if see_subject.strip():
        try:
            seen = memory.see_as(
                signed.subject, see_subject.strip(), see_path or "/", limit=PAGE, cursor=cursor
            )
        except EmbornalError as exc:
            seen_problem = exc
    next_url = None
    if seen is not None and seen.next_cursor:
        query = {"see_subject": seen.subject, "see_path": seen.path, "cursor": seen.next_cursor}
        next_url = "/ui/policies?" + urlencode(query)
    return page(
        "policies.html",
        signed,
        nav="policies",
        lines=lines,
        see_subject=see_subject,
        see_path=see_path or "/",
        seen=seen,
        seen_problem=seen_problem,
        next_url=next_url,
    )


@router.post("/policies/add")
def add_policy(request: Request, post: PostedDep) -> Response:
    signed, form = post
    memory = memory_of(request)
    return change(
        signed, lambda: memory.add_policy(signed.subject, form.get("line", "")), back="/ui/policies"
    )


@router.post("/policies/remove")
def remove_policy(request: Request, post: PostedDep) -> Response:
    """First POST: the line and what removing it does (or the refusal); with `confirm`, do it."""
    signed, form = post
    memory = memory_of(request)
    line = form.get("line", "")
    if not confirmed(form):
        try:
            found = memory.policy_to_remove(signed.subject, line)
        except EmbornalError as exc:
            return problem_page(signed, exc, back="/ui/policies")
        return confirm_page(
            signed,
            title="Remove this policy line?",
            action="/ui/policies/remove",
            button="Remove",
            back="/ui/policies",
            fields={"line": str(found["line"])},
            code=str(found["line"]),
            consequences=[
                "What it grants (or denies, or the role it gives) ends on the next request "
                "of every server.",
                "Removing a line that gives the admin role can lock you out of this page.",
            ],
        )
    return change(signed, lambda: memory.remove_policy(signed.subject, line), back="/ui/policies")


@router.get("/export")
def export(request: Request, signed: SignedDep) -> Response:
    """The whole memory as JSON Lines (admin), spooled to disk beyond a few MiB."""
    memory = memory_of(request)
    # Closed by the streaming generator (or on refusal): it outlives this function.
    spool = tempfile.SpooledTemporaryFile(max_size=8 * 2**20, mode="w+", encoding="utf-8")  # noqa: SIM115
    try:
        memory.export(signed.subject, spool)
    except EmbornalError as exc:
        spool.close()
        return problem_page(signed, exc, back="/ui")
    spool.seek(0)

    def chunks() -> Iterator[bytes]:
        with spool:
            while block := spool.read(256 * 1024):
                yield block.encode()

    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return StreamingResponse(
        chunks(),
        media_type="application/jsonl",
        headers={"Content-Disposition": f'attachment; filename="embornal-{stamp}.jsonl"'},
    )


class SentFile(FileResponse):
    """A FileResponse that calls `release` once it has ended, however it ended: sent
    whole, cut off by the client (Starlette cancels the sending, or `send` raises), or
    stopped with the server. A background task would not run after an exception."""

    def __init__(self, path: Path, *, release: Callable[[], object], **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        self.release = release

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()


@router.get("/backup")
def backup(request: Request, signed: SignedDep) -> Response:
    """A consistent copy of the live memory (admin): SQLite's online backup of the file,
    or a pg_dump archive on PostgreSQL. It is made beside the memory under a hidden name
    its process holds a lock on, and removed once the download has ended (sent or cut
    off); one a killed server left goes with the next backup here or its next start."""
    memory = memory_of(request)
    postgres = memory.backend == "postgresql"
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    name = f"embornal-{stamp}.{'pgdump' if postgres else 'db'}"
    # Open until the response has been sent: the copy and its lock outlive this function.
    held = ExitStack()
    try:
        copy = held.enter_context(memory.backup_to_send(signed.subject))
    except EmbornalError as exc:
        return problem_page(signed, exc, back="/ui")
    return SentFile(copy, release=held.close, media_type="application/octet-stream", filename=name)


# --- writing: a new fact, and a fact's tags ------------------------------------------


def parse_tags(text: str) -> dict[str, str]:
    """`key=value` pairs separated by spaces, commas or lines (a value holds none of
    them: SPEC "Tags"); the memory checks keys and values as for any store."""
    tags: dict[str, str] = {}
    for pair in re.split(r"[\s,]+", text.strip()):
        if not pair:
            continue
        key, sep, value = pair.partition("=")
        if not sep:
            message = f"tags are key=value pairs separated by spaces; {pair[:64]!r} is not one"
            raise invalid("tags", message)
        tags[key] = value
    return tags


def tags_text(tags: dict[str, str]) -> str:
    """A fact's own tags as the tags field shows them (the memory writes `owner`)."""
    return " ".join(f"{k}={v}" for k, v in sorted(tags.items()) if k != OWNER_KEY)


@router.get("/facts/new")
def new_fact_form(
    request: Request,
    signed: SignedDep,
    path: Annotated[str, Query(max_length=2200)] = "",
) -> HTMLResponse:
    return page(
        "new_fact.html",
        signed,
        nav="new",
        form={"path": path, "content": "", "tags": "", "supersedes_id": ""},
        similar=None,
        problem=None,
    )


@router.post("/facts/new")
def new_fact(request: Request, post: PostedDep) -> Response:
    """Store a fact from the form. The first POST shows the facts it is `similar` to,
    if any, and stores nothing; storing it anyway (or as a supersede of one of them)
    is a second POST with `confirm`. With none similar it is stored at once."""
    signed, form = post
    memory = memory_of(request)
    values = {k: form.get(k, "") for k in ("path", "content", "tags", "supersedes_id")}
    try:
        supersedes = values["supersedes_id"].strip()
        if supersedes and not (supersedes.isascii() and supersedes.isdigit()):
            message = "supersedes must be a fact's id (a number)"
            raise invalid("supersedes_id", message)
        item = NewFact(
            values["path"],
            values["content"],
            parse_tags(values["tags"]) if values["tags"].strip() else None,
            _fact_id(int(supersedes)) if supersedes else None,
        )
        if not confirmed(form):
            similar = memory.similar_to_new(signed.subject, item)
            if similar:
                shown = _with_content(memory, signed.subject, similar)
                return page(
                    "new_fact.html", signed, nav="new", form=values, similar=shown, problem=None
                )
        stored = memory.store(signed.subject, item)
    except EmbornalError as exc:
        return page(
            "new_fact.html",
            signed,
            nav="new",
            status=exc.status,
            form=values,
            similar=None,
            problem=exc,
        )
    return see_other(f"/ui/facts/{stored.id}")


def _with_content(memory: Memory, subject: str, similar: list[Any]) -> list[tuple[Any, Any]]:
    """Each similar fact with the fact itself (a peek), so the person reads what it says;
    one hidden or deleted since is left out."""
    shown = []
    for hit in similar:
        try:
            shown.append((hit, memory.get(subject, hit.id, peek=True)))
        except EmbornalError:
            continue
    return shown


@router.post("/facts/{fact_id:int}/tags")
def change_tags(request: Request, post: PostedDep, fact_id: int) -> Response:
    """A fact never changes: new tags are a supersede with the same content."""
    signed, form = post
    memory = memory_of(request)
    try:
        new = memory.retag(signed.subject, _fact_id(fact_id), parse_tags(form.get("tags", "")))
    except EmbornalError as exc:
        return problem_page(signed, exc, back=f"/ui/facts/{fact_id}")
    return see_other(f"/ui/facts/{new.id}")


# --- tokens ------------------------------------------------------------------------


def _tokens_page(
    request: Request,
    signed: Signed,
    *,
    include_expired: bool = False,
    issued: Any = None,
) -> HTMLResponse:
    memory = memory_of(request)
    try:
        records = memory.list_tokens(signed.subject, include_expired=include_expired)
    except EmbornalError as exc:
        return problem_page(signed, exc, back="/ui")
    return page(
        "tokens.html",
        signed,
        nav="tokens",
        records=records,
        include_expired=include_expired,
        issued=issued,
        # As `token issue` warns: such a token works, but finds only what everyone may.
        unnamed=issued is not None and not issued.named,
    )


@router.get("/tokens")
def tokens_page(
    request: Request,
    signed: SignedDep,
    include_expired: Annotated[bool, Query(alias="all")] = False,
) -> HTMLResponse:
    return _tokens_page(request, signed, include_expired=include_expired)


@router.post("/tokens")
def issue_token(request: Request, post: PostedDep) -> HTMLResponse:
    """A token, shown once on this (uncached) page and never again: for any subject by
    an admin, for oneself by anyone else (within auth.max_token_lifetime)."""
    signed, form = post
    try:
        lifetime = parse_duration(form.get("expires", "") or "30d")
        subject = form.get("subject", "").strip() or signed.subject
        issued = memory_of(request).issue_token(
            signed.subject, subject, lifetime, label=form.get("label") or None
        )
    except EmbornalError as exc:
        return problem_page(signed, exc, back="/ui/tokens")
    return _tokens_page(request, signed, issued=issued)


@router.post("/tokens/revoke")
def revoke_token(request: Request, post: PostedDep) -> Response:
    """First POST: whose token it is and what revoking does; with `confirm`, revoke it."""
    signed, form = post
    memory = memory_of(request)
    jti = form.get("jti", "").strip()
    if not confirmed(form):
        try:
            if not jti:
                raise InvalidInput("give the id (jti) of the token to revoke")
            record = memory.token_to_revoke(signed.subject, jti)
        except EmbornalError as exc:
            return problem_page(signed, exc, back="/ui/tokens")
        consequences = [
            "Every request with it is refused (401) from the next second on, on every "
            "server, over the API, MCP and the console alike.",
            "It cannot be taken back: issue a new token for its holder instead.",
        ]
        if record is None:
            consequences.insert(
                0,
                "This memory did not issue it: a token with this jti from your identity "
                "provider is refused all the same.",
            )
        elif record.subject == signed.subject:
            consequences.append("If this console session runs on it, the session ends.")
        return confirm_page(
            signed,
            title="Revoke this token?",
            action="/ui/tokens/revoke",
            button="Revoke",
            back="/ui/tokens",
            fields={"jti": jti},
            token=record,
            code=jti,
            consequences=consequences,
        )
    return change(signed, lambda: memory.revoke_token(signed.subject, jti), back="/ui/tokens")


# --- the activity record -----------------------------------------------------------

_LOCAL_MINUTE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d)?$")


def _moment(value: str) -> str | None:
    """A time from the filter form: a datetime-local input has no zone; it means UTC."""
    value = value.strip()
    if not value:
        return None
    match = _LOCAL_MINUTE.match(value)
    if match is None:
        return value
    return value + ("Z" if match.group(1) else ":00Z")


@router.get("/activity")
def activity_page(
    request: Request,
    signed: SignedDep,
    subject: Annotated[str, Query(max_length=128)] = "",
    action: Annotated[str, Query(max_length=32)] = "",
    under: Annotated[str, Query(max_length=2200)] = "",
    since: Annotated[str, Query(max_length=64)] = "",
    until: Annotated[str, Query(max_length=64)] = "",
    cursor: Annotated[str | None, Query(max_length=1024)] = None,
) -> HTMLResponse:
    """Who changed what, with the API's filters: everything for an admin, else one's own."""
    filters = {
        "subject": subject.strip(),
        "action": action.strip(),
        "under": under.strip(),
        "since": since.strip(),
        "until": until.strip(),
    }
    wanted = ActivityFilters(
        subject=filters["subject"] or None,
        action=filters["action"] or None,
        under=filters["under"] or None,
        since=_moment(filters["since"]),
        until=_moment(filters["until"]),
    )
    entries, next_url, problem = [], None, None
    try:
        found = memory_of(request).activity(signed.subject, wanted, limit=PAGE, cursor=cursor)
        entries = found.entries
        if found.next_cursor:
            query = {k: v for k, v in filters.items() if v} | {"cursor": found.next_cursor}
            next_url = "/ui/activity?" + urlencode(query)
    except EmbornalError as exc:
        problem = exc
    return page(
        "activity.html",
        signed,
        nav="activity",
        status=problem.status if problem else 200,
        filters=filters,
        actions=ACTIVITY_ACTIONS,
        entries=entries,
        next_url=next_url,
        problem=problem,
    )
