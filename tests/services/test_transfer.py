"""Export and import: lossless round trip, idempotent merge, checked lines."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import func, select

from app.db.dialects import backend
from app.db.tables import casbin_rule, facts, facts_vec, path_tags
from app.errors import Conflict, Forbidden, InvalidInput, Unavailable
from app.runtime import Runtime, open_runtime
from app.services import facts as fact_service
from app.services import paths as path_service
from app.services import policies as policy_service
from app.services import transfer
from app.services.facts import NewFact
from app.usecases.memory import Memory
from tests.conftest import DAY, TEST_WIDTH, FakeClock


def vector(seed: int) -> bytes:
    return np.random.default_rng(seed).standard_normal(TEST_WIDTH).astype("<f4").tobytes()


def export_lines(rt: Runtime, *, with_embeddings: bool = True) -> list[str]:
    out = io.StringIO()
    with Memory(rt).transaction() as (conn, ctx):
        transfer.write_records(
            transfer.export_memory(conn, ctx, with_embeddings=with_embeddings), out
        )
    return out.getvalue().splitlines()


# The importer's clock: the file's times (FakeClock's, in 2027) are its past.
NOW = FakeClock().now + 30 * DAY


def read(lines: list[str]) -> transfer.ExportFile:
    return transfer.read_export(lines, now=NOW)


def import_lines(
    rt: Runtime, lines: list[str], *, with_policies: bool = True
) -> transfer.ImportReport:
    """Through the use case, as `embornal memory import [--with-policies]` runs it."""
    return Memory(rt, clock=lambda: NOW).import_lines("default", lines, with_policies=with_policies)


def count_facts(rt: Runtime) -> int:
    with Memory(rt).transaction() as (conn, _ctx):
        return conn.execute(select(func.count()).select_from(facts)).scalar_one()


@pytest.fixture
def other(tmp_path: Path, fresh_memory) -> Iterator[Runtime]:
    """A second, fresh memory (only what the migration wrote), in the same backend."""
    runtime = open_runtime(fresh_memory(tmp_path / "other"))
    yield runtime
    runtime.close()


@pytest.fixture
def rich(rt: Runtime, actor, clock: FakeClock) -> Runtime:
    """A memory with everything an export must carry."""
    me, alice = actor(), actor("alice")
    with me.tx() as (conn, ctx):
        for line in (
            "p, alice, path:/team/*, read, allow",
            "p, alice, path:/team/*, write, allow",
            "p, bob, tag:visibility=public, read, deny",
            "g, carol, admin",
        ):
            policy_service.add_policy(conn, ctx, line)
        path_service.set_path_tags(conn, ctx, "/team", {"visibility": "public", "tier": "gold"})
        path_service.set_path_tags(conn, ctx, "/empty/node", {"kind": "placeholder"})
        first = fact_service.store_fact(
            conn, ctx, NewFact("/projects/x", "the sky is blue", {"k": "v"}), vector=vector(1)
        )
        # A batch may store the same text twice at one instant: two facts, both kept.
        fact_service.store_facts(
            conn, ctx, [NewFact("/projects/x", "twice"), NewFact("/projects/x", "twice")]
        )
    clock.advance(days=1)
    with me.tx() as (conn, ctx):
        second = fact_service.store_fact(
            conn, ctx, NewFact("/projects/x", "the sky is grey", supersedes_id=first.id)
        )
    clock.advance(days=2)
    with me.tx() as (conn, ctx):
        fact_service.store_fact(
            conn, ctx, NewFact("/projects/x", "the sky is dark", supersedes_id=second.id)
        )
        # Characters str.splitlines() breaks on, which JSON leaves unescaped.
        fact_service.store_fact(conn, ctx, NewFact("/projects/y", "a\u2028b\u2029c\x85d é"))
        gone = fact_service.store_fact(conn, ctx, NewFact("/projects/y", "soon deleted"))
        fact_service.delete_fact(conn, ctx, gone.id)
    with alice.tx() as (conn, ctx):
        mine = fact_service.store_fact(
            conn, ctx, NewFact("/team/notes", "alice's note [[/projects/x]]"), vector=vector(2)
        )
    clock.advance(days=5)
    with me.tx() as (conn, ctx):
        fact_service.get_fact(conn, ctx, mine.id)  # a recall: recall state must travel
    return rt


def test_round_trip_into_a_fresh_memory_is_lossless(rich: Runtime, other: Runtime) -> None:
    before = export_lines(rich)
    report = import_lines(other, before)
    assert report.mode == "restore"
    assert report.embeddings_written == 2 and report.facts_skipped == 0
    assert export_lines(other) == before

    records = [json.loads(line) for line in before]
    by_content = {r["content"]: r for r in records if r["type"] == "fact"}
    assert by_content["soon deleted"]["deleted_at"] is not None
    note = by_content["alice's note [[/projects/x]]"]
    assert note["owner"] == "alice" and note["tags"] == {"owner": "alice"}
    assert note["recall_count"] == 1 and note["stability_days"] > 1.0
    assert {"type": "policy", "line": "g, carol, admin"} in records
    assert {r["path"]: r["tags"] for r in records if r["type"] == "path"}["/empty/node"] == {
        "kind": "placeholder"
    }

    # The restored memory works: keyword index, vectors, history, effective tags.
    with Memory(other).transaction() as (conn, ctx):
        assert backend(conn).keywords.document_frequency(conn, "grey") == 1
        assert conn.execute(select(func.count()).select_from(facts_vec)).scalar_one() == 2
        chain = fact_service.history(conn, ctx, by_content["the sky is blue"]["id"])
        assert [f.content for f in chain] == [
            "the sky is blue",
            "the sky is grey",
            "the sky is dark",
        ]
        (restored,) = fact_service.hydrate(conn, ctx, [note["id"]])
        assert restored.effective_tags["visibility"] == "public"


def test_without_embeddings_the_facts_wait_for_reindex(rich: Runtime, other: Runtime) -> None:
    lines = export_lines(rich, with_embeddings=False)
    assert all("embedding" not in json.loads(line) for line in lines)
    report = import_lines(other, lines)
    assert report.embeddings_written == 0
    current = sum(
        1 for r in map(json.loads, lines) if r["type"] == "fact" and r["deleted_at"] is None
    )
    assert report.facts_waiting_for_embedding == current
    assert export_lines(other, with_embeddings=False) == lines


def test_vectors_of_another_width_are_left_for_reindex(rich: Runtime, other: Runtime) -> None:
    records = [json.loads(line) for line in export_lines(rich)]
    records[0]["embedding_width"] = 16  # as if exported from a memory with another model
    narrow = base64.b64encode(np.ones(16, dtype="<f4").tobytes()).decode()
    for record in records:
        if "embedding" in record:
            record["embedding"] = narrow
    report = import_lines(other, [json.dumps(r) for r in records])
    assert report.embeddings_written == 0
    assert report.facts_waiting_for_embedding == sum(
        1 for r in records if r["type"] == "fact" and r["deleted_at"] is None
    )
    with Memory(other).transaction() as (conn, _ctx):
        assert conn.execute(select(func.count()).select_from(facts_vec)).scalar_one() == 0


def test_importing_twice_changes_nothing_the_second_time(rich: Runtime, other: Runtime) -> None:
    lines = export_lines(rich)
    import_lines(other, lines)
    again = import_lines(other, lines)
    assert again.mode == "merge"
    assert again.facts_added == 0 and again.policies_added == again.path_tags_added == []
    assert again.paths_added == 0
    assert again.facts_skipped == sum(1 for line in lines if '"type":"fact"' in line)
    assert export_lines(other) == lines
    # And into the memory it came from: nothing new either.
    assert import_lines(rich, lines).facts_added == 0


def test_merge_into_a_used_memory_gives_new_ids_and_remaps_chains(
    rich: Runtime, other: Runtime, clock: FakeClock
) -> None:
    with Memory(other).transaction(write=True) as (conn, ctx):
        ctx = replace(ctx, clock=clock)
        own = fact_service.store_fact(conn, ctx, NewFact("/local", "already here"))
        path_service.set_path_tags(conn, ctx, "/team", {"visibility": "private"})
    lines = export_lines(rich)
    report = import_lines(other, lines)
    assert report.mode == "merge"
    seed = 7  # the /memory facts: same migration template, so already present
    file_facts = [json.loads(line) for line in lines if '"type":"fact"' in line]
    assert report.facts_skipped == seed and report.facts_added == len(file_facts) - seed
    assert report.path_tags_kept == 1  # /team keeps visibility=private: existing wins

    with Memory(other).transaction() as (conn, ctx):
        ids = dict(conn.execute(select(facts.c.content, facts.c.id)).all())
        imported = {f["content"] for f in file_facts[seed:]}
        assert all(ids[c] > own.id for c in imported)  # appended after what was there
        chain = fact_service.history(conn, ctx, ids["the sky is dark"])
        assert [f.content for f in chain] == [
            "the sky is blue",
            "the sky is grey",
            "the sky is dark",
        ]
        assert chain[1].supersedes_id == ids["the sky is blue"]
        twice = conn.execute(
            select(func.count()).select_from(facts).where(facts.c.content == "twice")
        ).scalar_one()
        assert twice == 2
        assert path_service.own_path_tags(conn, path_service.find_path_id(conn, "/team") or 0) == {
            "visibility": "private",
            "tier": "gold",
        }


def test_a_merge_keeps_one_copy_of_the_memory_facts_of_memories_made_apart(
    rich: Runtime, other: Runtime
) -> None:
    """Each memory's migration writes the /memory facts at that memory's creation: the
    file's copies are already present although their created_at differs."""
    with Memory(other).transaction(write=True) as (conn, ctx):
        fact_service.store_fact(conn, ctx, NewFact("/local", "already here"))
    records = [json.loads(line) for line in export_lines(rich)]
    for record in records:
        if record.get("path") == "/memory":  # as if made a day before this memory
            record["created_at"] -= DAY
    seed = [r for r in records if r["type"] == "fact" and r["path"] == "/memory"]
    assert len(seed) == 7
    # The same text stored by hand (a later id) is the user's fact: the old rule holds.
    by_hand = seed[0] | {"id": 1000, "created_at": seed[0]["created_at"] + 60}
    compact = [json.dumps(r, separators=(",", ":")) for r in records]
    lines = with_extra_fact(compact, by_hand)

    report = import_lines(other, lines)
    assert report.mode == "merge" and report.facts_skipped == 7
    with Memory(other).transaction() as (conn, _ctx):
        held = conn.execute(
            select(facts.c.id, facts.c.content)
            .where(facts.c.path_id == path_service.find_path_id(conn, "/memory"))
            .order_by(facts.c.id)
        ).all()
    assert [row.id for row in held[:7]] == list(range(1, 8))
    assert [row.content for row in held] == [r["content"] for r in seed] + [seed[0]["content"]]
    assert import_lines(other, lines).facts_added == 0  # and a second time, nothing


