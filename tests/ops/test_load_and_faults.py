"""Durability (SPEC "Durability") against a real `embornal serve` on 127.0.0.1.

- 8 writers and 8 readers at once: no "database is locked", no 5xx, every
  acknowledged fact there afterwards (through the API and in the file);
- `kill -9` during batch ingest, three times: after each restart the file passes
  SQLite's and FTS5's checks, facts_vec matches the embedded facts, every
  acknowledged batch is whole and every other batch whole or absent;
- `embornal memory backup` while the server takes writes: the copy is sound,
  holds every fact acknowledged before the backup started, and serves again;
- a backup put back as memory.db once the server stopped (docs/operations.md):
  the server left no WAL to be replayed over it.

Each test prints a one-line summary of its figures (see them with `pytest -s`).
Assertions are on correctness only, never on speed.
"""

from __future__ import annotations

import json
import random
import shutil
import threading
import time
from dataclasses import dataclass, field

import httpx
import pytest

from tests.ops.conftest import StartServer
from tests.ops.live import (
    POLL,
    WORDS,
    LiveServer,
    fts_counts,
    inspect_database,
    list_all,
    run_cli,
    run_load,
    tag_groups,
)

# Live servers in other processes (make test-fast leaves them out).
pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

WRITERS, READERS, FACTS_PER_WRITER = 8, 8, 40


def assert_clean_log(server: LiveServer) -> None:
    logs = server.logs()
    assert "database is locked" not in logs, server.log_tail()
    assert "Traceback" not in logs, server.first_traceback()


def test_concurrent_writers_and_readers(live_server: LiveServer) -> None:
    result = run_load(
        live_server,
        writers=WRITERS,
        readers=READERS,
        facts_per_writer=FACTS_PER_WRITER,
        tag="loadrun",
    )
    print(f"\n[ops load] {result.summary()}")

    assert result.server_errors == 0, result.statuses
    assert not result.errors, result.errors  # locked, other statuses, transport errors
    assert len(result.acknowledged) == WRITERS * FACTS_PER_WRITER
    assert result.read_latencies, "the readers got nothing done"
    assert_clean_log(live_server)

    # Every acknowledged fact, through the API ...
    with live_server.client() as client:
        assert list_all(client, under="/loadrun") == result.acknowledged
    # ... and in the file: stored, embedded, indexed by keyword and by vector.
    state = inspect_database(live_server.db_path)
    state.assert_consistent()
    for fact_id, content in result.acknowledged.items():
        assert state.facts.get(fact_id) == content, fact_id
    assert set(result.acknowledged) <= state.embedded
    assert fts_counts(live_server.db_path, ["loadrun"]) == {"loadrun": len(result.acknowledged)}


# --- kill -9 during batch ingest ---------------------------------------------

BATCH = 20
POSTERS = 4
ROUNDS = 3
ACKED_PER_ROUND = 8


def batch_tag(number: int) -> str:
    return f"b{number:04d}"


def batch_marker(number: int) -> str:
    return f"kb{number:04d}x"  # one token for FTS5


