"""MCP over stdio, for a local agent that starts `embornal mcp` as a command.

The process acts as the local owner, `default`, as every `embornal` command does
(whoever can start it can open memory.db anyway), unless `--subject` names another:
an owner gives a desktop agent its own subject, and its policies decide. stdout is
the protocol channel: nothing else may write to it (logs go to stderr, and the SDK
points fd 1 at stderr while it serves).
"""

from __future__ import annotations

import signal

import anyio
from mcp.server.stdio import stdio_server

from app.mcp.server import ToolMetrics, build_server
from app.usecases.memory import LOCAL_SUBJECT, Memory


async def serve_stdio(memory: Memory, subject: str = LOCAL_SUBJECT) -> bool:
    """Serve the memory's tools on stdin/stdout, as `subject`, until the client closes
    stdin or sends SIGTERM (an agent closing its server). True when SIGTERM stopped it:
    the serving is cancelled in the loop, so the caller closes the memory as on any
    end (an exception raised from the signal's handler met the SDK's task group
    wherever it landed, and sometimes printed its traceback)."""
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
            await server.run(read_stream, write_stream, server.create_initialization_options())
        group.cancel_scope.cancel()  # stdin closed: the watcher goes too
    return stopped
