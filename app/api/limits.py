"""Refuse request bodies the API cannot take, before they are read whole: over the
configured size (413), or not JSON (415).

Pure ASGI middlewares (BaseHTTPMiddleware would buffer and wrap the stream).
The size limit checks the declared Content-Length up front, and counts the bytes
of the stream as the app reads them, for chunked bodies or a Content-Length that
lies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.problems import problem_response
from app.errors import EmbornalError, PayloadTooLarge

TOO_LARGE = "The request body is larger than {limit} bytes."


class BodyTooLarge(HTTPException):
    """Raised from `receive`: FastAPI re-raises HTTPExceptions met while reading a body,
    so the app's own handler answers with the 413 problem."""

    def __init__(self, limit: int) -> None:
        super().__init__(status_code=413, detail=TOO_LARGE.format(limit=limit))


class BodyLimitMiddleware:
    """`refusals` answers for the paths that speak another protocol (/mcp: a JSON-RPC
    error the MCP client can show), by path; every other path gets the 413 problem."""

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        refusals: Mapping[str, Callable[[EmbornalError], Response]] | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.refusals = dict(refusals or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return

        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            # Only reached when the app let it escape (it read the body outside a route).
            if started:
                raise
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = TOO_LARGE.format(limit=self.max_bytes)
        answer = self.refusals.get(scope.get("path", ""))
        response = answer(PayloadTooLarge(detail)) if answer else problem_response(413, detail)
        # The client may still be sending: close rather than read a body we refused.
        response.headers["Connection"] = "close"
        await response(scope, receive, send)


NOT_JSON = "The request body must be application/json (send Content-Type: application/json)."


def is_json(content_type: str | None) -> bool:
    """`application/json` or `application/<anything>+json`, parameters aside: what
    FastAPI itself parses as JSON, so nothing it would read is refused here."""
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    main, _, sub = media.partition("/")
    return main == "application" and (sub == "json" or sub.endswith("+json"))


def has_body(headers: Headers) -> bool:
    length = headers.get("content-length")
    if length is not None:
        return length.strip() != "0"
    return "transfer-encoding" in headers


class JsonBodyMiddleware:
    """Answer 415 to a request that carries a body in any other type than JSON.

    Without it FastAPI reads a form or text body as a string and answers 422 about
    dictionaries; the client needs to hear that the content type is wrong. A request
    without a body passes whatever its Content-Type says.
    """

    def __init__(self, app: ASGIApp, forms_under: tuple[str, ...] = ()) -> None:
        self.app = app
        # Routes under these prefixes (the web console) take HTML forms and check
        # their own content types.
        self.forms_under = forms_under

    def _takes_forms(self, path: str) -> bool:
        return any(path.startswith(prefix) for prefix in self.forms_under)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._takes_forms(str(scope.get("path", ""))):
            headers = Headers(scope=scope)
            if has_body(headers) and not is_json(headers.get("content-type")):
                response = problem_response(415, NOT_JSON)
                # The body is never read: close rather than leave it in the connection.
                response.headers["Connection"] = "close"
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