def with_extra_fact(lines: list[str], record: dict) -> list[str]:
    """The file with one more fact line after its last one (and the end line's count)."""
    last = max(i for i, line in enumerate(lines) if '"type":"fact"' in line)
    end = json.loads(lines[-1])
    end["facts"] += 1
    return [*lines[: last + 1], json.dumps(record), *lines[last + 1 : -1], json.dumps(end)]


def test_a_merge_names_what_of_the_memory_it_supersedes_and_never_backdates_it(
    other: Runtime,
) -> None:
    """A file's fact may supersede one the memory held (its own copy of a /memory fact
    too): the report names it, and a successor dated before the fact it replaces here,
    which would rewrite what the memory believed then, refuses the file."""
    with Memory(other).transaction(write=True) as (conn, ctx):
        fact_service.store_fact(conn, ctx, NewFact("/local", "already here"))
    records = [json.loads(line) for line in export_lines(other)]

    def compact(rows: list[dict]) -> list[str]:
        return [json.dumps(r, separators=(",", ":")) for r in rows]

    guide = next(r for r in records if r["type"] == "fact" and r["id"] == 1)

    def successor(made_at: float) -> dict:
        return guide | {
            "id": 5000, "content": "the guide, edited", "supersedes_id": 1,
            "created_at": made_at, "deleted_at": None,
        }  # fmt: skip

    # Held by its text, the file's copy dated earlier than the memory's: a successor
    # after the file's copy but before the memory's is refused whole.
    early = [r | {"created_at": r["created_at"] - 10} if r is guide else r for r in records]
    backdated = with_extra_fact(compact(early), successor(guide["created_at"] - 5))
    before = count_facts(other)
    with pytest.raises(InvalidInput, match="supersedes fact 1 but was created before it"):
        import_lines(other, backdated)
    assert count_facts(other) == before
    # Within the file, too.
    inverted = with_extra_fact(compact(records), successor(guide["created_at"] - 5))
    with pytest.raises(InvalidInput, match="was created before it"):
        read(inverted)

    later = with_extra_fact(compact(records), successor(guide["created_at"] + 60))
    report = import_lines(other, later)
    assert report.memory_facts_superseded == [1] and report.facts_added == 1
    with Memory(other).transaction() as (conn, _ctx):
        assert (
            conn.execute(select(facts.c.content).where(facts.c.supersedes_id == 1)).scalar_one()
            == "the guide, edited"
        )


