"""A token revoked through one server is refused by another on the same database,
over REST and MCP: SQLite (two processes on one file) and PostgreSQL (two replicas).

Server A keeps its list of revoked ids for up to half a second
(auth.revocation_check_seconds 0.5): it refuses a token it revoked itself on the next
request, and one revoked elsewhere within a second. Server B keeps the default (0): it
refuses a token revoked anywhere, by the other server or by `embornal token revoke`,
on its very next request.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.ops.live import LiveServer, run_cli, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


@pytest.fixture(params=["sqlite", "postgresql"])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[LiveServer, LiveServer]]:
    key = tmp_path / "jwt-secret"
    key.write_text("two-servers-share-this-key-" + "k" * 40)
    key.chmod(0o600)
    extra = {"EMBORNAL_AUTH__SECRET_FILE": str(key)}
    url = None
    if request.param == "postgresql":
        postgres = request.getfixturevalue("postgres")
        url = postgres.new_empty_database()
        extra["EMBORNAL_DATABASE__URL"] = url.render_as_string(hide_password=False)
    else:
        extra["EMBORNAL_DATABASE__PATH"] = str(tmp_path / "shared" / "memory.db")
    a = LiveServer(
        tmp_path / "a", "none", {**extra, "EMBORNAL_AUTH__REVOCATION_CHECK_SECONDS": "0.5"}
    )
    b = LiveServer(tmp_path / "b", "none", extra)
    try:
        a.start()
        b.start()
        yield a, b
    finally:
        a.stop()
        b.stop()
        if url is not None:
            request.getfixturevalue("postgres").drop_database(url)


def status(server: LiveServer, token: str) -> int:
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        return client.get("/v1/whoami", headers={"Authorization": f"Bearer {token}"}).status_code


def mcp_status(server: LiveServer, token: str) -> int:
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
    }
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        return client.post("/mcp", json=TOOLS_LIST, headers=headers).status_code


def issue(server: LiveServer, subject: str) -> dict:
    with server.client() as client:
        made = client.post("/v1/tokens", json={"subject": subject, "expires_in": "1h"})
    assert made.status_code == 201, made.text
    return made.json()


def test_a_revocation_on_one_server_is_refused_by_the_other(
    pair: tuple[LiveServer, LiveServer],
) -> None:
    a, b = pair
    first, second, third = (issue(a, "default") for _ in range(3))
    for server in (a, b):
        assert status(server, first["token"]) == 200
        assert mcp_status(server, first["token"]) == 200
    # Revoked through A: A and B both refuse it on their next request, REST and MCP.
    with a.client() as client:
        assert client.delete(f"/v1/tokens/{first['jti']}").status_code == 204
    assert status(a, first["token"]) == 401
    assert status(b, first["token"]) == 401
    assert mcp_status(b, first["token"]) == 401
    assert mcp_status(a, first["token"]) == 401
    # Revoked through B: A, which reads the list at most every 0.5 s, within a second.
    assert status(a, second["token"]) == 200
    with b.client() as client:
        assert client.delete(f"/v1/tokens/{second['jti']}").status_code == 204
    revoked_at = time.monotonic()
    assert status(b, second["token"]) == 401
    # A may accept the token only on a request begun within its half second of keeping
    # the list: one begun later found a list read after the revocation. Timed by when
    # each request began, not by how long they took (a busy machine slows those).
    accepted_late: list[float] = []

    def a_refuses() -> bool:
        began = time.monotonic()
        if status(a, second["token"]) == 401:
            return True
        if began - revoked_at >= 0.5:
            accepted_late.append(began - revoked_at)
        return False

    wait_for(a_refuses, "A to refuse the token")
    assert accepted_late == []
    # Revoked from the command line, on the database file or URL both servers use.
    assert status(b, third["token"]) == 200
    run_cli(a.home, "none", "token", "revoke", third["jti"], extra=a.extra_env)
    assert status(b, third["token"]) == 401
    # Every other token goes on working.
    assert status(a, a.token) == status(b, b.token) == 200
