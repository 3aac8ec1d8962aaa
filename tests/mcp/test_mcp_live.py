"""The SDK's own client against real processes: `embornal serve` over streamable HTTP on
127.0.0.1, and `embornal mcp` over stdio. The same round trip on both; two servers on
one memory show that any replica can answer."""

from __future__ import annotations

import itertools
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.mcp.conftest import ok, refused
from tests.mcp.test_mcp_tools import TOOLS
from tests.ops import conftest as ops
from tests.ops.live import ROOT, LiveServer, cli_env

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(120)]
start_server = ops.start_server


@asynccontextmanager
async def over_http(
    server: LiveServer,
    token: str | None = None,
    transport: httpx2.AsyncBaseTransport | None = None,
    mode: str = "auto",
) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token or server.token}"}
    url = f"{server.base_url}/mcp"
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30, transport=transport) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


class RoundRobin(httpx2.AsyncBaseTransport):
    """A load balancer in miniature: each request goes to the next server's port."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = itertools.cycle(ports)
        self.sent: list[int] = []
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = next(self.ports)
        self.sent.append(port)
        request.url = request.url.copy_with(port=port)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def round_trip(client: Client, subject: str) -> None:
    """List tools, then store -> search -> get -> supersede -> history -> delete."""
    assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
    assert (await ok(client, "whoami"))["subject"] == subject

    stored = await ok(
        client,
        "store_fact",
        path="/Projects/Garden",
        content="the tomatoes need water every second day",
        tags={"season": "summer"},
    )
    assert stored["path"] == "/projects/garden"  # folded
    assert stored["owner"] == subject
    assert stored["tags"] == {"season": "summer", "owner": subject}

    found = await ok(client, "search_facts", query="tomatoes water", under="/projects")
    assert [r["fact"]["id"] for r in found["results"]] == [stored["id"]]
    assert found["results"][0]["fact"]["recall_count"] == 1  # a search hands content out

    got = await ok(client, "get_fact", fact_id=stored["id"])
    assert got["content"] == stored["content"] and got["recall_count"] == 2

    newer = await ok(
        client,
        "store_fact",
        path="/projects/garden",
        content="the tomatoes need water every day in a heatwave",
        supersedes_id=stored["id"],
    )
    assert newer["supersedes_id"] == stored["id"]
    found = await ok(client, "search_facts", query="tomatoes", peek=True)
    assert [r["fact"]["id"] for r in found["results"]] == [newer["id"]]

    chain = await ok(client, "fact_history", fact_id=newer["id"])
    assert [f["id"] for f in chain["facts"]] == [stored["id"], newer["id"]]
    assert chain["facts"][0]["superseded_by_id"] == newer["id"]

    assert await ok(client, "delete_fact", fact_id=newer["id"]) == {"deleted_id": newer["id"]}
    assert "not found" in (await refused(client, "get_fact", fact_id=newer["id"])).lower()
    gone = await ok(client, "search_facts", query="tomatoes")
    assert gone["results"] == []
    deleted = await ok(client, "get_fact", fact_id=newer["id"], include_deleted=True, peek=True)
    assert deleted["deleted_at"] is not None
    node = await ok(client, "browse_path", path="/projects/garden")
    assert node["facts"] == [] and node["fact_count"] == 0


async def test_round_trip_over_streamable_http(start_server: ops.StartServer) -> None:
    server = start_server("none")
    async with over_http(server) as client:
        await round_trip(client, "default")
    logs = server.logs()
    assert "Traceback" not in logs
    # Requests are logged by id and route; what they carried is not.
    assert "POST /mcp 200" in logs and "tomatoes" not in logs


async def test_round_trip_over_stdio(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    errlog = (tmp_path / "stderr.log").open("w")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "app.cli", "mcp"],
        env=cli_env(home, "none"),
        cwd=str(ROOT),
    )
    try:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            await round_trip(client, "default")
            listed = {str(r.uri) for r in (await client.list_resources()).resources}
            assert "embornal://memory" in listed
    finally:
        errlog.close()
    stderr = (tmp_path / "stderr.log").read_text()
    assert "Traceback" not in stderr
    assert "mcp tool store_fact ok" in stderr and "tomatoes" not in stderr
    # It acted on the memory of that home, as the CLI does.
    assert (home / "memory.db").exists()


async def test_stdio_acts_as_the_subject_it_is_given(tmp_path: Path) -> None:
    """Issue 18: `embornal mcp` was always `default`; EMBORNAL_SUBJECT (or --subject)
    gives a desktop agent its own subject, and a role's name is refused at start."""
    import subprocess

    home = tmp_path / "home"
    home.mkdir()

    def start_as(name: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "app.cli", "mcp", "--subject", name],
            env=cli_env(home, "none"),
            cwd=str(ROOT),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )

    as_role = start_as("admin")
    assert as_role.returncode != 0
    assert "'admin' is a role name" in as_role.stderr and "Traceback" not in as_role.stderr
    # A name no token could carry is refused as `token issue` refuses it.
    as_nobody = start_as("desk agent")
    assert as_nobody.returncode != 0 and "subject" in as_nobody.stderr, as_nobody.stderr
    assert "Traceback" not in as_nobody.stderr
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "app.cli", "mcp"],
        env=cli_env(home, "none", {"EMBORNAL_SUBJECT": "desk-agent"}),
        cwd=str(ROOT),
    )
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            # desk-agent holds no policy: it may not write where default may.
            denied = await refused(client, "store_fact", path="/notes", content="a note")
            assert "desk-agent" in denied