def test_merge_refuses_a_chain_the_memory_already_continued(rt: Runtime, actor) -> None:
    me = actor()
    with me.tx() as (conn, ctx):
        old = fact_service.store_fact(conn, ctx, NewFact("/a", "v1"))
    lines = export_lines(rt)
    with me.tx() as (conn, ctx):
        fact_service.store_fact(conn, ctx, NewFact("/a", "v2 here", supersedes_id=old.id))
    # The file continues v1 another way; the memory already superseded v1.
    v1 = next(json.loads(line) for line in lines if '"content":"v1"' in line)
    fork = v1 | {"id": v1["id"] + 100, "content": "v2 elsewhere", "supersedes_id": v1["id"]}
    forked = with_extra_fact(lines, fork)
    before = count_facts(rt)
    with pytest.raises(Conflict, match=rf"line {forked.index(json.dumps(fork)) + 1}: .*#"):
        import_lines(rt, forked)
    assert count_facts(rt) == before


BAD_LINES = [
    ({"path": "/Bad Path"}, "segment 'bad path'"),
    ({"tags": {"owner": "mallory"}}, "owner tag"),
    ({"tags": {"k": "has space"}}, "value must be"),
    ({"content": "   "}, "content is empty"),
    ({"surprise": 1}, "unknown field 'surprise'"),
    ({"supersedes_id": 999}, "no earlier line"),
    ({"created_at": "yesterday"}, "created_at"),
    ({"embedding": "%%%"}, "base64"),
    ({"owner": "default\u200b"}, "control or format character (U+200B)"),
    ({"owner": "cafe\u0301"}, "NFC"),
    ({"tags": {"k": "v\u202e"}}, "control or format character (U+202E)"),
]


