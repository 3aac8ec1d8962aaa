"""The MCP tools as an agent meets them: described, checked like REST, counted, logged."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from mcp.shared.exceptions import MCPError

from app.api.observability import _RequestIdFilter
from app.embeddings.fake import FakeEmbedder
from app.main import create_app
from app.mcp.server import GUIDE
from tests.conftest import TEST_WIDTH, FakeClock, make_settings
from tests.mcp.conftest import Mcp, ok, refused

pytestmark = pytest.mark.anyio

TOOLS = {
    "store_fact",
    "search_facts",
    "get_fact",
    "fact_history",
    "delete_fact",
    "browse_path",
    "list_facts",
    "tag_path",
    "whoami",
    "store_facts",
    "list_policies",
    "add_policy",
    "remove_policy",
}


async def test_tools_are_described_with_schemas(mcp: Mcp) -> None:
    async with mcp.connect("default") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert client.instructions == GUIDE
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 40, tool.name
        assert tool.input_schema["type"] == "object"
        # Unknown arguments are refused, and the schema says so to the client.
        assert tool.input_schema.get("additionalProperties") is False, tool.name
        # The records are REST's (openapi.json); the model reads the text block's brief.
        assert tool.output_schema is None
    assert "supersedes_id" in tools["store_fact"].description
    assert tools["store_fact"].input_schema["required"] == ["path", "content"]
    assert tools["delete_fact"].annotations.destructive_hint is True
    assert tools["browse_path"].annotations.read_only_hint is True
    # A search counts recalls unless it peeks: not a read-only tool.
    assert tools["search_facts"].annotations.read_only_hint is False


async def test_recall_unless_peek(mcp: Mcp, clock: FakeClock) -> None:
    async with mcp.connect("default") as client:
        fact = await ok(client, "store_fact", path="/notes", content="the kettle is blue")
        clock.advance(days=3)
        peeked = await ok(client, "get_fact", fact_id=fact["id"], peek=True)
        assert peeked["recall_count"] == 0 and peeked["strength"] < 0.1
        recalled = await ok(client, "get_fact", fact_id=fact["id"])
        assert recalled["recall_count"] == 1 and recalled["stability_days"] > 1
        await ok(client, "search_facts", query="kettle", mode="keyword", peek=True)
        found = await ok(client, "search_facts", query="kettle", mode="keyword")
        assert found["results"][0]["fact"]["recall_count"] == 2


async def test_a_time_span_beyond_any_date_is_a_search_like_any_other(mcp: Mcp, rt) -> None:
    rt.embedder = FakeEmbedder(TEST_WIDTH)
    async with mcp.connect("default") as client:
        await ok(client, "store_fact", path="/notes", content="the plan for the garden")
        for query in ("what happened 3000000 days ago", "the plan on December 31st 9999"):
            for mode in ("semantic", "hybrid"):
                found = await ok(client, "search_facts", query=query, mode=mode)
                assert isinstance(found["results"], list)


BAD = [
    # (what, tool, arguments, the REST request saying the same)
    (
        "bad path",
        "store_fact",
        {"path": "/Projects/a b", "content": "x"},
        ("POST", "/v1/facts", {"json": {"path": "/Projects/a b", "content": "x"}}),
    ),
    (
        "owner tag",
        "store_fact",
        {"path": "/a", "content": "x", "tags": {"owner": "mallory"}},
        ("POST", "/v1/facts", {"json": {"path": "/a", "content": "x", "tags": {"owner": "m"}}}),
    ),
    (
        "over-long content",
        "store_fact",
        {"path": "/a", "content": "x" * 4001},
        ("POST", "/v1/facts", {"json": {"path": "/a", "content": "x" * 4001}}),
    ),
    (
        "blank content",
        "store_fact",
        {"path": "/a", "content": "   "},
        ("POST", "/v1/facts", {"json": {"path": "/a", "content": "   "}}),
    ),
    (
        "unknown field",
        "store_fact",
        {"path": "/a", "content": "x", "owner": "mallory"},
        ("POST", "/v1/facts", {"json": {"path": "/a", "content": "x", "owner": "mallory"}}),
    ),
    (
        "missing field",
        "store_fact",
        {"path": "/a"},
        ("POST", "/v1/facts", {"json": {"path": "/a"}}),
    ),
    (
        "superseding nothing",
        "store_fact",
        {"path": "/a", "content": "x", "supersedes_id": 999},
        ("POST", "/v1/facts", {"json": {"path": "/a", "content": "x", "supersedes_id": 999}}),
    ),
    (
        "limit over 100",
        "search_facts",
        {"query": "x", "limit": 101},
        ("GET", "/v1/search", {"params": {"q": "x", "limit": 101}}),
    ),
    (
        "unknown search field",
        "search_facts",
        {"query": "x", "q": "x"},
        ("POST", "/v1/search", {"json": {"q": "x", "query": "x"}}),
    ),
    (
        "bad tag on a path",
        "tag_path",
        {"path": "/a", "tags": {"bad key": "v"}},
        ("PUT", "/v1/paths/a/tags", {"json": {"bad key": "v"}}),
    ),
]


@pytest.mark.parametrize(("what", "tool", "arguments", "rest"), BAD, ids=[b[0] for b in BAD])
async def test_bad_input_is_a_tool_error_that_writes_nothing(
    mcp: Mcp, fact_count, what: str, tool: str, arguments: dict[str, Any], rest: tuple
) -> None:
    async with mcp.connect("default") as client:
        await ok(client, "store_fact", path="/a", content="already here")
        before = fact_count()
        text = await refused(client, tool, **arguments)
        assert fact_count() == before
    method, url, kwargs = rest
    response = await mcp.rest("default", method, url, **kwargs)
    assert response.status_code in (404, 422), response.text
    detail = response.json()["detail"]
    if detail.startswith("Invalid value for"):
        # Argument validation: REST's detail, then what its `errors` list says, since a
        # model reads only text. The names differ where the APIs do (`q` and `query`).
        assert text.startswith("Invalid value for"), text
        assert any(e["msg"] in text for e in response.json()["errors"]), (text, response.text)
    else:
        assert text == detail


async def test_unknown_tool_is_a_protocol_error(mcp: Mcp) -> None:
    async with mcp.connect("default") as client:
        with pytest.raises(MCPError, match="Unknown tool"):
            await client.call_tool("drop_database", {})


async def test_correcting_and_tagging(mcp: Mcp) -> None:
    async with mcp.connect("default") as client:
        old = await ok(client, "store_fact", path="/home/wifi", content="the password is tea")
        new = await ok(
            client,
            "store_fact",
            path="/home/wifi",
            content="the password is coffee",
            supersedes_id=old["id"],
        )
        second = await refused(
            client, "store_fact", path="/home/wifi", content="again", supersedes_id=old["id"]
        )
        assert "superseded" in second
        node = await ok(client, "browse_path", path="/home/wifi")
        assert [f["id"] for f in node["facts"]] == [new["id"]]
        tagged = await ok(client, "tag_path", path="/home", tags={"visibility": "public"})
        assert tagged["tags"] == {"visibility": "public"}
        fact = await ok(client, "get_fact", fact_id=new["id"], peek=True)
        assert fact["effective_tags"]["visibility"] == "public"
        untagged = await ok(client, "tag_path", path="/home", remove=["visibility"])
        assert untagged["tags"] == {}


async def test_browse_pages_through_a_node(mcp: Mcp) -> None:
    async with mcp.connect("default") as client:
        ids = [
            (await ok(client, "store_fact", path="/log", content=f"entry {i}"))["id"]
            for i in range(5)
        ]
        seen: list[int] = []
        page = await ok(client, "browse_path", path="/log", limit=2)
        seen += [f["id"] for f in page["facts"]]
        while page["next_cursor"]:
            page = await ok(client, "browse_path", path="/log", limit=2, cursor=page["next_cursor"])
            seen += [f["id"] for f in page["facts"]]
        assert seen == ids[::-1]
        assert page["fact_count"] == 5


async def test_list_a_subtree_strongest_first(mcp: Mcp, clock: FakeClock) -> None:
    async with mcp.connect("default") as client:
        old = await ok(client, "store_fact", path="/garden/beds", content="beans by the wall")
        clock.advance(days=2)
        new = await ok(client, "store_fact", path="/garden", content="compost in the corner")
        await ok(client, "store_fact", path="/kitchen", content="not in the garden")
        newest = await ok(client, "list_facts", under="/garden")
        assert [f["id"] for f in newest["facts"]] == [new["id"], old["id"]]
        clock.advance(days=1)
        await ok(client, "get_fact", fact_id=old["id"])  # a recall: now the stronger one
        strongest = await ok(client, "list_facts", under="/garden", sort="strength")
        assert [f["id"] for f in strongest["facts"]] == [old["id"], new["id"]]
        # Listing is browsing: it counted no recall.
        assert [f["recall_count"] for f in strongest["facts"]] == [1, 0]
        page = await ok(client, "list_facts", under="/garden", limit=1)
        assert page["next_cursor"] is not None
        rest = await ok(client, "list_facts", under="/garden", cursor=page["next_cursor"])
        assert [f["id"] for f in rest["facts"]] == [old["id"]]


async def test_resources_and_prompt(mcp: Mcp) -> None:
    async with mcp.connect("carol") as client:
        listed = {str(r.uri) for r in (await client.list_resources()).resources}
        assert {"embornal://memory", "embornal://path/", "embornal://path/memory"} <= listed
        (template,) = (await client.list_resource_templates()).resource_templates
        assert template.uri_template.startswith("embornal://path/")
        guide = (await client.read_resource("embornal://memory")).contents[0]
        # The seven public facts under /memory, for any subject.
        assert guide.mime_type == "text/markdown"
        assert guide.text.count("\n- ") == 7
        node = (await client.read_resource("embornal://path/memory")).contents[0]
        assert '"path": "/memory"' in node.text
        with pytest.raises(MCPError):
            await client.read_resource("embornal://path/nowhere")
        prompt = await client.get_prompt("use_memory")
        text = prompt.messages[0].content.text
        assert "supersedes_id" in text and "Search before you store" in text


async def test_calls_are_counted_and_logged_without_content(
    mcp: Mcp, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.handler.addFilter(_RequestIdFilter())
    with caplog.at_level(logging.INFO, logger="embornal"):
        async with mcp.connect("default", **{"x-request-id": "agent-call-7"}) as client:
            await ok(client, "store_fact", path="/diary", content="a private thought")
            await ok(client, "search_facts", query="private thought")
            await refused(client, "get_fact", fact_id=424242)
    lines = [r for r in caplog.records if r.name == "embornal.mcp"]
    assert [(r.tool, r.outcome) for r in lines] == [  # type: ignore[attr-defined]
        ("store_fact", "ok"),
        ("search_facts", "ok"),
        ("get_fact", "error"),
    ]
    # Each line carries the id of the HTTP request that made the call.
    assert {r.request_id for r in lines} == {"agent-call-7"}  # type: ignore[attr-defined]
    assert "private thought" not in caplog.text
    async with mcp.http(mcp.auth("default")) as http:
        metrics = (await http.get("/metrics")).text
    assert 'embornal_mcp_tool_calls_total{outcome="ok",tool="store_fact"} 1.0' in metrics
    assert 'embornal_mcp_tool_calls_total{outcome="error",tool="get_fact"} 1.0' in metrics
    assert 'embornal_http_requests_total{method="POST",route="/mcp",status="200"}' in metrics


async def test_missing_and_bad_tokens_are_401_with_a_challenge(mcp: Mcp) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with mcp.http() as http:
        missing = await http.post("/mcp", json=body)
        bad = await http.post("/mcp", json=body, headers={"Authorization": "Bearer x.y.z"})
        metadata = await http.get("/.well-known/oauth-protected-resource")
    for response in (missing, bad):
        assert response.status_code == 401
        # A JSON-RPC error, so the SDK client shows its message; the problem is its data.
        error = response.json()["error"]
        assert error["message"] == error["data"]["detail"] == "invalid or missing bearer token"
        assert response.json()["id"] is None and error["data"]["status"] == 401
        challenge = response.headers["www-authenticate"]
        assert challenge.startswith("Bearer ")
        assert 'resource_metadata="http://testserver/.well-known/oauth-protected-resource"' in (
            challenge
        )
    assert "error=" not in missing.headers["www-authenticate"]
    assert 'error="invalid_token"' in bad.headers["www-authenticate"]
    assert metadata.json()["resource"] == "http://testserver/mcp"
    # No issuer configured: tokens come from `embornal token issue`, no authorization server.
    assert "authorization_servers" not in metadata.json()


def _messages(group: BaseException) -> list[str]:
    """The messages of an exception and of every exception grouped in it."""
    if isinstance(group, BaseExceptionGroup):
        return [m for inner in group.exceptions for m in _messages(inner)]
    return [str(group)]


async def test_an_expired_token_reaches_the_sdk_client_as_expired(mcp: Mcp, settings: Any) -> None:
    import datetime as dt

    from app.auth.tokens import issue_token

    yesterday = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    expired = issue_token(settings, "alice", dt.timedelta(hours=1), now=yesterday)
    with pytest.raises(BaseException) as raised:
        async with mcp.connect("alice", Authorization=f"Bearer {expired}") as client:
            await client.list_tools()
    assert any("the bearer token has expired" in m for m in _messages(raised.value)), raised
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with mcp.http({"Authorization": f"Bearer {expired}"}) as http:
        response = await http.post("/mcp", json=body)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert 'error="invalid_token"' in challenge
    assert 'error_description="the bearer token has expired"' in challenge


async def test_a_body_over_the_limit_is_a_json_rpc_error_and_the_session_goes_on(
    mcp: Mcp, settings: Any
) -> None:
    limit = settings.limits.body_bytes
    async with mcp.connect("default") as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("store_fact", {"path": "/notes", "content": "x" * limit})
        assert raised.value.error.message == f"The request body is larger than {limit} bytes."
        # The same client, the same session: the next call is served.
        assert (await ok(client, "whoami"))["subject"] == "default"
    async with mcp.http(mcp.auth("default")) as http:
        response = await http.post(
            "/mcp", content=b"{" + b" " * limit + b"}", headers={"Content-Type": "application/json"}
        )
    assert response.status_code == 413
    assert response.json()["error"]["data"]["status"] == 413


async def test_metadata_names_the_configured_issuer(
    tmp_path: Path, migrated_template: Path
) -> None:
    import shutil

    import httpx2

    shutil.copy(migrated_template, tmp_path / "memory.db")
    settings = make_settings(
        tmp_path,
        auth={"issuer": "https://id.example.org/realms/home"},
        http={"public_url": "https://memory.example.org"},
    )
    app: FastAPI = create_app(settings)
    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), base_url="https://memory.example.org"
    ) as http:
        for url in (
            "/.well-known/oauth-protected-resource",
            "/.well-known/oauth-protected-resource/mcp",
        ):
            document = (await http.get(url)).json()
            assert document["resource"] == "https://memory.example.org/mcp"
            assert document["authorization_servers"] == ["https://id.example.org/realms/home"]


async def test_an_unexpected_failure_says_nothing_of_itself(
    mcp: Mcp, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(self: Any, subject: str, fact_id: int, **_options: Any) -> None:
        raise RuntimeError("no such table: /srv/secret/memory.db")

    monkeypatch.setattr("app.usecases.memory.Memory.history", broken)
    async with mcp.connect("default") as client:
        with caplog.at_level(logging.ERROR, logger="embornal.mcp"):
            text = await refused(client, "fact_history", fact_id=1)
    assert text == "The server failed to handle the request."
    # The operator's log has it, with its traceback; the caller has one generic line.
    assert "no such table" in caplog.text and "Traceback" in caplog.text


async def test_get_holds_no_stream_open(mcp: Mcp) -> None:
    """Issue 18: a stateless server needs no SSE stream; GET held one open, unbounded."""
    async with mcp.http(mcp.auth("default")) as http:
        response = await http.get("/mcp", headers={"Accept": "text/event-stream"})
    assert response.status_code == 405
    assert "POST" in response.headers["allow"]
    # The SDK client still works: it asks for the stream, takes the 405, and goes on.
    async with mcp.connect("default") as client:
        assert (await client.list_tools()).tools


@pytest.mark.parametrize("fact_id", ["1", True, 1.5])
async def test_tool_arguments_are_strictly_typed(mcp: Mcp, fact_id: Any) -> None:
    """Issue 18: {"fact_id": "1"} and {"fact_id": true} both read fact 1."""
    async with mcp.connect("default") as client:
        text = await refused(client, "get_fact", fact_id=fact_id, peek=True)
    assert "fact_id" in text


async def test_resource_urls_never_come_from_a_host_the_client_chose(
    tmp_path: Path, migrated_template: Path
) -> None:
    """Issue 18: `Host: evil.example` gave `"resource": "http://evil.example/mcp"`."""
    import shutil

    import httpx2

    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    shutil.copy(migrated_template, tmp_path / "memory.db")
    for http_settings, evil_status in (({}, 400), ({"public_url": "https://mem.example"}, 200)):
        settings = make_settings(tmp_path, http=http_settings)
        app: FastAPI = create_app(settings)
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://evil.example") as http:
            metadata = await http.get("/.well-known/oauth-protected-resource")
            challenge = await http.post("/mcp", json=body)
        if evil_status == 400:
            assert metadata.status_code == 400 and challenge.status_code == 400
            assert "http.allowed_hosts" in metadata.json()["detail"]
            assert metadata.headers["content-type"] == "application/problem+json"
        else:
            # public_url set (behind a proxy): it alone names the resource.
            assert metadata.json()["resource"] == "https://mem.example/mcp"
            assert (
                'resource_metadata="https://mem.example/' in challenge.headers["www-authenticate"]
            )
        async with httpx2.AsyncClient(transport=transport, base_url="http://localhost") as http:
            fine = await http.get("/.well-known/oauth-protected-resource")
        assert fine.status_code == 200


async def test_a_browser_origin_must_be_ours_or_listed(
    tmp_path: Path, migrated_template: Path
) -> None:
    """Issue 18: POST /mcp took any Origin; the transport spec asks servers to check it."""
    import datetime as dt
    import shutil

    import httpx2

    from app.auth.tokens import issue_token

    shutil.copy(migrated_template, tmp_path / "memory.db")
    settings = make_settings(
        tmp_path, http={"allowed_hosts": ["localhost"], "cors_origins": ["https://app.example"]}
    )
    app: FastAPI = create_app(settings)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {
        "Authorization": f"Bearer {issue_token(settings, 'default', dt.timedelta(hours=1))}",
        "Accept": "application/json, text/event-stream",
    }
    async with (
        app.router.lifespan_context(app),
        httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=app), base_url="http://localhost", headers=headers
        ) as http,
    ):
        evil = await http.post("/mcp", json=body, headers={"Origin": "https://evil.example"})
        listed = await http.post("/mcp", json=body, headers={"Origin": "https://app.example"})
        own = await http.post("/mcp", json=body, headers={"Origin": "http://localhost"})
        none = await http.post("/mcp", json=body)
    assert evil.status_code == 403 and "http.cors_origins" in evil.json()["detail"]
    for response in (listed, own, none):
        assert response.status_code == 200, response.text
        assert response.json()["result"]["tools"]


# What an agent pays for the tools before it calls one (issue 31: it was 45,000).
TOOLS_LIST_BUDGET = 12_000


def typed(schema: dict[str, Any]) -> bool:
    """A property's schema names its type (directly, or in each branch of anyOf)."""
    if "anyOf" in schema:
        return all(typed(branch) for branch in schema["anyOf"])
    return "type" in schema or "enum" in schema or "$ref" in schema


