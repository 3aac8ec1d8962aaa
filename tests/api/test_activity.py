"""The activity record (GET /v1/activity): every change recorded in its own transaction,
with who, how and what (never content); an admin sees all, a subject its own changes,
and never an entry about a fact it cannot read."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.db.tables import activity
from app.runtime import Runtime
from app.services import activity as activity_service
from app.settings import Settings
from app.usecases.memory import Memory, NewFact
from tests.api.conftest import Auth, assert_problem
from tests.conftest import FakeClock, same_memory

ACTIONS = ("read", "write", "delete", "tag")


@pytest.fixture
def two_subjects(add_policy: Callable[..., None]) -> None:
    for who in ("alice", "bob"):
        add_policy(*(f"p, {who}, path:/{who}/*, {act}, allow" for act in ACTIONS))


def entries(client: TestClient, auth: Auth, who: str = "default", **query) -> list[dict]:
    """The entries `who` sees; `query` holds the filters (`subject=` among them)."""
    response = client.get("/v1/activity", params=query, headers=auth(who))
    assert response.status_code == 200, response.text
    return response.json()["entries"]


def entry_count(rt: Runtime) -> int:
    with rt.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(activity)).scalar_one())


def test_every_kind_of_change_is_recorded_with_who_how_and_what(
    client: TestClient, auth: Auth, two_subjects: None
) -> None:
    me = auth("alice")
    stored = client.post(
        "/v1/facts",
        json={"path": "/alice/kitchen", "content": "the secret sauce is miso"},
        headers=me,
    ).json()
    newer = client.post(
        "/v1/facts",
        json={
            "path": "/alice/kitchen",
            "content": "the sauce is miso and honey",
            "supersedes_id": stored["id"],
        },
        headers=me,
    ).json()
    assert client.delete(f"/v1/facts/{newer['id']}", headers=me).status_code == 204
    assert (
        client.put("/v1/paths/alice/kitchen/tags", json={"room": "k1"}, headers=me).status_code
        == 200
    )
    assert client.delete("/v1/paths/alice/kitchen/tags/room", headers=me).status_code == 204
    line = "p, carol, path:/carol/*, read, allow"
    assert (
        client.post("/v1/policies", json={"line": line}, headers=auth("default")).status_code == 201
    )
    assert (
        client.request(
            "DELETE", "/v1/policies", json={"line": line}, headers=auth("default")
        ).status_code
        == 204
    )
    token = client.post("/v1/tokens", json={"expires_in": "1h"}, headers=me).json()
    assert client.delete(f"/v1/tokens/{token['jti']}", headers=me).status_code == 204
    # Reads, recalls and searches are not changes.
    client.get(f"/v1/facts/{stored['id']}", headers=me)
    client.post(f"/v1/facts/{stored['id']}/recall", headers=me)
    client.get("/v1/search", params={"q": "miso", "mode": "keyword"}, headers=me)

    seen = entries(client, auth)
    kinds = [(e["subject"], e["via"], e["action"]) for e in reversed(seen)]
    assert kinds == [
        ("alice", "rest", "store"),
        ("alice", "rest", "supersede"),
        ("alice", "rest", "delete"),
        ("alice", "rest", "tag_set"),
        ("alice", "rest", "tag_remove"),
        ("default", "rest", "policy_add"),
        ("default", "rest", "policy_remove"),
        ("alice", "rest", "token_issue"),
        ("alice", "rest", "token_revoke"),
    ]
    by = {e["action"]: e for e in seen}
    assert (by["store"]["fact_id"], by["store"]["path"]) == (stored["id"], "/alice/kitchen")
    assert (by["supersede"]["fact_id"], by["supersede"]["supersedes_id"]) == (
        newer["id"],
        stored["id"],
    )
    assert by["delete"]["fact_id"] == newer["id"]
    assert by["tag_set"]["tag"] == "room=k1" and by["tag_remove"]["tag"] == "room"
    assert by["policy_add"]["policy"] == line
    assert by["token_issue"]["jti"] == token["jti"] and by["token_issue"]["note"] == "for alice"
    assert by["token_revoke"]["jti"] == token["jti"]
    # What, never the content.
    assert "miso" not in str(seen)
    assert [e["id"] for e in seen] == sorted((e["id"] for e in seen), reverse=True)


def test_a_change_that_fails_leaves_no_entry(
    client: TestClient, auth: Auth, rt: Runtime, two_subjects: None, fact_count
) -> None:
    before, facts_before = entry_count(rt), fact_count()
    batch = {"facts": [{"path": "/alice/a", "content": "mine"}, {"path": "/bob/b", "content": "x"}]}
    assert_problem(client.post("/v1/facts/batch", json=batch, headers=auth("alice")), 403)
    assert_problem(client.delete("/v1/facts/1", headers=auth("alice")), 403)
    assert (entry_count(rt), fact_count()) == (before, facts_before)


def test_the_entry_and_the_change_commit_together(
    client: TestClient, auth: Auth, rt: Runtime, monkeypatch: pytest.MonkeyPatch, fact_count
) -> None:
    """The record is written in the store's transaction: when writing it fails after
    the fact's rows went in, the fact is not there either (and no entry is)."""
    before, facts_before = entry_count(rt), fact_count()

    def broken(*args, **kwargs):
        raise RuntimeError("the activity table is gone")

    monkeypatch.setattr(activity_service, "record_many", broken)
    failed = client.post(
        "/v1/facts", json={"path": "/n", "content": "lost"}, headers=auth("default")
    )
    assert_problem(failed, 500)
    assert (entry_count(rt), fact_count()) == (before, facts_before)
    monkeypatch.undo()
    made = client.post("/v1/facts", json={"path": "/n", "content": "kept"}, headers=auth("default"))
    assert made.status_code == 201
    assert (entry_count(rt), fact_count()) == (before + 1, facts_before + 1)


