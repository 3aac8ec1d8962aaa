"""MCP over streamable HTTP at /mcp of the service, behind the same bearer tokens.

From the SDK: the streamable HTTP transport (stateless, JSON responses: any
replica can answer any request, so it works behind a load balancer), its bearer
backend and auth context (`BearerAuthBackend` over a `TokenVerifier`, so that
`get_access_token()` names the caller in a handler). Our own: the verifier behind
that protocol is app.auth.tokens.TokenVerifier, the one the REST API uses; the 401
and the RFC 9728 metadata name `http.public_url` when it is set, else the URL the
client used, and then only for a Host in `http.allowed_hosts` (a client must not
choose the resource URL we hand out); and a browser Origin that is neither ours nor
in `http.cors_origins` is refused (DNS rebinding: the transport spec asks it).

The routes are plain Starlette routes, outside the OpenAPI document.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread
from mcp.server import Server
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware, get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Match, Route
from starlette.types import Receive, Scope, Send

from app.auth.tokens import UNAUTHORIZED_MESSAGE
from app.errors import (
    BadRequest,
    EmbornalError,
    Forbidden,
    TokenExpired,
    Unauthorized,
    problem_body,
)
from app.settings import HttpSettings

MCP_PATH = "/mcp"
METADATA_PATH = "/.well-known/oauth-protected-resource"
# JSON-RPC's code for a request the server will not take (a bad token, a body too large).
INVALID_REQUEST = -32600

# Why the verifier refused this request's token: set while the bearer backend
# authenticates, read by _RequireBearer in the same request (one task, one context).
_refusal: ContextVar[Unauthorized | None] = ContextVar("mcp_token_refusal", default=None)


class JwtVerifier:
    """The SDK's TokenVerifier protocol over our verifier: the same checks as REST.

    A token must also name a subject the memory accepts (not a role's name): asked of
    the use cases, as every REST call does, so the refusal is the same 401 at the door.
    `verify` and `admit` block (a JWKS fetch, a read transaction): run in a thread.
    """

    def __init__(self, verify: Callable[[str], str], admit: Callable[[str], object]) -> None:
        self._verify = verify
        self._admit = admit

    async def verify_token(self, token: str) -> AccessToken | None:
        def check() -> str:
            subject = self._verify(token)
            self._admit(subject)
            return subject

        try:
            subject = await anyio.to_thread.run_sync(check)
        except Unauthorized as refused:
            _refusal.set(refused)  # the reason is in the verifier's log, as for REST
            return None
        # Anything else (the database down) is the server's failure, answered as REST's 500.
        return AccessToken(token=token, client_id=subject, scopes=[], subject=subject)


def token_subject() -> str:
    """The subject of the current MCP request's token; there is no anonymous caller."""
    token = get_access_token()
    if token is None or not token.subject:
        raise Unauthorized(UNAUTHORIZED_MESSAGE)
    return token.subject


class _RequireBearer:
    """401 with `WWW-Authenticate` (naming the resource metadata, as the MCP authorization
    spec asks) for a request the bearer backend did not authenticate. Its body is a
    JSON-RPC error (the problem in `data`): the SDK client shows a JSON-RPC error's message
    to its caller, and only a generic "error response" for any other body."""

    def __init__(
        self, app: Callable[[Scope, Receive, Send], Any], base_url: Callable[[Request], str]
    ) -> None:
        self.app, self.base_url = app, base_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if isinstance(scope.get("user"), AuthenticatedUser):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        challenge = f'Bearer resource_metadata="{self.base_url(request)}{METADATA_PATH}"'
        refused = _refusal.get() or Unauthorized(UNAUTHORIZED_MESSAGE)
        if "authorization" in request.headers:
            # RFC 6750: an error code only when a token was sent; which check failed stays
            # unsaid, but for expiry (app.auth.tokens says why).
            challenge += ', error="invalid_token"'
            if isinstance(refused, TokenExpired):
                challenge += f', error_description="{refused.detail}"'
        response = jsonrpc_refusal(refused)
        response.headers["WWW-Authenticate"] = challenge
        await response(scope, receive, send)


def _problem(error: EmbornalError) -> JSONResponse:
    return JSONResponse(
        problem_body(error), status_code=error.status, media_type="application/problem+json"
    )


def jsonrpc_refusal(error: EmbornalError) -> JSONResponse:
    """An HTTP error status whose body is a JSON-RPC error (`id` null: the request was
    refused before it was read; the SDK puts back its own id), with the problem REST
    would give as its `data`."""
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": INVALID_REQUEST, "message": error.detail, "data": problem_body(error)},
    }
    return JSONResponse(body, status_code=error.status)


def _origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


