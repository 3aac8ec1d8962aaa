"""MCP over stdio, for a local agent that starts `embornal mcp` as a command.

The process acts as the local owner, `default`, as every `embornal` command does
(whoever can start it can open memory.db anyway), unless `--subject` names another:
an owner gives a desktop agent its own subject, and its policies decide. stdout is
the protocol channel: nothing else may write to it (logs go to stderr, and the SDK
points fd 1 at stderr while it serves).
"""

from __future__ import annotations

from mcp.server.stdio import stdio_server

from app.mcp.server import ToolMetrics, build_server
from app.usecases.memory import LOCAL_SUBJECT, Memory


async def serve_stdio(memory: Memory, subject: str = LOCAL_SUBJECT) -> None:
    """Serve the memory's tools on stdin/stdout, as `subject`, until the client closes stdin."""
    server = build_server(lambda: memory, lambda: subject, metrics=ToolMetrics())
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
