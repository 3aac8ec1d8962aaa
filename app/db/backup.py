"""A consistent copy of the live memory.db: SQLite's online backup, checked.

A backup is the database file itself, pages and indexes included: it is what to
keep (seed: "A backup must hold memory.db").
"""

from __future__ import annotations

import glob
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import sqlean
from sqlalchemy import Engine, func, select

from app.db.dialects import backend
from app.db.engine import connect_file
from app.db.faults import SQLITE_FULL
from app.db.tables import facts
from app.dirs import make_private_dir
from app.errors import EmbornalError, InvalidInput
from app.files import locked_temp, publish, sweep_stale_temps, temp_beside

# SQLite's copy is written beside the locked temporary file (TMP-copy), not in it:
# SQLite locks its files with POSIX record locks, which meet flock's on macOS and over
# NFS (SQLite would find its own copy busy). Named after the temporary file, the copy
# and SQLite's -journal, -wal and -shm beside it (the -wal can hold the whole memory)
# go with it, and after a kill the next backup to the same target sweeps them all.
COPY = "-copy"
# The target named by the temporary files of a copy that is sent, not kept (download_copy).
DOWNLOAD = "backup-download"


@dataclass(frozen=True)
class BackupReport:
    path: Path
    size_bytes: int
    facts: int
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "path": str(self.path)}


def check_copy(conn: Any) -> None:
    """Stop unless the copy is sound: SQLite's integrity check and FTS5's own.

    The rank=1 form compares the keyword index with the facts themselves; the plain
    form only checks an external-content index against itself.
    """
    problems = [row[0] for row in conn.execute("PRAGMA integrity_check").fetchall()]
    if problems != ["ok"]:
        raise EmbornalError(f"the copy failed its integrity check: {'; '.join(problems[:5])}")
    try:
        conn.execute("INSERT INTO facts_fts(facts_fts, rank) VALUES('integrity-check', 1)")
    except sqlean.DatabaseError as exc:
        raise EmbornalError(f"the copy's keyword index failed its check: {exc}") from None


def _dump_with_server_tool(engine: Engine, argv: list[str], env: dict[str, str]) -> int:
    """A database server's backup is its own dump tool's (PostgreSQL: pg_dump): run it;
    the facts the memory holds."""
    done = subprocess.run(
        argv, env={**os.environ, **env}, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["no message"])[0]
        raise EmbornalError(f"{Path(argv[0]).name} failed: {first}")
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(facts)).scalar_one())


def _write_failure(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return str(exc.strerror or exc)
    if getattr(exc, "sqlite_errorcode", 0) & 0xFF == SQLITE_FULL:
        return "the disk is full"
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def backup_database(engine: Engine, target: Path, *, force: bool = False) -> BackupReport:
    """Copy the live memory to `target` (`write_copy`), beside it under a temporary name
    and renamed over it once whole and checked."""
    live = backend(engine).database_file(engine)
    if live is not None and target.resolve() == live.resolve():
        raise InvalidInput("the backup cannot overwrite the live memory itself")
    started = time.perf_counter()
    with temp_beside(target, force=force) as tmp:
        copy = Path(f"{tmp}{COPY}")
        try:
            fact_count = write_copy(engine, copy)
            publish(copy, target)
        except (sqlean.Error, OSError) as exc:
            # The copy could not be written (a full disk is SQLITE_FULL or ENOSPC): one
            # line for the console, and nothing left under the final name or beside it.
            failure = _write_failure(exc)
            raise EmbornalError(f"the backup to {target} failed: {failure}") from None
    return BackupReport(
        path=target,
        size_bytes=target.stat().st_size,
        facts=fact_count,
        seconds=time.perf_counter() - started,
    )


@contextmanager
def download_copy(engine: Engine, folder: Path) -> Iterator[Path]:
    """`write_copy` into a hidden file in `folder` that is sent, not kept (the console's
    download): the copy (TMP-copy) of app.files' locked temporary file, removed with its
    lock when the block ends. One whose process was killed meanwhile stays until the
    next download copy into `folder`, or `sweep_download_copies(folder)`, removes it.
    `folder` is made (0700) if missing."""
    with ExitStack() as stack:
        try:
            make_private_dir(folder)
            tmp = stack.enter_context(locked_temp(folder / DOWNLOAD))
        except OSError as exc:
            raise EmbornalError(f"cannot write in {folder}: {exc.strerror or exc}") from None
        copy = Path(f"{tmp}{COPY}")
        try:
            write_copy(engine, copy)
        except (sqlean.Error, OSError) as exc:
            raise EmbornalError(f"the backup failed: {_write_failure(exc)}") from None
        yield copy


def sweep_download_copies(folder: Path) -> None:
    """Remove the download copies in `folder` whose process is gone (killed)."""
    sweep_stale_temps(folder, glob.escape(DOWNLOAD))


def write_copy(engine: Engine, path: Path) -> int:
    """A consistent copy of the live memory in the new file `path`, 0600; the facts it
    holds. On SQLite, its online backup, checked and synced.

    The copy is taken in one step (pages=-1): a stepwise backup restarts whenever
    another connection writes, and might never finish under a busy server. One step
    reads one snapshot; in WAL mode writers go on meanwhile. The copy is switched to
    a rollback journal so that it is one self-contained file. On PostgreSQL the copy
    is a pg_dump archive (custom format, for pg_restore), or it says how to take one.
    """
    # Made 0600 before SQLite (or pg_dump) opens it: either would make it 0644.
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    command = backend(engine).dump_command(engine, path)
    if command is not None:
        return _dump_with_server_tool(engine, *command)
    return _online_copy(engine, path)


def _online_copy(engine: Engine, path: Path) -> int:
    """SQLite's online backup of the memory into the empty file `path`, checked and
    synced: its facts."""
    copy = connect_file(path)
    try:
        source = engine.raw_connection()
        try:
            source.dbapi_connection.backup(copy, pages=-1)  # type: ignore[union-attr]
        finally:
            source.close()
        copy.execute("PRAGMA journal_mode=DELETE")
        check_copy(copy)
        fact_count = int(copy.execute("SELECT count(*) FROM facts").fetchone()[0])
    finally:
        copy.close()
    with path.open("rb+") as fh:
        os.fsync(fh.fileno())
    return fact_count