class _Guard:
    """Host and Origin checks before anything else of /mcp and its metadata."""

    def __init__(self, http: HttpSettings, bind_host: str) -> None:
        self.public_url = http.public_url
        self.hosts = http.hosts_for(bind_host)
        self.origins = frozenset(http.cors_origins)

    def base_url(self, request: Request) -> str:
        if self.public_url is not None:
            return self.public_url
        # Scheme and host as the client addressed us (uvicorn applies X-Forwarded-* from
        # trusted proxies); the Host was checked against http.allowed_hosts.
        return str(request.base_url).rstrip("/")

    def refusal(self, request: Request, *, check_origin: bool) -> JSONResponse | None:
        host = (request.url.hostname or "").lower()
        if self.hosts is not None and host not in self.hosts:
            return _problem(
                BadRequest(f"host {host!r} is not one this server answers to (http.allowed_hosts)")
            )
        origin = request.headers.get("origin")
        if check_origin and origin is not None:
            own = _origin_of(self.base_url(request))
            if origin.lower() != own and origin.lower() not in self.origins:
                return _problem(
                    Forbidden(f"origin {origin!r} may not call /mcp (http.cors_origins)")
                )
        return None


def _issuer_url(issuer: str | None) -> str | None:
    """auth.issuer as an authorization server, when it is one (an http(s) URL)."""
    if not issuer:
        return None
    parts = urlsplit(issuer)
    return issuer if parts.scheme in ("http", "https") and parts.netloc else None


class _Route(Route):
    """A route that names itself in the scope, as FastAPI's do, so the access log and the
    request metrics show /mcp and not `unmatched`."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match is not Match.NONE:
            child["route"] = self
        return match, child


class _Guarded:
    """An ASGI app (a plain function would be taken for a request handler by Starlette):
    the guard's refusal, else the app."""

    def __init__(self, guard: _Guard, app: Callable[[Scope, Receive, Send], Any]) -> None:
        self.guard, self.app = guard, app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = self.guard.refusal(Request(scope), check_origin=True)
        if refused is not None:
            await refused(scope, receive, send)
            return
        await self.app(scope, receive, send)


class McpEndpoint:
    """The /mcp endpoint: bearer check, then the SDK's transport; started by the app's lifespan."""

    def __init__(
        self,
        server: Server[Any],
        verifier: JwtVerifier,
        issuer: str | None,
        http: HttpSettings | None = None,
        bind_host: str = "127.0.0.1",
    ) -> None:
        self.server = server
        self.issuer = _issuer_url(issuer)
        self.guard = _Guard(http or HttpSettings(), bind_host)
        self._manager: StreamableHTTPSessionManager | None = None

        async def transport(scope: Scope, receive: Receive, send: Send) -> None:
            if self._manager is None:
                await Response("MCP is not running", status_code=503)(scope, receive, send)
                return
            await self._manager.handle_request(scope, receive, send)

        authenticated = AuthenticationMiddleware(
            AuthContextMiddleware(_RequireBearer(transport, self.guard.base_url)),
            backend=BearerAuthBackend(verifier),
        )

        self.asgi = _Guarded(self.guard, authenticated)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the transport for the app's lifetime (a manager runs once: one per lifespan)."""
        manager = StreamableHTTPSessionManager(
            app=self.server,
            stateless=True,
            json_response=True,
            # The SDK's DNS-rebinding guard allows only localhost Host headers, which would
            # refuse the service behind its real name. Every request needs a bearer token,
            # which a rebinding web page cannot have, so the guard adds nothing here.
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def metadata(self, request: Request) -> Response:
        """RFC 9728 protected-resource metadata: what this resource is and who issues its tokens."""
        refused = self.guard.refusal(request, check_origin=False)
        if refused is not None:
            return refused
        document: dict[str, Any] = {
            "resource": self.guard.base_url(request) + MCP_PATH,
            "bearer_methods_supported": ["header"],
            "resource_name": "embornal",
        }
        if self.issuer:
            document["authorization_servers"] = [self.issuer]
        return JSONResponse(document, headers={"Cache-Control": "public, max-age=3600"})

    def routes(self) -> list[BaseRoute]:
        return [
            # Stateless: no server-sent stream to hold open, so GET is 405 (the transport
            # spec allows it) rather than a stream per request with no bound.
            _Route(MCP_PATH, self.asgi, methods=["POST", "DELETE"], include_in_schema=False),
            # The root form, and the path-suffixed one RFC 9728 section 3.1 derives from /mcp.
            _Route(METADATA_PATH, self.metadata, methods=["GET"], include_in_schema=False),
            _Route(
                METADATA_PATH + MCP_PATH, self.metadata, methods=["GET"], include_in_schema=False
            ),
        ]
