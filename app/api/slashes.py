"""The trailing-slash redirect, with a Location that names no host.

Starlette answers `/ui/` with `307 Location: http://<Host>/ui`, built from whatever
`Host` header the request carried: a response that repeats a header an attacker
chose (a cache keyed on the path alone would hand it to others; behind a proxy the
host is not even ours to name). The same redirect as a path lands where the client
asked, on the host it asked, and says nothing it was not told.
"""

from __future__ import annotations

from starlette.datastructures import URL
from starlette.responses import RedirectResponse
from starlette.routing import Match, Router, get_route_path
from starlette.types import Receive, Scope, Send


def relative_slash_redirects(router: Router) -> None:
    """Replace `router`'s slash redirect with one whose Location is a path (and query)."""
    not_found = router.default
    router.redirect_slashes = False

    async def default(scope: Scope, receive: Receive, send: Send) -> None:
        route_path = get_route_path(scope)
        if scope["type"] == "http" and route_path != "/":
            path = scope["path"]
            other = {**scope, "path": path.rstrip("/") if path.endswith("/") else path + "/"}
            if any(route.matches(other)[0] is not Match.NONE for route in router.routes):
                # No headers, no server: Starlette's URL is then the path and query alone
                # (a leading `//`, which would read as a host, comes out as `/%2F`).
                location = str(URL(scope={**other, "headers": [], "server": None}))
                await RedirectResponse(location)(scope, receive, send)
                return
        await not_found(scope, receive, send)

    router.default = default