@pytest.mark.parametrize(("change", "named"), BAD_LINES)
def test_a_bad_fact_line_is_named_and_nothing_is_written(
    rich: Runtime, other: Runtime, change: dict, named: str
) -> None:
    lines = export_lines(rich)
    number = max(i for i, line in enumerate(lines) if '"type":"fact"' in line)
    bad = json.loads(lines[number]) | change
    lines[number] = json.dumps(bad)
    with pytest.raises(InvalidInput) as caught:
        read(lines)
    assert caught.value.detail.startswith(f"line {number + 1}: ")
    assert named in caught.value.detail
    assert count_facts(other) == 7  # untouched


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda ls: [*ls[:3], "{not json", *ls[3:]], "line 4: not JSON"),
        (
            lambda ls: [*ls[:-1], '{"type":"policy","line":"p, x, file:/etc, read, allow"}'],
            r"line \d+: policy object 'file:/etc'",
        ),
        (lambda ls: ls[1:], "line 1: the first line must be"),
        (lambda ls: ls[:-1], "without its end line"),
        (lambda ls: [*ls, ls[-1]], "nothing may follow the end line"),
        (lambda ls: [ls[0].replace('"version":1', '"version":2'), *ls[1:]], "line 1: export"),
        (lambda ls: [*ls[:-1], ls[-1].replace('"facts":', '"facts":1')], "the end line counts"),
    ],
)
def test_a_malformed_file_is_refused(rich: Runtime, edit, named: str) -> None:
    with pytest.raises(InvalidInput, match=named):
        read(edit(export_lines(rich)))


