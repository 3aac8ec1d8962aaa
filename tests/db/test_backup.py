"""The online backup: a consistent, checked copy of a memory that is being written."""

from __future__ import annotations

import shutil
import stat
import threading
from pathlib import Path

import pytest

from app.db.backup import backup_database, check_copy
from app.db.engine import connect_file
from app.errors import Conflict, InvalidInput
from app.runtime import Runtime, open_runtime
from app.services import facts as fact_service
from app.services.facts import NewFact
from app.settings import Settings
from app.usecases.memory import Memory, backup_file
from tests.services.test_transfer import vector
from tests.test_files import held, leftover


def test_backup_while_another_thread_writes(rt: Runtime, actor, tmp_path: Path) -> None:
    writes, started_after = 300, 50
    me = actor()
    started = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(writes):
                with me.tx() as (conn, ctx):
                    item = NewFact(f"/load/{i % 7}", f"fact number {i}", {"n": str(i)})
                    fact_service.store_fact(conn, ctx, item, vector=vector(i))
                if i == started_after:
                    started.set()
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)
            started.set()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert started.wait(timeout=60)
        target = tmp_path / "copy.db"
        report = backup_database(rt.engine, target)
    finally:
        thread.join(timeout=120)
    assert not errors and not thread.is_alive()

    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.db", "home"]  # no temp left
    assert report.size_bytes == target.stat().st_size
    copy = connect_file(target)
    try:
        check_copy(copy)  # integrity_check and FTS5 integrity-check
        loaded = [
            int(n)
            for (n,) in copy.execute(
                "SELECT t.value FROM facts f JOIN fact_tags t ON t.fact_id = f.id AND t.key = 'n'"
            )
        ]
        # Each write committed alone, so a snapshot holds a prefix of them, each whole.
        assert sorted(loaded) == list(range(len(loaded)))
        assert started_after < len(loaded) <= writes
        assert report.facts == copy.execute("SELECT count(*) FROM facts").fetchone()[0]
        orphans = copy.execute(
            "SELECT count(*) FROM facts f WHERE NOT EXISTS ("
            "SELECT 1 FROM fact_tags t WHERE t.fact_id = f.id AND t.key = 'owner')"
        ).fetchone()[0]
        assert orphans == 0
        unindexed = copy.execute(
            "SELECT count(*) FROM facts WHERE embedding IS NOT NULL "
            "AND id NOT IN (SELECT fact_id FROM facts_vec)"
        ).fetchone()[0]
        assert unindexed == 0
    finally:
        copy.close()


def test_backup_refuses_to_overwrite_unless_forced(rt: Runtime, tmp_path: Path) -> None:
    target = tmp_path / "copy.db"
    target.write_text("precious")
    with pytest.raises(Conflict, match="--force"):
        backup_database(rt.engine, target)
    assert target.read_text() == "precious"
    report = backup_database(rt.engine, target, force=True)
    assert report.facts == 7 and target.stat().st_size > 0
    with pytest.raises(InvalidInput, match="live memory"):
        backup_database(rt.engine, rt.settings.database_path, force=True)


def test_a_closed_memory_is_whole_in_memory_db_alone(settings: Settings, tmp_path: Path) -> None:
    """A backup put back as memory.db had a stale memory.db-wal replayed over it (a
    malformed memory). Closing folds the WAL in and empties it even while another
    process keeps the file open (SQLite then keeps -wal): memory.db alone holds it all."""
    path = settings.database_path
    wal = Path(f"{path}-wal")
    rt = open_runtime(settings)
    other = connect_file(path)  # a command or second server with the memory open
    try:
        before = other.execute("SELECT count(*) FROM facts").fetchone()[0]
        memory = Memory(rt)
        for i in range(20):
            memory.store("default", NewFact(f"/closed/{i}", f"fact number {i} of twenty"))
        assert wal.stat().st_size > 0
        rt.close()
        assert wal.stat().st_size == 0
        alone = tmp_path / "alone.db"
        shutil.copy(path, alone)  # without its -wal and -shm
    finally:
        other.close()
    copy = connect_file(alone)
    try:
        check_copy(copy)
        assert copy.execute("SELECT count(*) FROM facts").fetchone()[0] == before + 20
    finally:
        copy.close()


def killed_backup(directory: Path, target: str, random: str = "deadbeef") -> list[Path]:
    """What a backup killed mid-copy leaves beside `target`: its locked temporary file,
    unlocked now, and the copy with SQLite's files (the -wal holding the memory)."""
    tmp = leftover(directory, target, random)
    companions = [Path(f"{tmp}-copy{suffix}") for suffix in ("", "-journal", "-wal", "-shm")]
    for path in companions:
        path.write_bytes(b"\0" * 4096)
    return [tmp, *companions]


def test_a_killed_backups_files_go_with_the_next_backup(rt: Runtime, tmp_path: Path) -> None:
    target = tmp_path / "copy.db"
    killed_backup(tmp_path, "copy.db")
    killed_backup(tmp_path, "copy.db", "k1lled_2")
    report = backup_database(rt.engine, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.db", "home"]
    assert report.facts == 7 and stat.S_IMODE(target.stat().st_mode) == 0o600


def test_a_running_backups_files_stay(rt: Runtime, tmp_path: Path) -> None:
    target = tmp_path / "copy.db"
    running = killed_backup(tmp_path, "copy.db")
    other = killed_backup(tmp_path, "other.db")
    with held(running[0]):
        backup_database(rt.engine, target)
        assert all(path.exists() for path in running)
    backup_database(rt.engine, target, force=True)  # its writer is gone now
    assert not any(path.exists() for path in running)
    assert all(path.exists() for path in other)


def test_a_backup_into_a_folder_sweeps_the_killed_ones_of_any_time(
    settings: Settings, tmp_path: Path
) -> None:
    """`memory backup /backups` names each copy by the time: a killed one's files are
    another target's, so the folder's next backup sweeps those of every such name."""
    folder = tmp_path / "backups"
    folder.mkdir()
    killed = killed_backup(folder, "memory-20261205T143000Z.db")
    running = killed_backup(folder, "memory-20261206T143000Z.db")
    others = killed_backup(folder, "notes-20261205T143000Z.db")
    with held(running[0]):
        report = backup_file(settings, folder)
    assert report.path.parent == folder and report.path.name.startswith("memory-")
    assert not any(path.exists() for path in killed)
    assert all(path.exists() for path in running + others)
