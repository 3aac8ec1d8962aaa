"""A database fault is a tool error with the REST problem's one line, not a crash."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import sqlean

from app.settings import Settings
from tests.mcp.conftest import Mcp, ok, refused

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(home: Path, fresh_memory: Callable[[Path], Settings]) -> Settings:
    base = fresh_memory(home)
    database = base.database.model_copy(update={"busy_timeout_ms": 200})
    return base.model_copy(update={"database": database})


async def test_a_writer_held_past_the_busy_timeout_is_a_tool_error(
    mcp: Mcp, settings: Settings
) -> None:
    holder = sqlean.connect(str(settings.database_path), isolation_level=None)
    async with mcp.connect("default") as client:
        try:
            holder.execute("BEGIN IMMEDIATE")
            text = await refused(client, "store_fact", path="/mcp/faults", content="held")
            rest = await mcp.rest(
                "default", "POST", "/v1/facts", json={"path": "/mcp/faults", "content": "held"}
            )
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert rest.status_code == 503
        assert text == rest.json()["detail"]
        assert "busy timeout" in text
        # The same session goes on once the lock is free.
        stored = await ok(client, "store_fact", path="/mcp/faults", content="after")
        assert stored["content"] == "after"