def test_a_restore_that_would_drop_the_admin_role_is_refused(rich: Runtime, other: Runtime) -> None:
    lines = [line for line in export_lines(rich) if "g, default, admin" not in line]
    ends = json.loads(lines[-1])
    lines[-1] = json.dumps({**ends, "policies": ends["policies"] - 1})
    with pytest.raises(InvalidInput, match="without the 'admin' role"):
        import_lines(other, lines)
    with Memory(other).transaction() as (conn, _ctx):
        assert transfer.is_fresh(conn)


def test_only_an_admin_moves_the_whole_memory(rich: Runtime, actor) -> None:
    lines = export_lines(rich)
    with actor("alice").tx() as (conn, ctx):
        with pytest.raises(Forbidden):
            transfer.export_memory(conn, ctx)
        with pytest.raises(Forbidden):
            transfer.import_memory(conn, ctx, read(lines))


def test_export_and_import_report_their_progress_in_facts(rich: Runtime, other: Runtime) -> None:
    exported: list[tuple[int, int]] = []
    out = io.StringIO()
    counts = Memory(rich).export("default", out, on_progress=lambda *p: exported.append(p))
    facts_in_file = counts["facts"]
    assert exported[0] == (0, facts_in_file) and exported[-1] == (facts_in_file, facts_in_file)
    imported: list[tuple[int, int]] = []
    lines = out.getvalue().splitlines()
    Memory(other, clock=lambda: NOW).import_lines(
        "default", lines, on_progress=lambda *p: imported.append(p)
    )
    assert imported[0] == (0, facts_in_file) and imported[-1] == (facts_in_file, facts_in_file)


def test_an_export_with_roles_imports_although_it_lists_p_lines_first(
    rich: Runtime, other: Runtime
) -> None:
    # In this order add_policy takes them; an export lists p lines first, and the
    # role hierarchy's upper line before a membership of the lower role may come.
    with Memory(rich).transaction(write=True) as (conn, ctx):
        for line in (
            "g, dana, team",
            "p, team, path:/team/*, read, allow",
            "g, team, staff",
            "p, staff, path:/projects/*, read, allow",
        ):
            policy_service.add_policy(conn, ctx, line)
    lines = export_lines(rich)
    policies = [json.loads(line)["line"] for line in lines if '"type":"policy"' in line]
    assert policies.index("p, team, path:/team/*, read, allow") < policies.index("g, dana, team")
    # The hierarchy's lines swapped: `g, team, staff` first, which a naive import
    # would take to make team a subject before `g, dana, team` makes it a role.
    upper = next(i for i, line in enumerate(lines) if '"g, team, staff"' in line)
    lower = next(i for i, line in enumerate(lines) if '"g, dana, team"' in line)
    lines[upper], lines[lower] = lines[lower], lines[upper]
    import_lines(other, lines)
    with Memory(other).transaction("dana") as (_conn, ctx):
        assert ctx.access.roles == ["everyone", "staff", "team"]


@pytest.mark.only_backend("postgresql")  # PostgreSQL's backup
def test_backup_of_postgres_is_a_private_pg_dump_archive(
    rt: Runtime, tmp_path: Path, monkeypatch
) -> None:
    import pgserver

    # The wheel's pg_dump matches its server; a machine's older one would refuse it.
    tools = Path(pgserver.__file__).parent / "pginstall" / "bin"
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    target = tmp_path / "memory.dump"
    report = Memory(rt).backup(target)
    assert report.facts == 7 and report.path == target
    assert target.read_bytes()[:5] == b"PGDMP"  # pg_restore's custom format
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    with pytest.raises(Conflict, match="--force"):
        Memory(rt).backup(target)


