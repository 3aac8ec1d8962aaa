"""CORS for browser callers of the REST API (and /mcp), off unless http.cors_origins lists
origins.

Bearer tokens, not cookies, authenticate the API: credentials are never allowed, so a
listed page can call with a token it holds and no page can ride a console session. A
preflight from an origin not listed gets no Access-Control-Allow-Origin (the browser then
refuses the call) and, as every error here, a problem body rather than Starlette's text.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response
from starlette.types import ASGIApp

from app.api.observability import REQUEST_ID_HEADER
from app.api.problems import problem_response

METHODS = ("GET", "POST", "PUT", "DELETE")
# What the API and the MCP transport read from a request, and what a caller may read back.
REQUEST_HEADERS = ("authorization", "content-type", "mcp-protocol-version", "last-event-id")
RESPONSE_HEADERS = ("www-authenticate", REQUEST_ID_HEADER, "location")
# How long a browser may keep a preflight's answer (seconds).
MAX_AGE = 600


class Cors(CORSMiddleware):
    def __init__(self, app: ASGIApp, origins: Sequence[str]) -> None:
        super().__init__(
            app,
            allow_origins=list(origins),
            allow_methods=list(METHODS),
            allow_headers=list(REQUEST_HEADERS),
            expose_headers=list(RESPONSE_HEADERS),
            allow_credentials=False,
            max_age=MAX_AGE,
        )

    def preflight_response(self, request_headers: Headers) -> Response:
        answer = super().preflight_response(request_headers)
        if answer.status_code == 200:
            return answer
        refused = bytes(answer.body).decode().removeprefix("Disallowed CORS ")
        detail = f"this cross-origin request is not allowed ({refused}; http.cors_origins)"
        # What is allowed stays readable (Allow-Methods, Allow-Headers); Allow-Origin goes,
        # so no refused preflight can be read as a grant (a listed origin asking for a
        # header the API does not take included).
        kept = {
            k: v
            for k, v in answer.headers.items()
            if k.startswith("access-control-") and k != "access-control-allow-origin"
        }
        return problem_response(400, detail, headers=kept)