def test_a_subject_sees_its_own_changes_and_none_about_a_fact_it_cannot_read(
    client: TestClient, auth: Auth, add_policy: Callable[..., None], two_subjects: None
) -> None:
    me, other = auth("alice"), auth("bob")
    mine = client.post("/v1/facts", json={"path": "/alice/diary", "content": "d1"}, headers=me)
    shared = client.post(
        "/v1/facts", json={"path": "/alice/board", "content": "b1"}, headers=me
    ).json()
    client.post("/v1/facts", json={"path": "/bob/x", "content": "bob's"}, headers=other)
    client.put("/v1/paths/alice/tagged/tags", json={"k": "v"}, headers=me)
    own = entries(client, auth, "alice")
    assert {e["subject"] for e in own} == {"alice"}
    assert {e["fact_id"] for e in own if e["fact_id"]} == {mine.json()["id"], shared["id"]}
    assert_problem(client.get("/v1/activity?subject=bob", headers=me), 403)
    assert entries(client, auth, "alice", subject="alice") == own
    # Alice loses read on her diary: her entry about it is gone from her record (and
    # so is her tag entry on a node that no longer exists for her), not from the admin's.
    add_policy(
        "p, alice, path:/alice/diary/*, read, deny",
        "p, alice, path:/alice/tagged/*, read, deny",
        "p, alice, path:/alice/tagged/*, tag, deny",
        "p, alice, path:/alice/tagged/*, write, deny",
    )
    now = entries(client, auth, "alice")
    assert mine.json()["id"] not in {e["fact_id"] for e in now}
    assert "/alice/diary" not in str(now) and "/alice/tagged" not in str(now)
    assert shared["id"] in {e["fact_id"] for e in now}
    assert mine.json()["id"] in {e["fact_id"] for e in entries(client, auth, "default")}


def test_an_entry_naming_a_replaced_fact_the_reader_cannot_read_is_not_shown(
    client: TestClient, auth: Auth, add_policy: Callable[..., None], two_subjects: None
) -> None:
    """Bob corrects a public fact of alice's with one of his own, at his own path; once
    he may no longer read alice's, his supersede entry (which names it) is gone from his
    record, though he still reads the fact it stored."""
    add_policy("p, bob, path:/alice/pub/*, write, allow")
    old = client.post(
        "/v1/facts",
        json={"path": "/alice/pub", "content": "v1", "tags": {"visibility": "public"}},
        headers=auth("alice"),
    ).json()
    new = client.post(
        "/v1/facts",
        json={"path": "/bob/notes", "content": "v2", "supersedes_id": old["id"]},
        headers=auth("bob"),
    )
    assert new.status_code == 201, new.text
    assert new.json()["id"] in {e["fact_id"] for e in entries(client, auth, "bob")}
    add_policy("p, bob, path:/alice/pub/*, read, deny")
    assert client.get(f"/v1/facts/{new.json()['id']}", headers=auth("bob")).status_code == 200
    assert entries(client, auth, "bob") == []
    assert len(entries(client, auth, "default", subject="bob")) == 1


