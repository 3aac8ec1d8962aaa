"""Broken object-level authorization through every MCP tool and resource: a fact another
subject may not read does not exist for it, and every refusal is the one REST gives
(tests/api/test_bola_api.py is the same matrix over REST)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.mcp.conftest import Mcp, ok, refused

pytestmark = pytest.mark.anyio

SECRET = "alice keeps the launch codes in the blue folder"


def _policies(subject: str) -> list[str]:
    return [f"p, {subject}, path:/{subject}/*, {act}, allow" for act in ("read", "write", "delete")]


@pytest.fixture
def two_subjects(add_policy: Callable[..., None]) -> None:
    add_policy(*_policies("alice"), *_policies("bob"))


def _never_leaks(result: dict[str, Any] | str, fact_id: int) -> None:
    text = json.dumps(result)
    assert "launch codes" not in text and "blue folder" not in text
    if isinstance(result, dict):
        facts = result.get("facts") or [r["fact"] for r in result.get("results", [])]
        for fact in facts:
            assert fact_id not in (fact["id"], fact["supersedes_id"], fact["superseded_by_id"])


async def _same_as_rest(
    mcp: Mcp, client: Client, tool: str, arguments: dict[str, Any], rest: tuple[Any, ...]
) -> str:
    """The tool is refused with the detail REST gives the same subject for the same thing."""
    text = await refused(client, tool, **arguments)
    method, url, kwargs = rest
    response = await mcp.rest("bob", method, url, **kwargs)
    assert response.status_code in (403, 404), (tool, response.text)
    assert text == response.json()["detail"], (tool, text)
    return text


async def test_bob_never_sees_alice(mcp: Mcp, two_subjects: None, fact_count) -> None:
    async with mcp.connect("alice") as alice, mcp.connect("bob") as bob:
        bob_fact = await ok(bob, "store_fact", path="/bob/notes", content="bob likes tea")
        secret = await ok(alice, "store_fact", path="/alice/plans", content=SECRET)
        sid = secret["id"]

        not_found = [
            ("get_fact", {"fact_id": sid}, ("GET", f"/v1/facts/{sid}", {})),
            ("get_fact", {"fact_id": sid, "peek": True}, ("GET", f"/v1/facts/{sid}", {})),
            (
                "get_fact",
                {"fact_id": sid, "include_deleted": True},
                ("GET", f"/v1/facts/{sid}", {"params": {"include_deleted": True}}),
            ),
            ("fact_history", {"fact_id": sid}, ("GET", f"/v1/facts/{sid}/history", {})),
            ("delete_fact", {"fact_id": sid}, ("DELETE", f"/v1/facts/{sid}", {})),
            (
                "store_fact",
                {"path": "/bob/x", "content": "mine now", "supersedes_id": sid},
                (
                    "POST",
                    "/v1/facts",
                    {"json": {"path": "/bob/x", "content": "mine now", "supersedes_id": sid}},
                ),
            ),
            ("browse_path", {"path": "/alice"}, ("GET", "/v1/paths/alice", {})),
            ("browse_path", {"path": "/alice/plans"}, ("GET", "/v1/paths/alice/plans", {})),
            (
                "tag_path",
                {"path": "/alice/plans", "tags": {"k": "v"}},
                ("PUT", "/v1/paths/alice/plans/tags", {"json": {"k": "v"}}),
            ),
            (
                "tag_path",
                {"path": "/alice/plans", "remove": ["k"]},
                ("DELETE", "/v1/paths/alice/plans/tags/k", {}),
            ),
        ]
        before = fact_count()
        for tool, arguments, rest in not_found:
            text = await _same_as_rest(mcp, bob, tool, arguments, rest)
            _never_leaks(text, sid)
        assert fact_count() == before

        # A store names a place, not a fact: refused as REST does (403), nothing written.
        await _same_as_rest(
            mcp,
            bob,
            "store_fact",
            {"path": "/alice/plans", "content": "x"},
            ("POST", "/v1/facts", {"json": {"path": "/alice/plans", "content": "x"}}),
        )
        assert fact_count() == before

        visible = [
            ("search_facts", {"query": "launch codes folder"}),
            ("search_facts", {"query": "launch codes", "mode": "keyword", "peek": True}),
            ("search_facts", {"query": "blue folder", "under": "/alice"}),
            ("search_facts", {"query": "codes", "tags": {"owner": "alice"}}),
            ("get_fact", {"fact_id": bob_fact["id"]}),
            ("fact_history", {"fact_id": bob_fact["id"]}),
            ("browse_path", {"path": "/"}),
            ("list_facts", {}),
            ("list_facts", {"under": "/alice"}),
            ("list_facts", {"sort": "strength", "tags": {"owner": "alice"}}),
            ("browse_path", {"path": "/bob/notes"}),
        ]
        for tool, arguments in visible:
            _never_leaks(await ok(bob, tool, **arguments), sid)

        root = await ok(bob, "browse_path", path="/")
        assert "/alice" not in [child["path"] for child in root["children"]]
        assert root["subtree_fact_count"] == 1 + 7  # his fact and the public /memory ones
        assert (await ok(bob, "whoami"))["subject"] == "bob"

        # Resources go through the same rules: her path does not exist for him.
        listed = [str(r.uri) for r in (await bob.list_resources()).resources]
        assert not [uri for uri in listed if "alice" in uri]
        with pytest.raises(MCPError) as hidden:
            await bob.read_resource("embornal://path/alice/plans")
        response = await mcp.rest("bob", "GET", "/v1/paths/alice/plans")
        assert hidden.value.error.message == response.json()["detail"]

        # The same calls find her fact for alice: bob's misses are the rules, not the query.
        found = await ok(alice, "search_facts", query="launch codes folder")
        assert sid in [r["fact"]["id"] for r in found["results"]]
        assert (await ok(alice, "browse_path", path="/alice/plans"))["fact_count"] == 1


async def test_read_only_facts_are_refused_on_change(
    mcp: Mcp, two_subjects: None, add_policy: Callable[..., None], fact_count
) -> None:
    add_policy("p, bob, path:/alice/shared/*, read, allow")
    async with mcp.connect("alice") as alice, mcp.connect("bob") as bob:
        shared = await ok(alice, "store_fact", path="/alice/shared", content="for bob to read")
        fid = shared["id"]
        assert (await ok(bob, "get_fact", fact_id=fid))["content"] == "for bob to read"
        before = fact_count()
        await _same_as_rest(
            mcp, bob, "delete_fact", {"fact_id": fid}, ("DELETE", f"/v1/facts/{fid}", {})
        )
        superseding = {"path": "/bob/x", "content": "corrected", "supersedes_id": fid}
        await _same_as_rest(
            mcp, bob, "store_fact", superseding, ("POST", "/v1/facts", {"json": superseding})
        )
        await _same_as_rest(
            mcp,
            bob,
            "tag_path",
            {"path": "/alice/shared", "tags": {"k": "v"}},
            ("PUT", "/v1/paths/alice/shared/tags", {"json": {"k": "v"}}),
        )
        assert fact_count() == before
        # Her fact is untouched: not deleted, not superseded.
        again = await ok(alice, "get_fact", fact_id=fid, peek=True)
        assert again["deleted_at"] is None and again["superseded_by_id"] is None


async def test_deleted_and_superseded_stay_hidden(mcp: Mcp, two_subjects: None) -> None:
    async with mcp.connect("alice") as alice, mcp.connect("bob") as bob:
        first = await ok(alice, "store_fact", path="/alice/plans", content=SECRET)
        second = await ok(
            alice, "store_fact", path="/alice/plans", content="new plan", supersedes_id=first["id"]
        )
        await ok(alice, "delete_fact", fact_id=second["id"])
        for fid in (first["id"], second["id"]):
            for extra in ({}, {"include_deleted": True}, {"peek": True}):
                await refused(bob, "get_fact", fact_id=fid, **extra)
            await refused(bob, "fact_history", fact_id=fid)
        chain = await ok(alice, "fact_history", fact_id=second["id"])
        assert [f["id"] for f in chain["facts"]] == [first["id"], second["id"]]


async def test_policy_change_is_in_force_on_the_next_call(
    mcp: Mcp, two_subjects: None, add_policy: Callable[..., None]
) -> None:
    async with mcp.connect("alice") as alice, mcp.connect("bob") as bob:
        fact = await ok(alice, "store_fact", path="/alice/shared", content="soon for bob")
        assert (
            await refused(bob, "get_fact", fact_id=fact["id"])
            == ((await mcp.rest("bob", "GET", f"/v1/facts/{fact['id']}")).json()["detail"])
        )
        add_policy("p, bob, path:/alice/shared/*, read, allow")
        # The same connection, the next call: no reconnect, no restart.
        assert (await ok(bob, "get_fact", fact_id=fact["id"]))["content"] == "soon for bob"
        found = await ok(bob, "search_facts", query="soon", mode="keyword")
        assert [r["fact"]["id"] for r in found["results"]] == [fact["id"]]
        add_policy("p, bob, path:/alice/*, read, deny")
        await refused(bob, "get_fact", fact_id=fact["id"])


async def test_a_successor_bob_cannot_read_does_not_show(mcp: Mcp, two_subjects: None) -> None:
    """Default corrects a public /memory fact with a private one (tags {}: not the old
    fact's): bob sees the old one only, marked superseded, with no pointer to what
    replaced it; a second supersede is refused."""
    async with mcp.connect("default") as owner, mcp.connect("bob") as bob:
        new = await ok(
            owner,
            "store_fact",
            path="/memory",
            content="a private correction",
            supersedes_id=1,
            tags={},
        )
        old = await ok(bob, "get_fact", fact_id=1, peek=True)
        assert old["superseded_by_id"] is None and old["superseded"] is True
        chain = await ok(bob, "fact_history", fact_id=1)
        assert [f["id"] for f in chain["facts"]] == [1]
        await refused(bob, "get_fact", fact_id=new["id"])
        listed = await ok(bob, "list_facts", under="/memory", limit=100)
        assert 1 not in [f["id"] for f in listed["facts"]]
        assert "private correction" not in json.dumps(listed)


async def test_a_token_named_like_a_role_is_refused_at_the_door(
    mcp: Mcp, add_policy: Callable[..., None]
) -> None:
    """Subjects and roles are separate namespaces: MCP asks the same use case as REST,
    so a token whose subject is a role's name is a 401 with a challenge, never an agent."""
    add_policy("g, alice, team")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    for role in ("admin", "everyone", "team"):
        async with mcp.http(mcp.auth(role)) as http:
            over_mcp = await http.post("/mcp", json=body)
            over_rest = await http.get("/v1/whoami")
        assert over_mcp.status_code == over_rest.status_code == 401, role
        assert 'error="invalid_token"' in over_mcp.headers["www-authenticate"]
        assert over_mcp.json()["error"]["data"]["detail"] == over_rest.json()["detail"]
    async with mcp.connect("alice") as alice:
        assert (await ok(alice, "whoami"))["roles"] == ["everyone", "team"]
