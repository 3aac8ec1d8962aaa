"""MCP over stdio, for a local agent that starts `embornal mcp` as a command.

The process acts as the local owner, `default`, as every `embornal` command does
(whoever can start it can open memory.db anyway), unless `--subject` names another:
an owner gives a desktop agent its own subject, and its policies decide. stdout is
the protocol channel: nothing else may write to it (logs go to stderr, and the SDK
points fd 1 at stderr while it serves).
"""

from __future__ import annotations

import contextvars
import signal
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from app.mcp.server import ToolMetrics, build_server
from app.usecases.memory import LOCAL_SUBJECT, Memory

if TYPE_CHECKING:  # the SDK's own names for what Server.run reads and writes
    from mcp.shared._stream_protocols import ReadStream, WriteStream

# How long, once stdin has closed, the requests read before may still take to be answered.
ANSWER_GRACE_SECONDS = 30.0


class AnswersOwed:
    """The ids of the requests read from stdin that are not answered yet.

    At the read stream's end the SDK's dispatcher cancels the handlers still running
    (`JSONRPCDispatcher.run`, mcp/shared/jsonrpc_dispatcher.py), and an answer its
    cancel meets is dropped: a client that piped its requests and closed stdin got the
    first answer only. The inbox holds that end back until every request read has been
    answered (or cancelled by the client), for ANSWER_GRACE_SECONDS at most.
    """

    def __init__(self) -> None:
        self.ids: set[types.RequestId] = set()
        self.changed = anyio.Event()

    def settle(self, request_id: Any) -> None:
        self.ids.discard(request_id)
        self.changed.set()

    async def all_settled(self) -> None:
        while self.ids:
            self.changed = anyio.Event()
            await self.changed.wait()


class _Wrapper:
    """A stream wrapped: closing it closes the inner one, as `async with` does."""

    inner: Any

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class Inbox(_Wrapper):
    """stdin's messages, noting each request; its end waits for the answers owed."""

    def __init__(self, owed: AnswersOwed, inner: ReadStream[SessionMessage | Exception]) -> None:
        self.owed = owed
        self.inner = inner

    @property
    def last_context(self) -> contextvars.Context | None:  # the sender's, as the SDK's own
        return getattr(self.inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            item = await self.inner.receive()
        except anyio.EndOfStream:
            with anyio.move_on_after(ANSWER_GRACE_SECONDS):
                await self.owed.all_settled()
            raise
        if isinstance(item, SessionMessage):
            message = item.message
            if isinstance(message, types.JSONRPCRequest):
                self.owed.ids.add(message.id)
            elif (
                isinstance(message, types.JSONRPCNotification)
                and message.method == "notifications/cancelled"
                and message.params
            ):
                self.owed.settle(message.params.get("requestId"))  # never answered
        return item

    def __aiter__(self) -> Inbox:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class Outbox(_Wrapper):
    """stdout's messages, settling each answer once it is handed to the writer."""

    def __init__(self, owed: AnswersOwed, inner: WriteStream[SessionMessage]) -> None:
        self.owed = owed
        self.inner = inner

    async def send(self, item: SessionMessage, /) -> None:
        try:
            await self.inner.send(item)
        finally:
            if isinstance(item.message, types.JSONRPCResponse | types.JSONRPCError):
                self.owed.settle(item.message.id)


async def serve_stdio(memory: Memory, subject: str = LOCAL_SUBJECT) -> bool:
    """Serve the memory's tools on stdin/stdout, as `subject`, until the client closes
    stdin (the requests read before it closed are answered first) or sends SIGTERM (an
    agent closing its server). True when SIGTERM stopped it: the serving is cancelled
    in the loop, so the caller closes the memory as on any end (an exception raised
    from the signal's handler met the SDK's task group wherever it landed, and
    sometimes printed its traceback)."""
    server = build_server(lambda: memory, lambda: subject, metrics=ToolMetrics())
    stopped = False

    async def stop_on_sigterm(scope: anyio.CancelScope) -> None:
        nonlocal stopped
        with anyio.open_signal_receiver(signal.SIGTERM) as signals:
            async for _ in signals:
                stopped = True
                scope.cancel()
                return

    async with anyio.create_task_group() as group:
        group.start_soon(stop_on_sigterm, group.cancel_scope)
        async with stdio_server() as (read_stream, write_stream):
            owed = AnswersOwed()
            await server.run(
                Inbox(owed, read_stream),
                Outbox(owed, write_stream),
                server.create_initialization_options(),
            )
        group.cancel_scope.cancel()  # stdin closed: the watcher goes too
    return stopped
