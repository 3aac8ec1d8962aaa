"""A header and a body read timeout for `embornal serve` (uvicorn has neither).

uvicorn's keep-alive timer is cancelled by any byte that arrives, so a client that
sends its request a byte every few seconds holds a connection (and the memory it
buffers) for as long as it likes: the third attack held a hundred for over a minute
each. This protocol, uvicorn's own with two deadlines added, gives the headers of a
request `server.header_timeout_seconds` from their first byte (or from the connection
opening), and its body `server.body_timeout_seconds` from the end of its headers.
Past a deadline the client gets `408 Request Timeout` (if nothing was answered yet) and
the connection is closed; the app sees a disconnect, as when a client goes away.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http import auto

from app.settings import ServerSettings

_REQUEST_TIMEOUT = (
    b"HTTP/1.1 408 Request Timeout\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: 35\r\n"
    b"connection: close\r\n"
    b"\r\n"
    b"the request took too long to arrive"
)


def request_timeouts(
    settings: ServerSettings, protocol: type[asyncio.Protocol] | None = None
) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (`http=` of uvicorn.run) with these read deadlines;
    `protocol` is the one to extend (default: uvicorn's choice, httptools' where it is
    installed, else h11's)."""
    header_seconds = settings.header_timeout_seconds
    body_seconds = settings.body_timeout_seconds
    base: Any = protocol or auto.AutoHTTPProtocol

    class TimedProtocol(base):
        # Both of uvicorn's protocols keep the request being read as `self.cycle`: a new
        # cycle once its headers are in, `more_body` false once its body is.
        _deadline: asyncio.TimerHandle | None = None
        _phase: str | None = None
        _received = False

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._follow()

        def data_received(self, data: bytes) -> None:
            self._received = True
            super().data_received(data)
            self._follow()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._received = False  # the next request's first byte starts its clock
            self._follow()

        def connection_lost(self, exc: Exception | None) -> None:
            self._set(None)
            super().connection_lost(exc)

        def _follow(self) -> None:
            """Arm the deadline of what the connection waits for, keep it, or drop it."""
            cycle = self.cycle
            if self.transport is None or self.transport.is_closing():
                phase = None
            elif cycle is None or cycle.response_complete:
                # A new connection, or bytes of the next request: its headers are due.
                # An idle kept-alive one is uvicorn's own keep-alive timer's.
                phase = "headers" if cycle is None or self._received else None
            elif cycle.more_body:
                phase = "body"
            else:
                phase = None  # the whole request is in: the app answers at its pace
            self._set(phase)

        def _set(self, phase: str | None) -> None:
            if phase == self._phase:
                return  # a deadline runs from the phase's start, not from the last byte
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            self._phase = phase
            if phase is not None:
                seconds = header_seconds if phase == "headers" else body_seconds
                self._deadline = self.loop.call_later(seconds, self._too_slow)

        def _too_slow(self) -> None:
            self._deadline = None
            if self.transport is None or self.transport.is_closing():
                return
            cycle = self.cycle
            answered = cycle is not None and cycle.response_started and not cycle.response_complete
            if self._received and not answered:
                self.transport.write(_REQUEST_TIMEOUT)
            if cycle is not None and not cycle.response_complete:
                cycle.keep_alive = False
            self.transport.close()

    return TimedProtocol
