"""Refuse request bodies over the configured size with a 413 problem, before they are read whole.

A pure ASGI middleware (BaseHTTPMiddleware would buffer and wrap the stream).
It checks the declared Content-Length up front, and counts the bytes of the
stream as the app reads them, for chunked bodies or a Content-Length that lies.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.problems import problem_response

TOO_LARGE = "The request body is larger than {limit} bytes."


class BodyTooLarge(HTTPException):
    """Raised from `receive`: FastAPI re-raises HTTPExceptions met while reading a body,
    so the app's own handler answers with the 413 problem."""

    def __init__(self, limit: int) -> None:
        super().__init__(status_code=413, detail=TOO_LARGE.format(limit=limit))


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

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
        response = problem_response(413, TOO_LARGE.format(limit=self.max_bytes))
        # The client may still be sending: close rather than read a body we refused.
        response.headers["Connection"] = "close"
        await response(scope, receive, send)
