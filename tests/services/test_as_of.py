"""Memory over time: list, search, get and history `as_of` a moment (SPEC)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.errors import InvalidInput, NotFound
from app.usecases.memory import NewFact, SearchRequest
from tests.services.test_search import MODES, grant, model, store  # noqa: F401 (fixture)


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


def find(actor_, q: str, **options):
    options["tags"] = tuple(options.get("tags") or ())
    return actor_.memory.search(actor_.subject, SearchRequest(q=q, **options))


def ids(found) -> list[int]:
    return [r.fact.id for r in found.results]


@pytest.fixture
def timeline(actor, clock, model):  # noqa: F811 (the fixture imported above)
    """t0 old fact; t1 (a moment); t2 it is superseded and another fact deleted; t3 now.

    Returns the moments and the facts: `old` (superseded at t2 by `new`), `gone`
    (created before t1, deleted at t2), `late` (created after t2)."""
    me = actor()
    old = store(me, [NewFact("/t", "kestrel nests in the old tower")], model)[0]
    gone = store(me, [NewFact("/t", "kestrel feeds at the quarry")], model)[0]
    clock.advance(days=1)
    t1 = clock()
    clock.advance(days=1)
    t2 = clock()
    new = store(me, [NewFact("/t", "kestrel nests in the new tower", supersedes_id=old.id)], model)[
        0
    ]
    me.memory.delete(me.subject, gone.id)
    clock.advance(days=1)
    late = store(me, [NewFact("/t", "kestrel seen hunting at dusk")], model)[0]
    clock.advance(days=1)
    t3 = clock()
    return {
        "me": me,
        "t1": t1,
        "t2": t2,
        "t3": t3,
        "old": old,
        "new": new,
        "gone": gone,
        "late": late,
    }


@pytest.mark.parametrize("mode", MODES)
def test_a_search_as_of_a_moment_sees_what_was_current_then(timeline, mode) -> None:
    me, old, new, gone, late = (timeline[k] for k in ("me", "old", "new", "gone", "late"))
    before = find(me, "kestrel tower quarry dusk", mode=mode, as_of=iso(timeline["t1"]), peek=True)
    # Superseded at t2: still the answer at t1; its successor and the late fact do not exist.
    assert set(ids(before)) == {old.id, gone.id}
    shown = {r.fact.id: r.fact for r in before.results}
    assert shown[old.id].superseded is False and shown[old.id].superseded_by_id is None
    assert shown[gone.id].deleted_at is None
    assert before.as_of == datetime.fromtimestamp(timeline["t1"], UTC)
    after = find(me, "kestrel tower quarry dusk", mode=mode, as_of=iso(timeline["t3"]), peek=True)
    assert set(ids(after)) == {new.id, late.id}
    now = find(me, "kestrel tower quarry dusk", mode=mode, peek=True)
    assert set(ids(now)) == {new.id, late.id} and now.as_of is None


def test_a_fact_deleted_later_is_listed_and_read_as_of_before(timeline) -> None:
    me, gone, old = timeline["me"], timeline["gone"], timeline["old"]
    at_t1 = me.memory.list_facts(me.subject, under="/t", as_of=iso(timeline["t1"]))
    assert {f.id for f in at_t1.facts} == {old.id, gone.id}
    assert all(f.deleted_at is None for f in at_t1.facts)
    at_t3 = me.memory.list_facts(me.subject, under="/t", as_of=iso(timeline["t3"]))
    assert {f.id for f in at_t3.facts} == {timeline["new"].id, timeline["late"].id}
    # By id: there at t1 without include_deleted, gone at t3 (a 404 like any deleted fact).
    assert me.memory.get(me.subject, gone.id, as_of=iso(timeline["t1"])).deleted_at is None
    with pytest.raises(NotFound):
        me.memory.get(me.subject, gone.id, as_of=iso(timeline["t3"]))
    assert me.memory.get(me.subject, gone.id, as_of=iso(timeline["t3"]), include_deleted=True)


def test_a_fact_created_after_the_moment_appears_nowhere(timeline) -> None:
    me, late, new, old = timeline["me"], timeline["late"], timeline["new"], timeline["old"]
    t1 = iso(timeline["t1"])
    for mode in MODES:
        assert late.id not in ids(find(me, "kestrel dusk hunting", mode=mode, as_of=t1))
    assert late.id not in {f.id for f in me.memory.list_facts(me.subject, as_of=t1).facts}
    for fact_id in (late.id, new.id):
        with pytest.raises(NotFound):
            me.memory.get(me.subject, fact_id, as_of=t1, include_deleted=True)
        with pytest.raises(NotFound):
            me.memory.history(me.subject, fact_id, as_of=t1)
    chain = me.memory.history(me.subject, old.id, as_of=t1)
    assert [f.id for f in chain] == [old.id] and chain[0].superseded is False
    assert [f.id for f in me.memory.history(me.subject, old.id)] == [old.id, new.id]


def test_an_as_of_read_is_never_a_recall(timeline) -> None:
    me, old = timeline["me"], timeline["old"]
    t1 = iso(timeline["t1"])
    me.memory.get(me.subject, old.id, as_of=t1)
    for mode in MODES:
        assert old.id in ids(find(me, "kestrel old tower", mode=mode, as_of=t1))
    assert me.memory.get(me.subject, old.id, peek=True).recall_count == 0


def test_a_hidden_fact_stays_hidden_at_every_moment(timeline, actor, rt) -> None:
    grant(timeline["me"].runtime, "p, alice, path:/open/*, read, allow")
    me = timeline["me"]
    mine = store(me, [NewFact("/open/k", "kestrel in the open field")])[0]
    assert [f.id for f in actor("alice").memory.list_facts("alice", under="/open").facts] == [
        mine.id
    ]
    alice = actor("alice")
    for at in ("t1", "t2", "t3"):
        moment = iso(timeline[at])
        for mode in MODES:
            seen = ids(find(alice, "kestrel tower quarry field", mode=mode, as_of=moment))
            assert set(seen) <= {mine.id}
        listed = alice.memory.list_facts("alice", under="/t", as_of=moment).facts
        assert listed == []
        with pytest.raises(NotFound):
            alice.memory.get("alice", timeline["old"].id, as_of=moment)
        with pytest.raises(NotFound):
            alice.memory.history("alice", timeline["old"].id, as_of=moment)


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ("2026-12-01T09:30:00", "timezone"),  # no offset: which moment is it?
        ("1800000000", "RFC 3339"),
        ("2026-02-30T00:00:00Z", "exists"),
        ("next tuesday", "RFC 3339"),
    ],
)
def test_a_bad_moment_is_refused_naming_as_of(actor, raw: str, named: str) -> None:
    me = actor()
    for call in (
        lambda: me.memory.list_facts(me.subject, as_of=raw),
        lambda: find(me, "x", as_of=raw),
        lambda: me.memory.get(me.subject, 1, as_of=raw),
        lambda: me.memory.history(me.subject, 1, as_of=raw),
    ):
        with pytest.raises(InvalidInput) as caught:
            call()
        assert named in caught.value.detail
        assert caught.value.errors == [{"loc": ["as_of"], "msg": caught.value.detail}]


def test_a_moment_in_the_future_or_before_the_memory_is_refused(actor, clock) -> None:
    me = actor()
    with pytest.raises(InvalidInput, match="future"):
        me.memory.list_facts(me.subject, as_of=iso(clock() + 60))
    with pytest.raises(InvalidInput, match="before this memory began"):
        find(me, "x", mode="keyword", as_of="2001-01-01T00:00:00Z")
    # An offset is a moment like any other: normalised to UTC.
    page = me.memory.list_facts(me.subject, as_of=iso(clock()).replace("Z", "+00:00"))
    assert page.as_of == datetime.fromtimestamp(clock(), UTC)


def test_a_cursor_belongs_to_its_moment(timeline) -> None:
    me, t1 = timeline["me"], iso(timeline["t1"])
    first = me.memory.list_facts(me.subject, under="/t", as_of=t1, limit=1)
    assert first.next_cursor is not None
    rest = me.memory.list_facts(me.subject, under="/t", as_of=t1, limit=1, cursor=first.next_cursor)
    assert {first.facts[0].id, rest.facts[0].id} == {timeline["old"].id, timeline["gone"].id}
    with pytest.raises(InvalidInput, match="cursor"):
        me.memory.list_facts(me.subject, under="/t", limit=1, cursor=first.next_cursor)


def test_a_facts_created_at_as_shown_includes_it(actor, clock) -> None:
    me = actor()
    clock.now += 0.1234567  # between two microseconds: shown rounded to one of them
    fact = store(me, [NewFact("/edge", "a fact at an odd moment")])[0]
    shown = fact.created_at.isoformat()
    assert [f.id for f in me.memory.list_facts(me.subject, under="/edge", as_of=shown).facts] == [
        fact.id
    ]
    earlier = datetime.fromtimestamp(clock() - 1e-5, UTC).isoformat()
    assert me.memory.list_facts(me.subject, under="/edge", as_of=earlier).facts == []


def test_a_hidden_successor_leaves_the_same_trace_at_every_moment(actor, clock, rt) -> None:
    owner = actor()
    grant(rt, "p, alice, path:/open/*, read, allow")
    old = store(owner, [NewFact("/open/x", "the door code is 1111")])[0]
    clock.advance(days=1)
    t1 = iso(clock())
    clock.advance(days=1)
    store(owner, [NewFact("/private/x", "the door code is 2222", supersedes_id=old.id)])
    alice = actor("alice")
    then = alice.memory.get("alice", old.id, as_of=t1)
    assert then.superseded is False and then.superseded_by_id is None
    assert [f.id for f in alice.memory.list_facts("alice", under="/open", as_of=t1).facts] == [
        old.id
    ]
    now = alice.memory.get("alice", old.id, peek=True)
    assert now.superseded is True and now.superseded_by_id is None  # the one trace
    assert alice.memory.list_facts("alice", under="/open").facts == []
    assert [f.id for f in alice.memory.history("alice", old.id)] == [old.id]
