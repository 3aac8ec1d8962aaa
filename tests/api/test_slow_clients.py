"""Clients that dribble a request are cut off: a header and a body read timeout.

A real uvicorn on loopback, served with the protocol `embornal serve` uses (short
timeouts here), and raw sockets that send a byte at a time. Each waits for the
server to answer or hang up (a blocking read with a timeout), never sleeps.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.api.timeouts import request_timeouts
from app.settings import ServerSettings

HEADER_SECONDS = 0.5
BODY_SECONDS = 0.8
PATIENCE = 8.0  # far above both: the old server held such clients for minutes


async def echo_length(scope: Scope, receive: Receive, send: Send) -> None:
    """Read the whole body, answer its length."""
    if scope["type"] != "http":
        return
    size, more = 0, True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    body = str(size).encode()
    headers = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module", params=[HttpToolsProtocol, H11Protocol], ids=["httptools", "h11"])
def port(request: pytest.FixtureRequest) -> Iterator[int]:
    settings = ServerSettings(
        header_timeout_seconds=HEADER_SECONDS, body_timeout_seconds=BODY_SECONDS
    )
    config = uvicorn.Config(
        echo_length,
        host="127.0.0.1",
        port=0,
        http=request_timeouts(settings, request.param),
        log_level="warning",
        lifespan="off",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        thread.join(0.01)
    yield server.servers[0].sockets[0].getsockname()[1]
    server.should_exit = True
    thread.join(10)


def dribble(port: int, first: bytes, drip: Callable[[int], bytes]) -> tuple[bytes, float]:
    """Send `first`, then one byte of `drip(n)` each time the server stays silent for
    0.1 s, until it answers or hangs up; what it sent back, and after how long."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        started = time.monotonic()
        sock.sendall(first)
        sock.settimeout(0.1)
        got, n = b"", 0
        while time.monotonic() - started < PATIENCE:
            try:
                chunk = sock.recv(4096)
            except TimeoutError:
                try:
                    sock.sendall(drip(n))
                except OSError:
                    break  # the server hung up
                n += 1
                continue
            except ConnectionResetError:
                break
            if not chunk:
                break
            got += chunk
        return got, time.monotonic() - started


def test_headers_dribbled_a_byte_at_a_time_are_cut_off(port: int) -> None:
    got, after = dribble(
        port, b"GET / HTTP/1.1\r\nHost: x\r\n", lambda n: b"X-a: b\r\n"[n % 8 : n % 8 + 1]
    )
    assert got.startswith(b"HTTP/1.1 408"), got
    assert after < HEADER_SECONDS + 2


def test_a_body_dribbled_a_byte_at_a_time_is_cut_off(port: int) -> None:
    head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"
    got, after = dribble(port, head, lambda n: b"x")
    assert got.startswith(b"HTTP/1.1 408") or got == b"", got
    assert after < BODY_SECONDS + 2


def test_a_silent_connection_is_closed(port: int) -> None:
    got, after = dribble(port, b"", lambda n: b"")
    assert got == b""  # it asked nothing: it is told nothing
    assert after < HEADER_SECONDS + 2


def read_answer(sock: socket.socket) -> bytes:
    """One whole answer: its head, then as many bytes as its content-length says (a busy
    machine may hand the body over in a read of its own)."""
    answer = b""
    while True:
        head, ended, body = answer.partition(b"\r\n\r\n")
        if ended:
            length = head.lower().partition(b"content-length: ")[2].split(b"\r\n")[0]
            if len(body) >= int(length or b"0"):
                return answer
        more = sock.recv(4096)
        if not more:
            return answer
        answer += more


def test_a_prompt_client_is_served_and_kept_alive(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        for _ in range(2):
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
            answer = read_answer(sock)
            assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"\r\n\r\n3"), answer
