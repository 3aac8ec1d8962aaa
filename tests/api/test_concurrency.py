"""Many concurrent requests queue for the database instead of failing.

A request must never hold a connection (or the write lock) while it waits for a
worker thread: with few threads and many requests, that starves every request
(see app/api/deps.py). The thread pool is made small here so that the failure,
if it came back, shows in a second instead of at production load.
"""

from __future__ import annotations

from collections import Counter

import anyio
import anyio.to_thread
import httpx

from app.main import create_app
from app.runtime import open_runtime
from app.settings import Settings
from tests.api.conftest import Auth
from tests.conftest import FakeClock

THREADS = 4
EACH = 15


def test_many_concurrent_reads_and_writes_all_succeed(
    settings: Settings, clock: FakeClock, auth: Auth
) -> None:
    # A short busy timeout: a starved request fails fast instead of after 30 s.
    database = settings.database.model_copy(update={"busy_timeout_ms": 3000})
    quick = settings.model_copy(update={"database": database})
    runtime = open_runtime(quick)
    app = create_app(quick, runtime=runtime, clock=clock)
    headers = auth("default")

    async def main() -> tuple[Counter[int], int]:
        anyio.to_thread.current_default_thread_limiter().total_tokens = THREADS
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://test", headers=headers
            ) as client:
                first = await client.post("/v1/facts", json={"path": "/c", "content": "base"})
                fid = first.json()["id"]
                codes: list[int] = []

                async def call(method: str, url: str, body: object = None) -> None:
                    response = await client.request(method, url, json=body)
                    codes.append(response.status_code)

                async with anyio.create_task_group() as group:
                    for i in range(EACH):
                        group.start_soon(call, "POST", f"/v1/facts/{fid}/recall")
                        group.start_soon(call, "GET", "/v1/facts")
                        group.start_soon(call, "GET", "/v1/paths/c")
                        new = {"path": "/c", "content": f"n{i}"}
                        group.start_soon(call, "POST", "/v1/facts", new)
                final = await client.get(f"/v1/facts/{fid}", params={"peek": True})
                return Counter(codes), final.json()["recall_count"]

    try:
        codes, recalls = anyio.run(main)
    finally:
        runtime.close()
    assert codes == Counter({200: 3 * EACH, 201: EACH})
    assert recalls == EACH  # every concurrent recall counted
