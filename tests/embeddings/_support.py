"""Helpers shared by the embeddings tests: loopback file server and settings factory."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from app.settings import Settings

# Nothing listens on the discard port of loopback: a stray fetch fails fast, locally.
NOWHERE = "http://127.0.0.1:9"


MakeSettings = Callable[..., Settings]


@dataclass
class Redirect:
    to: str


@dataclass
class FileServer:
    url: str
    routes: dict[str, bytes | Redirect | int] = field(default_factory=dict)
    # (path, Range header or None) for each request, in order.
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    honor_range: bool = True


def _handler(server: FileServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            range_header = self.headers.get("Range")
            server.requests.append((self.path, range_header))
            route = server.routes.get(self.path)
            if route is None or isinstance(route, int):
                self.send_error(route or 404)
                return
            if isinstance(route, Redirect):
                self.send_response(302)
                self.send_header("Location", route.to)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body, start = route, 0
            if range_header and server.honor_range:
                start = int(range_header.removeprefix("bytes=").split("-")[0])
                if start >= len(body):
                    self.send_error(416)
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(len(body) - start))
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            self.wfile.write(body[start:])

    return Handler


@contextmanager
def serve() -> Iterator[FileServer]:
    """An HTTP server on 127.0.0.1 (ephemeral port) serving `routes`, with Range support."""
    state = FileServer(url="")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    # A short poll keeps shutdown() from waiting half a second per test.
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
