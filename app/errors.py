"""One exception hierarchy. Each error carries its HTTP status and a problem type.

Services raise these; the API turns them into RFC 9457 problem+json and the CLI
into a one-line message with exit status 1. Their messages are written for the
user: they never hold SQL, a stack trace or a server file path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard


class EmbornalError(Exception):
    status = 500
    type = "about:blank"
    title = "Internal Server Error"
    # A 5xx whose detail a client may read (a fault it can wait out or report); any
    # other 5xx is answered generically and its detail goes to the log.
    public = False

    def __init__(
        self,
        detail: str,
        *,
        errors: list[dict[str, Any]] | None = None,
        extensions: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors
        # RFC 9457 extension members: data a client acts on without parsing `detail`
        # (a duplicate refusal's `similar`). JSON values; never SQL, paths or traces.
        self.extensions = dict(extensions or {})

    @property
    def console_detail(self) -> str:
        """What the owner at the local console is told; a client gets `detail` alone."""
        return self.detail


class ConfigError(EmbornalError):
    """The configuration cannot be used: start-up stops."""

    title = "Configuration error"


class StartupError(EmbornalError):
    """The memory must not start (for example a vector width disagreement)."""

    status = 503
    title = "Service unavailable"


class InvalidInput(EmbornalError):
    status = 422
    type = "/problems/invalid-input"
    title = "Invalid input"


def invalid(field: str, message: str) -> InvalidInput:
    """An InvalidInput about one field, named in its `errors` as validation names it."""
    return InvalidInput(message, errors=[{"loc": [field], "msg": message}])


class BadRequest(EmbornalError):
    """A request the server will not read at all (a Host it does not answer to)."""

    status = 400
    type = "/problems/bad-request"
    title = "Bad request"


class NotFound(EmbornalError):
    status = 404
    type = "/problems/not-found"
    title = "Not found"


class Forbidden(EmbornalError):
    status = 403
    type = "/problems/forbidden"
    title = "Forbidden"


class Conflict(EmbornalError):
    status = 409
    type = "/problems/conflict"
    title = "Conflict"


# What every refused token is told, whichever check failed (app.auth.tokens, and the
# ACL's refusal of a subject named like a role).
UNAUTHORIZED_MESSAGE = "invalid or missing bearer token"


class Unauthorized(EmbornalError):
    status = 401
    type = "/problems/unauthorized"
    title = "Unauthorized"


class TokenExpired(Unauthorized):
    """A token valid in every way but its `exp`: the one refusal that says why (RFC 6750's
    `error_description`), so the holder knows to get a new token."""

    def challenge(self) -> str:
        return f'Bearer error="invalid_token", error_description="{self.detail}"'


class PayloadTooLarge(EmbornalError):
    status = 413
    type = "/problems/payload-too-large"
    title = "Payload too large"


class UnsupportedMediaType(EmbornalError):
    status = 415
    type = "/problems/unsupported-media-type"
    title = "Unsupported media type"


class Unavailable(EmbornalError):
    """A part the request needs is not there now. `retry_after` (seconds) is set when
    waiting is the remedy (a database that is busy or restarting): it becomes the
    response's Retry-After header."""

    status = 503
    type = "/problems/unavailable"
    title = "Service unavailable"
    public = True

    def __init__(
        self,
        detail: str,
        *,
        errors: list[dict[str, Any]] | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(detail, errors=errors)
        self.retry_after = retry_after


class InsufficientStorage(EmbornalError):
    """The database's disk is full: nothing of the request was written."""

    status = 507
    type = "/problems/insufficient-storage"
    title = "Insufficient storage"
    public = True


def problem_body(error: EmbornalError) -> dict[str, Any]:
    """The RFC 9457 problem of a public error, its extension members included: what REST
    answers (app.api.problems, which adds `errors`) and what MCP carries as data."""
    body = {"type": error.type, "title": error.title, "status": error.status}
    return {**error.extensions, **body, "detail": error.detail}


def is_public(exc: BaseException) -> TypeGuard[EmbornalError]:
    """Whether a client may be told this error's detail (every front end asks this)."""
    return isinstance(exc, EmbornalError) and (exc.status < 500 or exc.public)


# A validation message quotes the limits of a field, never the value sent; this bounds
# anything else pydantic might one day put in it.
MAX_MESSAGE_CHARS = 300


def field_name(loc: Sequence[str | int]) -> str:
    """Where a field error points, after the request part it came from:
    ['body', 'facts', 3, 'content'] -> 'facts[3].content'; ['query', 'limit'] -> 'limit'."""
    name = ""
    for part in loc[1:] if len(loc) > 1 else loc:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else part)
    return name or "body"


def invalid_detail(errors: Sequence[Mapping[str, Any]]) -> str:
    """The one-line detail of a request whose fields failed validation, for every front end.

    Each field with what is wanted of it ("limit: Input should be less than or equal to
    100"): a client that reads only `detail` (a model reading a tool error) learns the
    bound, not just the field.
    """
    wanted: dict[str, str] = {}
    for e in errors:
        wanted.setdefault(field_name(e["loc"]), str(e["msg"])[:MAX_MESSAGE_CHARS])
    fields = sorted(wanted)
    shown = "; ".join(f"{name}: {wanted[name]}" for name in fields[:5])
    shown += "; ..." if len(fields) > 5 else ""
    return f"Invalid value for {shown}." if shown else "The request is not valid."