def test_filters_and_pages(
    client: TestClient, auth: Auth, clock: FakeClock, two_subjects: None
) -> None:
    for n in range(5):
        client.post(
            "/v1/facts",
            json={"path": f"/alice/p{n % 2}", "content": f"a{n}"},
            headers=auth("alice"),
        )
        clock.advance(seconds=60)
    client.post("/v1/facts", json={"path": "/bob/x", "content": "b"}, headers=auth("bob"))
    assert {e["subject"] for e in entries(client, auth, subject="bob")} == {"bob"}
    assert len(entries(client, auth, subject="alice", action="store")) == 5
    assert entries(client, auth, action="delete") == []
    under = entries(client, auth, under="/alice/p1")
    assert [e["path"] for e in under] == ["/alice/p1", "/alice/p1"]
    assert len(entries(client, auth, under="/alice")) == 5
    # since and until: RFC 3339, inclusive.
    everything = entries(client, auth, subject="alice")
    middle = everything[2]["at"]
    assert [e["at"] for e in entries(client, auth, subject="alice", since=middle)] == [
        e["at"] for e in everything[:3]
    ]
    assert len(entries(client, auth, subject="alice", until=middle)) == 3
    one = everything[-1]["fact_id"]
    assert [e["fact_id"] for e in entries(client, auth, fact_id=one)] == [one]
    # Pages: newest first, no entry twice, none left out.
    seen, cursor = [], None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = client.get("/v1/activity", params=params, headers=auth("default")).json()
        seen += [e["id"] for e in page["entries"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [e["id"] for e in entries(client, auth, limit=100)]
    for bad in (
        {"action": "explode"},
        {"since": "yesterday"},
        {"cursor": "forged.cursor"},
        {"under": "/Bad Path"},
        {"limit": 101},
    ):
        assert_problem(client.get("/v1/activity", params=bad, headers=auth("default")), 422)
    facts_cursor = client.get("/v1/facts", params={"limit": 1}, headers=auth("default"))
    other = facts_cursor.json()["next_cursor"]
    assert_problem(
        client.get("/v1/activity", params={"cursor": other}, headers=auth("default")), 422
    )


def test_each_front_end_is_named(
    client: TestClient, auth: Auth, rt: Runtime, clock: FakeClock
) -> None:
    client.post("/v1/facts", json={"path": "/n", "content": "over rest"}, headers=auth("default"))
    Memory(rt, clock=clock).store("default", NewFact("/n", "from the command line"))
    Memory(rt, clock=clock, via="rest").via("mcp").store("default", NewFact("/n", "over mcp"))
    assert [e["via"] for e in reversed(entries(client, auth, action="store"))] == [
        "rest",
        "cli",
        "mcp",
    ]


def test_old_entries_and_long_expired_tokens_are_pruned(
    settings: Settings, clock: FakeClock
) -> None:
    from app.runtime import open_runtime

    rt = open_runtime(same_memory(settings, activity={"keep_days": 30}))
    try:
        memory = Memory(rt, clock=clock)
        memory.store("default", NewFact("/old", "stored long ago"))
        clock.advance(days=31)
        memory.store("default", NewFact("/new", "stored now"))
        assert memory.prune()["activity"] == 1
        left = memory.activity("default").entries
        assert [e.path for e in left] == ["/new"]
        assert memory.prune() == {"activity": 0, "tokens": 0}
    finally:
        rt.close()
    forever = open_runtime(same_memory(settings, activity={"keep_days": None}))
    try:
        clock.advance(days=10_000)
        assert Memory(forever, clock=clock).prune()["activity"] == 0
    finally:
        forever.close()


def test_keep_days_is_checked_in_config(settings: Settings) -> None:
    from app.errors import ConfigError
    from app.settings import load_settings

    with pytest.raises(ConfigError, match=r"activity\.keep_days"):
        load_settings(settings.dirs, env={"EMBORNAL_ACTIVITY__KEEP_DAYS": "0"})


def test_an_import_and_a_restore_are_one_entry_each(
    settings: Settings, rt: Runtime, clock: FakeClock, fresh_memory, tmp_path
) -> None:
    import io

    source = Memory(rt, clock=clock)
    for n in range(3):
        source.store("default", NewFact("/moved", f"fact {n}"))
    out = io.StringIO()
    source.export("default", out)
    lines = out.getvalue().splitlines(keepends=True)
    source.import_lines("default", lines)  # into a memory that holds them: a merge
    (merged,) = source.activity("default", activity_service.Filters(action="import")).entries
    assert merged.note == "0 facts, 0 paths, 0 path tags and 0 policies added"
    target_rt = open_runtime_for(fresh_memory(tmp_path / "fresh"))
    try:
        target = Memory(target_rt, clock=clock)
        target.import_lines("default", lines)  # into a fresh memory: a restore
        (restored,) = target.activity("default").entries
        assert (restored.action, restored.via, restored.subject) == ("restore", "cli", "default")
        assert restored.note.startswith("10 facts, ")  # the 7 /memory facts and the 3
    finally:
        target_rt.close()


def open_runtime_for(settings: Settings) -> Runtime:
    from app.runtime import open_runtime

    return open_runtime(settings)


def test_the_upkeep_thread_prunes_in_the_background() -> None:
    """A server's thread runs the pruning pass (first pass after a delay, here none), and
    stops when told; a failed pass is logged and tried again, not fatal."""
    import threading

    from app.usecases.upkeep import Upkeep

    ran = threading.Event()
    calls: list[int] = []

    def run() -> dict[str, int]:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the database was busy")
        ran.set()
        return {"activity": 2, "tokens": 0}

    upkeep = Upkeep(run, every_seconds=0.0, first_after=0.0)
    upkeep.start()
    assert ran.wait(10)
    upkeep.stop()
    assert len(calls) >= 2 and upkeep.passes >= 1