async def test_tokens_over_http(start_server: ops.StartServer) -> None:
    server = start_server("none")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    metadata_url = f"{server.base_url}/.well-known/oauth-protected-resource"
    with httpx.Client(base_url=server.base_url, timeout=10) as http:
        missing = http.post("/mcp", json=body)
        forged = server.token[:-4] + ("AAAA" if not server.token.endswith("AAAA") else "BBBB")
        bad = http.post("/mcp", json=body, headers={"Authorization": f"Bearer {forged}"})
        for response in (missing, bad):
            assert response.status_code == 401, response.text
            challenge = response.headers["www-authenticate"]
            assert challenge.startswith("Bearer ") and f'resource_metadata="{metadata_url}"' in (
                challenge
            )
        document = http.get("/.well-known/oauth-protected-resource").json()
        assert document["resource"] == f"{server.base_url}/mcp"
    # The SDK client itself is refused at the door with a bad token.
    refused_at_the_door = False
    try:
        async with over_http(server, token=forged) as client:
            await client.list_tools()
    except* MCPError:  # raised from the client's task group, so possibly grouped
        refused_at_the_door = True
    assert refused_at_the_door


async def test_two_servers_on_one_memory(start_server: ops.StartServer, tmp_path: Path) -> None:
    """Stateless: a fact stored through one process is found through the other, and any
    process answers any request of a session."""
    home = tmp_path / "shared"
    first = start_server("none", home=home)
    second = start_server("none", home=home)
    assert first.port != second.port
    async with over_http(first) as one, over_http(second) as two:
        stored = await ok(one, "store_fact", path="/shared", content="the spare key is in the shed")
        found = await ok(two, "search_facts", query="spare key shed")
        assert found["results"][0]["fact"]["id"] == stored["id"]
        corrected = await ok(
            two,
            "store_fact",
            path="/shared",
            content="the spare key is under the mat",
            supersedes_id=stored["id"],
        )
        chain = await ok(one, "fact_history", fact_id=stored["id"])
        assert [f["id"] for f in chain["facts"]] == [stored["id"], corrected["id"]]

    # Behind a round-robin balancer, with the 2026 protocol and with the older initialize
    # handshake alike: no request depends on the process that answered the one before.
    for mode in ("auto", "legacy"):
        balancer = RoundRobin([first.port, second.port])
        async with over_http(first, transport=balancer, mode=mode) as client:
            await round_trip(client, "default")
        assert set(balancer.sent) == {first.port, second.port}


def test_stdio_stopped_by_sigterm_folds_the_wal_into_the_memory(tmp_path: Path) -> None:
    """An agent closing its `embornal mcp` sends SIGTERM: the memory is closed as on any
    exit, memory.db holding everything and no WAL left beside it (a backup put back in
    its place would otherwise have a stale WAL replayed over it)."""
    import json
    import signal
    import subprocess

    home = tmp_path / "home"
    home.mkdir()
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "mcp"],
        env=cli_env(home, "none"),
        cwd=str(ROOT),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None

    def ask(number: int, method: str, params: dict) -> dict:
        message = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
        server.stdin.write(json.dumps(message) + "\n")  # type: ignore[union-attr]
        server.stdin.flush()  # type: ignore[union-attr]
        return json.loads(server.stdout.readline())  # type: ignore[union-attr]

    try:
        hello = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        assert "result" in ask(1, "initialize", hello)
        server.stdin.write('{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        stored = ask(
            2,
            "tools/call",
            {"name": "store_fact", "arguments": {"path": "/notes", "content": "kept whole"}},
        )
        assert stored["result"]["isError"] is False, stored
        assert (home / "memory.db-wal").exists()  # the store's pages wait in the WAL
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
    assert server.returncode == 128 + signal.SIGTERM
    assert "Traceback" not in stderr
    assert not (home / "memory.db-wal").exists()
    import sqlite3

    with sqlite3.connect(home / "memory.db") as copy:
        assert copy.execute("SELECT count(*) FROM facts WHERE content = 'kept whole'").fetchone()


def test_stdio_answers_every_request_read_before_stdin_closes(tmp_path: Path) -> None:
    """A script that pipes a whole session and closes stdin at once gets every answer: at
    stdin's end the SDK cancels the handlers still running and drops their answers, so
    `embornal mcp` holds the end back until the requests it read are answered."""
    import json
    import subprocess

    home = tmp_path / "home"
    home.mkdir()
    hello = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    session = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "search_facts", "arguments": {"query": "memory"}},
        },
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "whoami", "arguments": {}},
        },
    ]
    # communicate() writes it all, then closes stdin: no answer is awaited in between.
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "mcp"],
        env=cli_env(home, "none"),
        cwd=str(ROOT),
        input="".join(json.dumps(message) + "\n" for message in session),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    answers = {answer["id"]: answer for answer in map(json.loads, done.stdout.splitlines())}
    assert sorted(answers) == [1, 2, 3, 4], done.stderr
    assert answers[2]["result"]["isError"] is False, answers[2]
    assert answers[4]["result"]["structuredContent"]["subject"] == "default", answers[4]
    assert {tool["name"] for tool in answers[3]["result"]["tools"]} == TOOLS