@pytest.mark.only_backend("postgresql")  # PostgreSQL's backup
def test_backup_of_postgres_without_pg_dump_says_how(
    rt: Runtime, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(Unavailable, match="pg_dump --format=custom"):
        Memory(rt).backup(out / "memory.dump")
    assert list(out.iterdir()) == []  # no temporary file left behind


# --- a file someone else made ------------------------------------------------


def vector_text(values: np.ndarray) -> str:
    return base64.b64encode(values.astype("<f4").tobytes()).decode()


def everything(rt: Runtime) -> tuple[int, list[tuple], list[tuple]]:
    """Facts, policy lines and path tags: to prove a refused import wrote nothing."""
    with rt.engine.connect() as conn:
        return (
            conn.execute(select(func.count()).select_from(facts)).scalar_one(),
            sorted(
                tuple(r)
                for r in conn.execute(
                    select(
                        casbin_rule.c.ptype, casbin_rule.c.v0, casbin_rule.c.v1, casbin_rule.c.v2
                    )
                )
            ),
            sorted(
                tuple(r)
                for r in conn.execute(
                    select(path_tags.c.path_id, path_tags.c.key, path_tags.c.value)
                )
            ),
        )


# What the third attack's files held (times that broke every listing afterwards for
# every reader, vectors of NaN, a role as an owner) and the other ways a line can
# hold what no API call would write.
POISONED_FACTS = [
    ({"created_at": 1e308}, "created_at 1e+308 is not a time between 1970 and a day from now"),
    ({"created_at": -1e12}, "created_at -1000000000000.0 is not a time between 1970"),
    ({"created_at": NOW + 2 * DAY}, "is not a time between 1970 and a day from now"),
    ({"last_recall_at": 1e308}, "last_recall_at 1e+308 is not a time"),
    ({"deleted_at": -1.0}, "deleted_at -1.0 is not a time"),
    ({"deleted_at": 1_800_000_000.0 - DAY}, "is before created_at"),
    ({"stability_days": 1e-300}, "stability_days"),
    ({"stability_days": 1e308}, "stability_days"),
    ({"recall_count": 2**64}, "recall_count"),
    ({"id": 2**63}, "id"),
    ({"embedding": vector_text(np.full(TEST_WIDTH, np.nan))}, "not a finite number"),
    ({"embedding": vector_text(np.full(TEST_WIDTH, np.inf))}, "not a finite number"),
    ({"embedding": vector_text(np.zeros(TEST_WIDTH))}, "all zeros"),
    ({"owner": "admin", "tags": {"owner": "admin"}}, "owner 'admin' is a role's name"),
    ({"owner": "everyone", "tags": {"owner": "everyone"}}, "owner 'everyone' is a role's name"),
]


@pytest.mark.parametrize(("change", "named"), POISONED_FACTS)
def test_a_fact_line_the_api_would_never_write_refuses_the_file(
    rich: Runtime, other: Runtime, change: dict, named: str
) -> None:
    lines = export_lines(rich)
    number = max(i for i, line in enumerate(lines) if '"embedding"' in line)  # alice's note
    lines[number] = json.dumps(json.loads(lines[number]) | change)
    before = everything(other)
    with pytest.raises(InvalidInput) as caught:
        import_lines(other, lines)
    assert caught.value.detail.startswith(f"line {number + 1}: "), caught.value.detail
    assert named in caught.value.detail
    assert everything(other) == before


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"tags": {"owner": "mallory"}}, "a path tag may not be 'owner'"),
        ({"tags": {"Team": "a", "team": "b"}}, "tag 'team' is given twice"),
        ({"tags": {f"k{i}": "v" for i in range(33)}}, "at most 32 tags, not 33"),
        ({"created_at": 1e308}, "created_at 1e+308 is not a time"),
        ({"created_at": -5.0}, "created_at -5.0 is not a time"),
    ],
)
def test_a_path_line_the_api_would_never_write_refuses_the_file(
    rich: Runtime, other: Runtime, change: dict, named: str
) -> None:
    lines = export_lines(rich)
    number = next(i for i, line in enumerate(lines) if '"path":"/team"' in line)
    lines[number] = json.dumps(json.loads(lines[number]) | change)
    before = everything(other)
    with pytest.raises(InvalidInput, match=rf"^line {number + 1}: .*{re.escape(named)}"):
        import_lines(other, lines)
    assert everything(other) == before


def test_a_merge_that_would_pass_a_nodes_32_tags_refuses_the_file(
    rich: Runtime, other: Runtime, clock: FakeClock
) -> None:
    with Memory(other).transaction(write=True) as (conn, ctx):
        ctx = replace(ctx, clock=clock)
        fact_service.store_fact(conn, ctx, NewFact("/local", "already here"))
        path_service.set_path_tags(conn, ctx, "/team", {f"k{i}": "v" for i in range(31)})
    lines = export_lines(rich)  # /team visibility=public tier=gold: 33 with the memory's
    number = next(i for i, line in enumerate(lines) if '"path":"/team"' in line)
    before = everything(other)
    with pytest.raises(InvalidInput, match=rf"^line {number + 1}: /team would carry 33 tags"):
        import_lines(other, lines)
    assert everything(other) == before


