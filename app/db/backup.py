"""A consistent copy of the live memory.db: SQLite's online backup, checked.

A backup is the database file itself, pages and indexes included: it is what to
keep (seed: "A backup must hold memory.db").
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import sqlean
from sqlalchemy import Engine, func, select

from app.db.dialects import backend
from app.db.engine import connect_file
from app.db.faults import SQLITE_FULL
from app.db.tables import facts
from app.errors import EmbornalError, InvalidInput
from app.files import publish, temp_beside


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


def _dump_with_server_tool(engine: Engine, target: Path, *, force: bool) -> BackupReport | None:
    """A database server's backup is its own dump tool's (PostgreSQL: pg_dump), run
    into a private temporary file and renamed over `target` once it succeeded."""
    tmp = temp_beside(target, force=force)
    try:
        command = backend(engine).dump_command(engine, tmp)
        if command is None:
            tmp.unlink()
            return None
        argv, env = command
        started = time.perf_counter()
        done = subprocess.run(
            argv, env={**os.environ, **env}, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["no message"])[0]
            raise EmbornalError(f"{Path(argv[0]).name} failed: {first}")
        with engine.connect() as conn:
            fact_count = conn.execute(select(func.count()).select_from(facts)).scalar_one()
        publish(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return BackupReport(
        path=target,
        size_bytes=target.stat().st_size,
        facts=int(fact_count),
        seconds=time.perf_counter() - started,
    )


def _write_failure(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return str(exc.strerror or exc)
    if getattr(exc, "sqlite_errorcode", 0) & 0xFF == SQLITE_FULL:
        return "the disk is full"
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def backup_database(engine: Engine, target: Path, *, force: bool = False) -> BackupReport:
    """Copy the live memory to `target` with SQLite's online backup, then check the copy.

    The copy is taken in one step (pages=-1): a stepwise backup restarts whenever
    another connection writes, and might never finish under a busy server. One step
    reads one snapshot; in WAL mode writers go on meanwhile. The copy is switched to
    a rollback journal so that it is one self-contained file. On PostgreSQL the copy
    is a pg_dump archive (custom format, for pg_restore), or it says how to take one.
    """
    dumped = _dump_with_server_tool(engine, target, force=force)
    if dumped is not None:
        return dumped
    live = engine.url.database
    if live and live != ":memory:" and target.resolve() == Path(live).resolve():
        raise InvalidInput("the backup cannot overwrite the live memory itself")
    started = time.perf_counter()
    tmp = temp_beside(target, force=force)
    try:
        copy = connect_file(tmp)
        try:
            source = engine.raw_connection()
            try:
                source.dbapi_connection.backup(copy, pages=-1)  # type: ignore[union-attr]
            finally:
                source.close()
            copy.execute("PRAGMA journal_mode=DELETE")
            check_copy(copy)
            fact_count = copy.execute("SELECT count(*) FROM facts").fetchone()[0]
        finally:
            copy.close()
        with tmp.open("rb+") as fh:
            os.fsync(fh.fileno())
        publish(tmp, target)
    except BaseException as exc:
        for leftover in (tmp, Path(f"{tmp}-journal"), Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            leftover.unlink(missing_ok=True)
        if isinstance(exc, sqlean.Error | OSError):
            # The copy could not be written (a full disk is SQLITE_FULL or ENOSPC): one
            # line for the console, and nothing left under the final name or beside it.
            raise EmbornalError(f"the backup to {target} failed: {_write_failure(exc)}") from None
        raise
    return BackupReport(
        path=target,
        size_bytes=target.stat().st_size,
        facts=int(fact_count),
        seconds=time.perf_counter() - started,
    )
