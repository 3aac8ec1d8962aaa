"""MCP clients (the SDK's own) on the per-test app of tests/api, over its ASGI interface.

The HTTP layer is real (bearer check, streamable HTTP transport, JSON-RPC); only the
socket is skipped, which keeps the authorization matrix fast. tests/mcp/test_mcp_live.py
runs the same client against real processes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from fastapi import FastAPI
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from app.mcp.server import TOOLS
from tests.api import conftest as api

# The app, tokens and policy helpers of the REST tests, for the same memory and clock.
app, auth, add_policy, fact_count = api.app, api.auth, api.add_policy, api.fact_count
BASE = "http://testserver"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Mcp:
    """Connects as any subject to an app whose lifespan is running."""

    def __init__(self, app: FastAPI, auth: Any) -> None:
        self.app, self.auth = app, auth
        self.transport = httpx2.ASGITransport(app=app)

    def http(self, headers: dict[str, str] | None = None) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=self.transport, base_url=BASE, headers=headers)

    @asynccontextmanager
    async def connect(self, subject: str, **headers: str) -> AsyncIterator[Client]:
        async with (
            self.http({**self.auth(subject), **headers}) as http,
            Client(streamable_http_client(f"{BASE}/mcp", http_client=http)) as client,
        ):
            yield client

    async def rest(self, subject: str, method: str, url: str, **kwargs: Any) -> httpx2.Response:
        """The same request over the REST API, to compare answers with."""
        async with self.http(self.auth(subject)) as http:
            return await http.request(method, url, **kwargs)


@pytest.fixture
async def mcp(app: FastAPI, auth: Any) -> AsyncIterator[Mcp]:
    # Mounted transports do not run their own lifespan: the app's starts /mcp (app.main).
    async with app.router.lifespan_context(app):
        yield Mcp(app, auth)


async def ok(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; its structured result (the full records), whose
    brief (app.mcp.briefs) is the one text block, as compact JSON."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, (tool, result.content)
    assert result.structured_content is not None
    (text,) = result.content
    assert json.loads(text.text) == TOOLS[tool].brief(result.structured_content)
    return result.structured_content


async def refused(client: Client, tool: str, **arguments: Any) -> str:
    """Call a tool that must fail as a tool error; its one line of text."""
    result: CallToolResult = await client.call_tool(tool, arguments)
    assert result.is_error, (tool, result.structured_content)
    assert result.structured_content is None
    (content,) = result.content
    text = content.text
    assert "\n" not in text and "Traceback" not in text, text
    return text