async def test_tools_list_fits_the_budget_with_every_tool_described_and_typed(mcp: Mcp) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {**mcp.auth("default"), "Accept": "application/json, text/event-stream"}
    async with mcp.http(headers) as http:
        response = await http.post("/mcp", json=body)
    assert response.status_code == 200, response.text
    assert len(response.text) <= TOOLS_LIST_BUDGET, len(response.text)
    tools = response.json()["result"]["tools"]
    assert {tool["name"] for tool in tools} == TOOLS
    for tool in tools:
        assert len(tool["description"]) > 40, tool["name"]
        schema = tool["inputSchema"]
        assert "title" not in json.dumps(schema), tool["name"]  # pydantic's, dropped
        for name, prop in schema["properties"].items():
            assert typed(prop), (tool["name"], name, prop)
        for definition in schema.get("$defs", {}).values():
            assert all(typed(p) for p in definition["properties"].values()), tool["name"]


async def test_text_blocks_say_per_fact_what_an_agent_needs(mcp: Mcp) -> None:
    facts = [
        ("/home/kitchen", "the kettle is blue and sits left of the stove"),
        ("/home/garden", "the blue watering can hangs in the shed"),
        ("/home/car", "the car's spare key is in the blue box in the hall"),
    ]
    async with mcp.connect("default") as client:
        stored = [await client.call_tool("store_fact", {"path": p, "content": c}) for p, c in facts]
        found = await client.call_tool("search_facts", {"query": "blue", "mode": "keyword"})
        old = stored[0].structured_content
        assert old is not None
        await ok(client, "store_fact", path="/home/kitchen", content="red", supersedes_id=old["id"])
        got = await client.call_tool("get_fact", {"fact_id": old["id"], "peek": True})
        page = await client.call_tool("list_facts", {"under": "/home", "limit": 2})
    # A store: the id and folded path the agent will refer to, not its own content again.
    assert json.loads(stored[0].content[0].text) == {"id": old["id"], "path": "/home/kitchen"}
    # A search: per result its id, path, score and content; the records stay structured.
    brief = json.loads(found.content[0].text)
    assert brief["mode"] == "keyword" and len(brief["results"]) == 3
    for item, result in zip(brief["results"], found.structured_content["results"], strict=True):
        assert list(item) == ["id", "path", "score", "content"]
        assert item["score"] == round(result["score"], 4)
        assert {"owner", "strength", "effective_tags", "links"} <= set(result["fact"])
    assert sorted(i["content"] for i in brief["results"]) == sorted(c for _p, c in facts)
    assert len(found.content[0].text) * 2 < len(json.dumps(found.structured_content))
    # A state an agent must not act past is named when it holds.
    assert json.loads(got.content[0].text) == {
        "id": old["id"],
        "path": "/home/kitchen",
        "content": facts[0][1],
        "superseded_by_id": old["id"] + 3,
    }
    listed = json.loads(page.content[0].text)
    assert [list(f) for f in listed["facts"]] == [["id", "path", "content"]] * 2
    assert listed["next_cursor"] == page.structured_content["next_cursor"]


async def test_path_tags_take_the_same_object_over_mcp_as_over_rest(mcp: Mcp) -> None:
    tags = {"visibility": "public", "lang": "py"}
    async with mcp.connect("default") as client:
        await ok(client, "store_fact", path="/over-mcp/a", content="one")
        await ok(client, "store_fact", path="/over-rest/a", content="two")
        over_mcp = await ok(client, "tag_path", path="/over-mcp", tags=tags)
    over_rest = await mcp.rest("default", "PUT", "/v1/paths/over-rest/tags", json=tags)
    assert over_rest.status_code == 200, over_rest.text
    assert over_mcp["tags"] == over_rest.json()["tags"] == tags
    async with mcp.connect("default") as client:
        # The old {set, remove} shape is an argument error the model can fix.
        text = await refused(client, "tag_path", path="/over-mcp", set=tags)
        assert "set" in text
        removed = await ok(client, "tag_path", path="/over-mcp", remove=["lang"])
    assert removed["tags"] == {"visibility": "public"}
