"""The agent verbs of issue 20 over MCP, with the SDK's client: a batch store with
`similar`, `as_of` on the reading tools, and the admin-only policy tools."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from app.embeddings.fake import FakeEmbedder
from app.runtime import Runtime
from tests.conftest import TEST_WIDTH, FakeClock
from tests.mcp.conftest import Mcp, ok, refused

pytestmark = pytest.mark.anyio

BACKUP = "the staging database is backed up every night at two"
AGAIN = "every night at two the staging database is backed up"


@pytest.fixture
def model(rt: Runtime) -> None:
    rt.embedder = FakeEmbedder(TEST_WIDTH)


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


async def test_tools_tell_an_agent_to_supersede_what_similar_shows(mcp: Mcp) -> None:
    async with mcp.connect("default") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    for name in ("store_fact", "store_facts"):
        assert "similar" in tools[name].description and "supersede" in tools[name].description
    assert "as_of" in tools["search_facts"].input_schema["properties"]
    for name in ("list_facts", "get_fact", "fact_history"):
        assert "as_of" in tools[name].input_schema["properties"], name


async def test_a_batch_store_is_all_or_nothing_and_names_similar_facts(
    mcp: Mcp, model, fact_count
) -> None:
    async with mcp.connect("default") as client:
        first = await ok(client, "store_fact", path="/ops", content=BACKUP)
        assert first["similar"] == [] and first["similar_checked"] is True
        before = fact_count()
        bad = [{"path": "/ops", "content": "fine"}, {"path": "/Bad Path", "content": "x"}]
        text = await refused(client, "store_facts", facts=bad)
        assert "Bad Path" in text or "bad path" in text
        assert fact_count() == before
        dup = [{"path": "/new", "content": "plants need water"}, {"path": "/ops", "content": AGAIN}]
        result = await client.call_tool("store_facts", {"facts": dup, "on_duplicate": "refuse"})
        assert result.is_error
        (content,) = result.content
        assert f"fact {first['id']} at /ops" in content.text and "supersedes_id" in content.text
        # The REST problem, `similar` and all, for a client that reads structured content.
        problem = result.structured_content
        assert problem is not None and problem["status"] == 409
        assert problem["detail"] == content.text and problem["index"] == 1
        assert [(x["id"], x["path"]) for x in problem["similar"]] == [(first["id"], "/ops")]
        rest = await mcp.rest(
            "default", "POST", "/v1/facts/batch", json={"facts": dup, "on_duplicate": "refuse"}
        )
        assert rest.json() == problem
        assert fact_count() == before
        stored = await ok(client, "store_facts", facts=dup)
        assert [f["content"] for f in stored["facts"]] == [dup[0]["content"], AGAIN]
        assert [[x["id"] for x in f["similar"]] for f in stored["facts"]] == [[], [first["id"]]]
        assert fact_count() == before + 2
        # The agent follows the hint: it supersedes the earlier statement.
        fixed = await ok(
            client, "store_fact", path="/ops", content=BACKUP + " (UTC)", supersedes_id=first["id"]
        )
        assert first["id"] not in {x["id"] for x in fixed["similar"]}


async def test_a_hidden_similar_fact_is_never_named_over_mcp(mcp: Mcp, model, add_policy) -> None:
    async with mcp.connect("default") as client:
        await ok(client, "store_fact", path="/private", content=BACKUP)
    add_policy("p, alice, path:/alice/*, write, allow", "p, alice, path:/alice/*, read, allow")
    async with mcp.connect("alice") as client:
        mine = await ok(client, "store_facts", facts=[{"path": "/alice", "content": AGAIN}])
        assert mine["facts"][0]["similar"] == []
        assert mine["facts"][0]["similar_checked"] is True


async def test_reading_tools_answer_as_of_a_moment(mcp: Mcp, clock: FakeClock) -> None:
    async with mcp.connect("default") as client:
        old = await ok(client, "store_fact", path="/home/wifi", content="the password is tea")
        clock.advance(days=1)
        then = iso(clock())
        clock.advance(days=1)
        new = await ok(
            client,
            "store_fact",
            path="/home/wifi",
            content="the password is coffee",
            supersedes_id=old["id"],
        )
        found = await ok(client, "search_facts", query="password", mode="keyword", as_of=then)
        assert [r["fact"]["id"] for r in found["results"]] == [old["id"]]
        assert found["as_of"]["at"] == then and "strength" in found["as_of"]["today"]
        listed = await ok(client, "list_facts", under="/home", as_of=then)
        assert [f["id"] for f in listed["facts"]] == [old["id"]]
        got = await ok(client, "get_fact", fact_id=old["id"], as_of=then)
        assert got["superseded"] is False and got["recall_count"] == 0
        chain = await ok(client, "fact_history", fact_id=old["id"], as_of=then)
        assert [f["id"] for f in chain["facts"]] == [old["id"]]
        text = await refused(client, "get_fact", fact_id=new["id"], as_of=then)
        assert "not found" in text
        text = await refused(client, "list_facts", as_of="2026-12-01T09:30:00")
        assert "as_of" in text and "timezone" in text
        for moment in ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"):
            for tool, args in (
                ("search_facts", {"query": "password", "mode": "keyword"}),
                ("list_facts", {}),
                ("get_fact", {"fact_id": old["id"]}),
                ("fact_history", {"fact_id": old["id"]}),
            ):
                text = await refused(client, tool, as_of=moment, **args)
                assert text.startswith("as_of") and "outside" in text, (tool, text)
        now = await ok(client, "search_facts", query="password", mode="keyword", peek=True)
        assert [r["fact"]["id"] for r in now["results"]] == [new["id"]]


LINE = "p, alice, path:/work/*, read, allow"


async def test_policy_tools_are_for_admins_and_refused_as_rest_refuses(mcp: Mcp) -> None:
    async with mcp.connect("alice") as client:
        for tool, arguments in (
            ("list_policies", {}),
            ("add_policy", {"line": LINE}),
            ("remove_policy", {"line": LINE}),
        ):
            text = await refused(client, tool, **arguments)
            rest = {
                "list_policies": ("GET", {}),
                "add_policy": ("POST", {"json": {"line": LINE}}),
                "remove_policy": ("DELETE", {"json": {"line": LINE}}),
            }[tool]
            response = await mcp.rest("alice", rest[0], "/v1/policies", **rest[1])
            assert response.status_code == 403
            assert text == response.json()["detail"]
    async with mcp.connect("default") as client:
        added = await ok(client, "add_policy", line=LINE)
        assert added["ptype"] == "p" and added["values"] == [
            "alice",
            "path:/work/*",
            "read",
            "allow",
        ]
        listed = await ok(client, "list_policies")
        assert added in listed["policies"]
        again = await refused(client, "add_policy", line=LINE)
        assert "already present" in again
        bad = await refused(client, "add_policy", line="p, alice, file:/etc, read, allow")
        assert "file:/etc" in bad or "object" in bad
        removed = await ok(client, "remove_policy", line=LINE)
        assert removed == added
        assert added not in (await ok(client, "list_policies"))["policies"]
        gone = await refused(client, "remove_policy", line=LINE)
        assert "no such policy" in gone


async def test_a_store_tells_the_model_which_facts_to_supersede(mcp: Mcp, model) -> None:
    async with mcp.connect("default") as client:
        first = await ok(client, "store_fact", path="/ops", content=BACKUP)
        again = await client.call_tool("store_fact", {"path": "/ops", "content": AGAIN})
    record = again.structured_content
    assert record is not None and record["content"] == AGAIN
    (near,) = record["similar"]
    assert json.loads(again.content[0].text) == {
        "id": record["id"],
        "path": "/ops",
        "similar": [{"id": first["id"], "path": "/ops", "cosine": round(near["cosine"], 2)}],
    }


async def test_a_supersede_over_mcp_keeps_the_old_facts_tags(mcp: Mcp) -> None:
    async with mcp.connect("default") as client:
        old = await ok(
            client, "store_fact", path="/cards", content="fireball", tags={"kind": "power"}
        )
        new = await ok(
            client, "store_fact", path="/cards", content="fireball v2", supersedes_id=old["id"]
        )
        assert new["tags"] == {"kind": "power", "owner": "default"}
        bare = await ok(
            client, "store_fact", path="/cards", content="v3", supersedes_id=new["id"], tags={}
        )
        assert bare["tags"] == {"owner": "default"}


async def test_the_last_admin_line_cannot_be_removed_over_mcp(mcp: Mcp) -> None:
    async with mcp.connect("default") as client:
        text = await refused(client, "remove_policy", line="g, default, admin")
        rest = await mcp.rest(
            "default", "DELETE", "/v1/policies", json={"line": "g, default, admin"}
        )
        assert rest.status_code == 409
        assert text == rest.json()["detail"] and "add another admin first" in text
        assert "g, default, admin" in {
            p["line"] for p in (await ok(client, "list_policies"))["policies"]
        }