def test_no_role_owns_a_fact_whether_the_memory_or_the_file_makes_it(
    rich: Runtime, other: Runtime
) -> None:
    lines = export_lines(rich)
    first_alice = next(i for i, line in enumerate(lines) if '"owner":"alice"' in line)
    # The file's own g line makes alice, who owns one of its facts, a role.
    made_role = [*lines[:-1], json.dumps({"type": "policy", "line": "g, zed, alice"})]
    end = json.loads(lines[-1])
    made_role.append(json.dumps(end | {"policies": end["policies"] + 1}))
    with pytest.raises(InvalidInput, match=rf"^line {first_alice + 1}: owner 'alice' is a role"):
        import_lines(other, made_role, with_policies=False)  # applied or not, it is the file's
    # The memory's roles too: here alice is one already.
    Memory(other).add_policy("default", "g, zed, alice")
    before = everything(other)
    with pytest.raises(InvalidInput, match=rf"^line {first_alice + 1}: owner 'alice' is a role"):
        import_lines(other, lines)
    assert everything(other) == before


def someone_elses_file() -> list[str]:
    """A small export as an attacker would hand it over: one harmless fact, a path tag
    that makes alice's secrets public, and a line that makes bob an admin."""
    records = [
        {"type": "embornal-export", "version": 1, "embedding_width": TEST_WIDTH},
        {"type": "path", "path": "/alice/secrets", "tags": {"visibility": "public"}},
        {"type": "path", "path": "/recipes"},
        {
            "type": "fact",
            "id": 1,
            "path": "/recipes",
            "content": "a harmless recipe",
            "owner": "bob",
            "created_at": NOW - DAY,
        },
        {"type": "policy", "line": "p, everyone, path:/alice/*, read, allow"},
        {"type": "policy", "line": "g, bob, admin"},
        {"type": "end", "paths": 2, "facts": 1, "policies": 2},
    ]
    return [json.dumps(r) for r in records]


def test_a_files_policies_and_path_tags_apply_only_when_asked_and_are_named(
    rich: Runtime,
) -> None:
    lines = someone_elses_file()
    _facts, policies, tags = everything(rich)
    report = import_lines(rich, lines, with_policies=False)
    assert report.mode == "merge" and report.facts_added == 1
    assert report.policies_added == [] and report.path_tags_added == []
    assert (report.policies_not_applied, report.path_tags_not_applied) == (2, 1)
    assert everything(rich)[1:] == (policies, tags)  # who reads what: unchanged
    with Memory(rich).transaction("bob") as (_conn, ctx):
        assert not ctx.access.is_admin

    report = import_lines(rich, lines, with_policies=True)
    assert report.facts_added == 0  # already there
    assert report.policies_added == ["g, bob, admin", "p, everyone, path:/alice/*, read, allow"]
    assert report.path_tags_added == ["/alice/secrets visibility=public"]
    assert (report.policies_not_applied, report.path_tags_not_applied) == (0, 0)
    with Memory(rich).transaction("bob") as (_conn, ctx):
        assert ctx.access.is_admin


def test_a_restore_without_policies_keeps_the_fresh_memorys_own(
    rich: Runtime, other: Runtime
) -> None:
    lines = export_lines(rich)
    _facts, fresh_policies, _tags = everything(other)
    report = import_lines(other, lines, with_policies=False)
    assert report.mode == "restore" and report.policies_added == []
    assert report.policies_not_applied == sum('"type":"policy"' in line for line in lines)
    assert report.path_tags_not_applied == 3  # /team's two, /empty/node's one
    counts = everything(other)
    assert counts[0] == sum('"type":"fact"' in line for line in lines)
    assert counts[1:] == (fresh_policies, [])
    # The facts kept their ids: the file's, line for line.
    ids = [json.loads(line)["id"] for line in lines if '"type":"fact"' in line]
    with other.engine.connect() as conn:
        assert list(conn.execute(select(facts.c.id).order_by(facts.c.id)).scalars()) == ids