@dataclass
class BatchLog:
    """What the posting clients sent and what the server said about it."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    next_number: int = 0
    sent: dict[int, list[str]] = field(default_factory=dict)  # batch -> contents
    acked: dict[int, list[int]] = field(default_factory=dict)  # batch -> ids, from the 201
    cut_off: dict[int, str] = field(default_factory=dict)  # batch -> transport error
    refused: dict[int, str] = field(default_factory=dict)  # batch -> a non-201 answer
    in_flight: set[int] = field(default_factory=set)

    def new_batch(self, rng: random.Random) -> tuple[int, list[str]]:
        with self.lock:
            number = self.next_number
            self.next_number += 1
            contents = [
                f"kill batch {batch_marker(number)} item {k} {' '.join(rng.sample(WORDS, 3))}"
                for k in range(BATCH)
            ]
            self.sent[number] = contents
            self.in_flight.add(number)
            return number, contents


def post_batches(server: LiveServer, log: BatchLog, stop: threading.Event, seed: int) -> None:
    """POST batches of BATCH facts until stopped or the server goes away."""
    rng = random.Random(seed)
    with server.client() as client:
        while not stop.is_set():
            number, contents = log.new_batch(rng)
            body = {
                "facts": [
                    {"path": "/kill", "content": c, "tags": {"batch": batch_tag(number)}}
                    for c in contents
                ]
            }
            try:
                response = client.post("/v1/facts/batch", json=body)
            except httpx.TransportError as exc:
                with log.lock:
                    log.in_flight.discard(number)
                    log.cut_off[number] = type(exc).__name__
                return  # killed: this client is done
            with log.lock:
                log.in_flight.discard(number)
                if response.status_code == 201:
                    log.acked[number] = [fact["id"] for fact in response.json()["facts"]]
                else:
                    log.refused[number] = f"{response.status_code} {response.text[:300]}"


def verify_after_restart(server: LiveServer, log: BatchLog) -> dict[str, int]:
    """Everything the kill test promises, checked in the file and through the API."""
    state = inspect_database(server.db_path)
    state.assert_consistent()
    groups = tag_groups(server.db_path, "batch")
    keyword = fts_counts(server.db_path, [batch_marker(n) for n in log.sent])
    whole = absent = 0
    for number, contents in log.sent.items():
        ids = groups.get(batch_tag(number), set())
        # All or nothing, in the facts and in the keyword index alike.
        assert len(ids) in (0, BATCH), (number, len(ids))
        assert keyword[batch_marker(number)] == len(ids), number
        if number in log.acked:
            assert ids == set(log.acked[number]), number
        if ids:
            whole += 1
            assert sorted(state.facts[i] for i in ids) == sorted(contents), number
            assert ids <= state.embedded, number  # the model was loaded: all embedded
        else:
            absent += 1
    with server.client() as client:
        for number, acked_ids in log.acked.items():
            listed = list_all(client, tag=f"batch={batch_tag(number)}")
            assert set(listed) == set(acked_ids), number
        # The restarted server's vector index holds exactly the codes in the file (it
        # loaded facts_vec before saying ready), and each whole batch is found by meaning.
        # (Between two looks at the file: a background embedder may add codes meanwhile.)
        size = index_size(client)
        assert len(state.embedded) <= size <= len(inspect_database(server.db_path).embedded)
        for number in list(log.acked)[-3:]:
            found = client.get(
                "/v1/search",
                params={"q": log.sent[number][0], "mode": "semantic", "limit": 1, "peek": True},
            )
            assert found.status_code == 200, found.text
            assert found.json()["results"][0]["fact"]["content"] == log.sent[number][0]
    return {"whole": whole, "absent": absent}


def index_size(client: httpx.Client) -> int:
    metrics = client.get("/metrics")
    assert metrics.status_code == 200, metrics.text
    line = next(x for x in metrics.text.splitlines() if x.startswith("embornal_vector_index_size"))
    return int(float(line.split()[-1]))


def test_kill_9_during_batch_ingest(live_server: LiveServer) -> None:
    server = live_server
    log = BatchLog()
    in_flight_at_kills: set[int] = set()
    fates: dict[str, int] = {}
    for round_number in range(ROUNDS):
        stop = threading.Event()
        posters = [
            threading.Thread(
                target=post_batches, args=(server, log, stop, 10 * round_number + p), daemon=True
            )
            for p in range(POSTERS)
        ]
        for poster in posters:
            poster.start()
        target = len(log.acked) + ACKED_PER_ROUND
        deadline = time.monotonic() + 60
        # Poll until enough batches are acknowledged and some are on their way: kill then.
        while True:
            with log.lock:
                assert not log.refused, log.refused
                if len(log.acked) >= target and log.in_flight:
                    in_flight_at_kills |= log.in_flight
                    break
            assert time.monotonic() < deadline, f"only {len(log.acked)} batches acknowledged"
            assert any(p.is_alive() for p in posters), "the posting clients stopped"
            time.sleep(POLL)
        server.kill9()
        stop.set()
        for poster in posters:
            poster.join(timeout=30)
            assert not poster.is_alive()
        assert not log.refused, log.refused  # no 5xx, no "locked" while it was up
        server.start()
        fates = verify_after_restart(server, log)

    acked_facts = BATCH * len(log.acked)
    groups = tag_groups(server.db_path, "batch")
    found = sum(len(groups.get(batch_tag(n), ())) for n in log.acked)
    cut = in_flight_at_kills - set(log.acked)
    cut_whole = sum(1 for n in cut if groups.get(batch_tag(n)))
    print(
        f"\n[ops kill] {ROUNDS} x kill -9 during ingest of batches of {BATCH} "
        f"({POSTERS} clients): {len(log.acked)} batches = {acked_facts} facts acknowledged, "
        f"{found} found; {len(cut)} batches in flight at the kills: {cut_whole} whole, "
        f"{len(cut) - cut_whole} absent, 0 partial; of {len(log.sent)} batches sent "
        f"{fates['whole']} whole, {fates['absent']} absent"
    )
    assert found == acked_facts
    # The restarted server takes writes again.
    with server.client() as client:
        response = client.post("/v1/facts", json={"path": "/kill", "content": "after the kills"})
        assert response.status_code == 201, response.text
    assert "database is locked" not in server.logs()


# --- backup under write load -------------------------------------------------


@dataclass
class WriteLog:
    lock: threading.Lock = field(default_factory=threading.Lock)
    acked: dict[int, str] = field(default_factory=dict)  # id -> content
    groups: list[set[int]] = field(default_factory=list)  # the ids of each batch
    failures: list[str] = field(default_factory=list)


def keep_writing(
    server: LiveServer, log: WriteLog, stop: threading.Event, writer: int, batch: int
) -> None:
    """Store facts (one at a time, or `batch` at a time) until stopped."""
    with server.client() as client:
        n = 0
        while not stop.is_set():
            contents = [f"bkrun w{writer} n{n + k} fact" for k in range(batch)]
            n += batch
            facts = [{"path": f"/backup/w{writer}", "content": c} for c in contents]
            try:
                if batch == 1:
                    response = client.post("/v1/facts", json=facts[0])
                else:
                    response = client.post("/v1/facts/batch", json={"facts": facts})
            except httpx.HTTPError as exc:
                with log.lock:
                    log.failures.append(f"{type(exc).__name__}: {exc}")
                return
            with log.lock:
                if response.status_code != 201:
                    log.failures.append(f"{response.status_code} {response.text[:300]}")
                    return
                body = response.json()
                stored = body["facts"] if batch > 1 else [body]
                log.acked |= {fact["id"]: fact["content"] for fact in stored}
                log.groups.append({fact["id"] for fact in stored})


def test_backup_under_write_load(start_server: StartServer) -> None:
    server = start_server("none")  # the copy is what is tested; the model only costs time
    log = WriteLog()
    stop = threading.Event()
    writers = [
        threading.Thread(target=keep_writing, args=(server, log, stop, w, batch), daemon=True)
        for w, batch in enumerate((1, 1, 5, 5))
    ]
    for writer in writers:
        writer.start()
    try:
        deadline = time.monotonic() + 30
        while len(log.acked) < 200:
            assert not log.failures, log.failures
            assert time.monotonic() < deadline, f"only {len(log.acked)} facts acknowledged"
            time.sleep(POLL)
        with log.lock:
            before = dict(log.acked)  # acknowledged before the backup started
        target = server.home.parent / "backup.db"
        started = time.perf_counter()
        report = json.loads(run_cli(server.home, "none", "memory", "backup", str(target), "--json"))
        seconds = time.perf_counter() - started
        with log.lock:
            during = len(log.acked) - len(before)
    finally:
        stop.set()
        for writer in writers:
            writer.join(timeout=60)
    assert not log.failures, log.failures
    assert during > 0, "the server took no write while the backup ran"
    assert not any(target.parent.glob(f".{target.name}.*")), "a temporary file was left"

    # Restore: the copy becomes the memory.db of a new home.
    restored_home = server.home.parent / "restored"
    restored_home.mkdir()
    shutil.copy(target, restored_home / "memory.db")
    state = inspect_database(restored_home / "memory.db")
    state.assert_consistent()
    assert report["facts"] == len(state.facts)
    missing = [i for i, content in before.items() if state.facts.get(i) != content]
    assert not missing, missing[:20]
    # One snapshot: what the copy holds was acknowledged, and no batch is cut in two.
    copied = {i for i, content in state.facts.items() if content.startswith("bkrun ")}
    assert copied <= set(log.acked)
    for group in log.groups:
        assert len(group & copied) in (0, len(group)), sorted(group)

    print(
        f"\n[ops backup] backup of {report['facts']} facts in {seconds:.2f} s (CLI) under "
        f"load: {len(before)} facts acknowledged before it, all in the copy; {during} more "
        f"acknowledged while it ran, {len(copied) - len(before)} of them in the copy"
    )

    restored = start_server("none", home=restored_home)
    with restored.client() as client:
        assert list_all(client, under="/backup") == {i: state.facts[i] for i in copied}
        response = client.post("/v1/facts", json={"path": "/backup", "content": "restored"})
        assert response.status_code == 201, response.text
    assert_clean_log(server)


def test_a_backup_put_back_after_a_clean_stop_is_the_memory(start_server: StartServer) -> None:
    """The restore of docs/operations.md, in place. A server stopped by SIGTERM left
    memory.db-wal holding its last pages, and SQLite replayed it over the copy put back
    as memory.db (integrity_check: malformed); it now folds the WAL in at shutdown."""
    server = start_server("none")
    target = server.home.parent / "backup.db"
    run_cli(server.home, "none", "memory", "backup", str(target))
    with server.client() as client:
        for i in range(60):
            response = client.post("/v1/facts", json={"path": "/later", "content": f"later {i}"})
            assert response.status_code == 201, response.text
    server.stop()
    assert sorted(p.name for p in server.home.glob("memory.db*")) == ["memory.db"]
    stopped = inspect_database(server.db_path)  # memory.db alone holds every write
    assert sum(c.startswith("later ") for c in stopped.facts.values()) == 60

    shutil.copy(target, server.db_path)
    state = inspect_database(server.db_path)
    state.assert_consistent()
    assert not [c for c in state.facts.values() if c.startswith("later ")]
    assert_clean_log(server)
