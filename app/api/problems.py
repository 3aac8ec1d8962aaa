"""Every error as an RFC 9457 problem (application/problem+json).

Our own errors, FastAPI's validation errors, Starlette's 404/405 and anything
unexpected all leave in one shape. A body never holds a stack trace, SQL or a
server file path: an unexpected error is logged here and answered generically.
"""

from __future__ import annotations

import http
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.routing import Match

from app.errors import (
    MAX_MESSAGE_CHARS,
    Conflict,
    EmbornalError,
    Forbidden,
    InsufficientStorage,
    InvalidInput,
    NotFound,
    PayloadTooLarge,
    TokenExpired,
    Unauthorized,
    Unavailable,
    UnsupportedMediaType,
    invalid_detail,
    is_public,
)

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
MAX_FIELD_ERRORS = 50

# Framework errors (404, 405, 413 from the body limit, 422 from FastAPI) take the
# type and title of the matching error of app.errors, so one status reads one way.
_KNOWN: dict[int, tuple[str, str]] = {
    cls.status: (cls.type, cls.title)
    for cls in (
        Unauthorized,
        Forbidden,
        NotFound,
        Conflict,
        PayloadTooLarge,
        UnsupportedMediaType,
        InvalidInput,
        InsufficientStorage,
    )
}
_KNOWN[405] = ("/problems/method-not-allowed", "Method not allowed")
_KNOWN[500] = ("/problems/internal", "Internal server error")
_KNOWN[503] = (Unavailable.type, Unavailable.title)
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def problem_type(status: int) -> str:
    return _KNOWN.get(status, ("about:blank", ""))[0]


def problem_title(status: int) -> str:
    return _KNOWN.get(status, ("", http.HTTPStatus(status).phrase))[1]


def problem_response(
    status: int,
    detail: str,
    *,
    title: str | None = None,
    type_: str | None = None,
    errors: Sequence[Mapping[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
    extensions: Mapping[str, Any] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {
        **(extensions or {}),
        "type": type_ or problem_type(status),
        "title": title or problem_title(status),
        "status": status,
        "detail": detail,
    }
    if errors:
        body["errors"] = [
            {"loc": list(e.get("loc", [])), "msg": str(e.get("msg", ""))[:MAX_MESSAGE_CHARS]}
            for e in errors[:MAX_FIELD_ERRORS]
        ]
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_JSON)


async def _embornal_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, EmbornalError)
    if not is_public(exc):
        # Config and start-up errors name files: they are for the log, not the client.
        log.error("request failed: %s: %s", type(exc).__name__, exc.detail)
        return problem_response(500, "The server failed to handle the request.")
    headers = None
    if isinstance(exc, Unauthorized):
        challenge = exc.challenge() if isinstance(exc, TokenExpired) else "Bearer"
        headers = {"WWW-Authenticate": challenge}
    if isinstance(exc, Unavailable) and exc.retry_after is not None:
        headers = {"Retry-After": str(exc.retry_after)}
    type_ = exc.type if exc.type != "about:blank" else None
    return problem_response(
        exc.status,
        exc.detail,
        title=exc.title,
        type_=type_,
        errors=exc.errors,
        headers=headers,
        extensions=exc.extensions,
    )


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    if status == 400 and isinstance(exc.__cause__, ValueError | RecursionError):
        # FastAPI's bare 400 for a JSON body it cannot decode: bytes that are not UTF-8, or
        # nesting deeper than the parser goes. Invalid JSON either way, as a syntax error is.
        return _invalid_json()
    if status == 404:
        detail = "There is no such resource."
    elif status == 405:
        detail = f"The method {request.method} is not allowed here."
        return problem_response(
            status, detail, headers={**(exc.headers or {}), "Allow": _allowed_methods(request)}
        )
    elif isinstance(exc.detail, str) and status < 500:
        detail = exc.detail
    else:
        detail = http.HTTPStatus(status).phrase
    return problem_response(status, detail, headers=exc.headers)


def _invalid_json() -> JSONResponse:
    errors = [{"loc": ["body"], "msg": "JSON decode error"}]
    return problem_response(422, "The request body is not valid JSON.", errors=errors)


def _allowed_methods(request: Request) -> str:
    """Every method the target resource takes (RFC 9110: `Allow` on a 405). Starlette's own
    405 names only the methods of the first route whose path matched: `/v1/facts/{id}` said
    `GET` and left out `DELETE`. Asked of the router, so included routers count too."""
    routes = request.app.router.routes
    allowed = [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes
        )
    ]
    return ", ".join(allowed)


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    # `input` and `ctx` are dropped: they echo what was sent, which may be huge.
    errors = [
        {"loc": [part for part in e.get("loc", ()) if isinstance(part, str | int)], "msg": e["msg"]}
        for e in exc.errors()
    ]
    if any(e.get("type") == "json_invalid" for e in exc.errors()):
        return _invalid_json()
    return problem_response(422, invalid_detail(errors), errors=errors)


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    log.error("unhandled error in %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(500, "The server failed to handle the request.")


def install_problem_handlers(app: FastAPI) -> None:
    app.add_exception_handler(EmbornalError, _embornal_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _unexpected_error)


@contextmanager
def located(*prefix: str | int) -> Iterator[None]:
    """Put the request part ('body', 'query', 'path') in front of a service error's `loc`,
    as FastAPI's own validation errors have it."""
    try:
        yield
    except InvalidInput as exc:
        # An error that names no field is about the input found at `prefix` as a whole.
        found = exc.errors or [{"loc": [], "msg": exc.detail}]
        errors = [{**e, "loc": [*prefix, *e.get("loc", [])]} for e in found]
        raise InvalidInput(exc.detail, errors=errors) from None
