"""Moving a memory from SQLite to PostgreSQL: export from one, import into the other.

The documented migration path (docs/postgresql.md, "Moving a memory"). After the
move the PostgreSQL memory must export the very same lines (facts with their ids,
history, tags, path tags, policies, embeddings), find the same facts by keyword for
a fixed set of queries, for a subject with full access and one under a policy, and
agree with SQLite on the semantic top 10.
"""

from __future__ import annotations

import base64
import io
import json
import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from app.embeddings.fake import FakeEmbedder
from app.runtime import Runtime, open_runtime
from app.services.facts import NewFact
from app.usecases.memory import Memory, SearchRequest
from tests.conftest import TEST_WIDTH, FakeClock, make_settings

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
    "deploy",
    "rollback",
    "incident",
    "database",
    "migration",
    "cache",
    "latency",
    "budget",
    "quarterly",
    "review",
    "kitten",
    "garden",
    "running",
    "runner",
    "ran",
    "invoice",
    "customer",
    "ticket",
    "release",
]
# Each one matches fewer facts than a page of 100, so the result sets must be equal
# exactly (the two backends rank by different formulas: bm25 and ts_rank).
QUERIES = [
    "OPS-4711",
    "ops 4711",
    "kitten garden",
    "running kitten",  # a stem: runs, running (Snowball and porter agree on "run")
    "quarterly invoice",
    "zulu OPS-4711",  # words that rarely meet: the relaxed OR where no fact holds both
    "incident rollback database",
    "nothing-matches-this",
    "the",
    "customer ticket release",
]
ALICE_POLICIES = (
    "p, alice, path:/team/*, read, allow",
    "p, alice, tag:secret=yes, read, deny",
)


@pytest.fixture(scope="module")
def backend() -> str:
    return "sqlite"  # the source; the target is the session's PostgreSQL


def fill(memory: Memory, clock: FakeClock) -> None:
    rng = random.Random(7)
    for line in ALICE_POLICIES:
        memory.add_policy("default", line)
    memory.set_path_tags("default", "/team", {"visibility": "internal"})
    for i in range(240):
        words = rng.sample(WORDS, 6)
        if i % 40 == 3:
            words.append("OPS-4711")
        tags = {"secret": "yes"} if i % 17 == 0 else {}
        place = f"/team/{WORDS[i % 5]}" if i % 3 else f"/other/{WORDS[i % 4]}"
        memory.store("default", NewFact(place, " ".join(words), tags))
        clock.advance(seconds=61)
    first = memory.store("default", NewFact("/team/log", "the kitten sleeps in the garden"))
    clock.advance(days=1)
    memory.store(
        "default", NewFact("/team/log", "the kitten runs in the garden", supersedes_id=first.id)
    )
    gone = memory.store("default", NewFact("/team/log", "kitten garden rumour"))
    memory.delete("default", gone.id)
    for _ in range(3):
        memory.search("default", SearchRequest(q="quarterly invoice", mode="keyword"))


def export(memory: Memory) -> list[str]:
    out = io.StringIO()
    memory.export("default", out, with_embeddings=True)
    return out.getvalue().splitlines()


def hits(memory: Memory, subject: str, q: str, mode: str, limit: int = 100) -> list[int]:
    found = memory.search(subject, SearchRequest(q=q, mode=mode, limit=limit, peek=True))  # type: ignore[arg-type]
    return [r.fact.id for r in found.results]


@pytest.fixture(scope="module")
def moved(
    migrated_template: Path, postgres, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Memory, Memory]]:
    home = tmp_path_factory.mktemp("from-sqlite")
    shutil.copy(migrated_template, home / "memory.db")
    source_rt = open_runtime(make_settings(home))
    url = postgres.new_database()
    target_rt: Runtime = open_runtime(
        make_settings(
            tmp_path_factory.mktemp("to-pg"),
            database={"url": url.render_as_string(hide_password=False)},
        )
    )
    for rt in (source_rt, target_rt):
        rt.embedder = FakeEmbedder(TEST_WIDTH)
    clock = FakeClock()
    source, target = Memory(source_rt, clock=clock), Memory(target_rt, clock=clock)
    fill(source, clock)
    report = target.import_lines("default", export(source), with_policies=True)
    assert report.mode == "restore"
    yield source, target
    source_rt.close()
    target_rt.close()
    postgres.drop_database(url)


def comparable(lines: list[str]) -> list[dict]:
    """The export's records; the nodes every migration makes (/ and /memory) keep the
    earlier of the two memories' creation times on import, so those two are left out."""
    records = [json.loads(line) for line in lines]
    for record in records:
        if record["type"] == "path" and record["path"] in ("/", "/memory"):
            del record["created_at"]
    return records


def at_half_precision(records: list[dict]) -> list[dict]:
    """The records with each vector as PostgreSQL keeps it (halfvec, migration 0011):
    every float rounded to the nearest IEEE half."""
    for record in records:
        if record.get("embedding"):
            vector = np.frombuffer(base64.b64decode(record["embedding"]), "<f4")
            halves = vector.astype("<f2").astype("<f4")
            record["embedding"] = base64.b64encode(halves.tobytes()).decode()
    return records


def test_the_moved_memory_exports_the_same_lines(moved: tuple[Memory, Memory]) -> None:
    source, target = moved
    moved_lines, source_lines = comparable(export(target)), comparable(export(source))
    assert sum("embedding" in r and r["embedding"] is not None for r in source_lines) > 0
    assert moved_lines == at_half_precision(source_lines)


@pytest.mark.parametrize("subject", ["default", "alice"])
def test_keyword_search_finds_the_same_facts(moved: tuple[Memory, Memory], subject: str) -> None:
    source, target = moved
    for q in QUERIES:
        want, got = hits(source, subject, q, "keyword"), hits(target, subject, q, "keyword")
        assert len(want) < 100, f"{q!r} fills a page: the sets would depend on the ranking"
        assert sorted(got) == sorted(want), q
    # The ticket id is found as a phrase on both, by the words it is cut into.
    assert hits(target, "default", "OPS-4711", "keyword")


@pytest.mark.parametrize("subject", ["default", "alice"])
def test_semantic_top_ten_agrees(moved: tuple[Memory, Memory], subject: str) -> None:
    source, target = moved
    overlaps = []
    for q in [*QUERIES, "deploy cache latency", "golf hotel india", "review budget"]:
        want, got = (
            hits(source, subject, q, "semantic", 10),
            hits(target, subject, q, "semantic", 10),
        )
        assert len(got) == len(want) == 10
        overlaps.append(len(set(want) & set(got)) / 10)
    assert sum(overlaps) / len(overlaps) >= 0.9, overlaps
