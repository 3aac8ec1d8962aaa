"""make_engine(): the one place that knows how embornal talks to its database.

The SQLite file is the default; a PostgreSQL URL (database.url) is the other
backend. Everything below about sqlean, pragmas and BEGIN IMMEDIATE is SQLite's;
PostgreSQL's part is at the end (_postgres_engine).

CPython's own sqlite3 may be built without extension loading (it is on the
machines this was written on), and sqlite-vec is an extension. sqlean.py bundles
a SQLite with extension loading, FTS5 and math functions, on every platform we
ship to, so the engine always uses it as its DB-API module.

Transactions: the driver is put in autocommit mode and the `begin` event emits
BEGIN itself. A write transaction says BEGIN IMMEDIATE, taking the write lock up
front: concurrent writers then wait in SQLite's busy handler (busy_timeout) and
queue, instead of failing with "database is locked" when a deferred read lock
cannot be upgraded.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import math
import os
import stat
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlean
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from app.db import faults
from app.db.dialects import backend
from app.dirs import DATABASE_COMPANIONS, make_private_dir
from app.errors import ConfigError, Unavailable

log = logging.getLogger(__name__)

WRITE = "IMMEDIATE"
READ = "DEFERRED"
# The longest a PostgreSQL request waits for a pooled connection or a new one.
MAX_WAIT_SECONDS = 10.0

# One queue per engine for this process's writers. SQLite's busy handler polls with
# sleeps of up to 100 ms, so a waiting writer loses the lock again and again to
# newcomers (seconds of tail latency under load); a thread lock hands it on at once.
_writer_queues: weakref.WeakKeyDictionary[Engine, tuple[threading.RLock, float]] = (
    weakref.WeakKeyDictionary()
)
# (read, write) execution options of each engine's transactions, set by its backend.
_modes: weakref.WeakKeyDictionary[Engine, tuple[dict[str, Any], dict[str, Any]]] = (
    weakref.WeakKeyDictionary()
)
# Engines whose read transactions end with COMMIT (PostgreSQL: see read_transaction).
_commit_reads: weakref.WeakSet[Engine] = weakref.WeakSet()


# The pool hands out the connection returned last. A search reads on one connection and
# writes its recalls on another, and a first-in-first-out pool rotates through every
# idle one: each read then came to a connection that had not made the writes since its
# last use, and SQLite empties such a connection's page cache. Handing back the one used
# last keeps it warm; the others wait idle. bench.search_profile at 10k facts, two runs
# alternated with the pool before: hybrid over the query's embedding 10.1, 10.0 -> 8.4,
# 7.6 ms p50 (docs/benchmarks.md, 2026-12-07). PostgreSQL at 100k measured level (three
# pairs); it pools alike.
POOL_USE_LIFO = True


def make_engine(
    path: Path | str | URL,
    *,
    busy_timeout_ms: int = 30_000,
    cache_size_mb: int = 64,
    pool_size: int = 8,
    statement_timeout_ms: int = 30_000,
) -> Engine:
    """Make the engine for the memory file at `path` (created with its directory), or,
    given a PostgreSQL URL, for that database."""
    if isinstance(path, URL):
        return _postgres_engine(
            path, pool_size=pool_size, statement_timeout_ms=statement_timeout_ms
        )
    if str(path) != ":memory:":
        make_private_dir(Path(path).parent)
        _private_files(Path(path))
    engine = create_engine(
        f"sqlite:///{path}",
        module=sqlean,
        pool_size=pool_size,
        max_overflow=4 * pool_size,
        pool_timeout=busy_timeout_ms / 1000,
        pool_use_lifo=POOL_USE_LIFO,
        connect_args={"check_same_thread": False, "timeout": busy_timeout_ms / 1000},
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        set_up_connection(dbapi_conn, busy_timeout_ms=busy_timeout_ms, cache_size_mb=cache_size_mb)

    _writer_queues[engine] = (threading.RLock(), busy_timeout_ms / 1000)
    _modes[engine] = ({"sqlite_begin": READ}, {"sqlite_begin": WRITE})

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", READ)
        conn.exec_driver_sql(f"BEGIN {mode}")

    return engine


@functools.cache
def _vec0_path() -> str:
    """sqlite_vec.loadable_path(), without importing the package: its __init__ imports
    numpy for helpers we never use, ~0.1-0.2 s of every CLI command's start."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or spec.origin is None:
        raise ImportError("sqlite-vec is not installed")
    return os.path.normpath(os.path.join(os.path.dirname(spec.origin), "vec0"))


# The part of a memory file read through a memory map (1 GiB: a memory of about 350k
# facts whole; the rest of a larger one is read as before).
MMAP_BYTES = 1 << 30


def set_up_connection(
    dbapi_conn: Any, *, busy_timeout_ms: int = 30_000, cache_size_mb: int = 64
) -> None:
    """What every connection to a memory file gets: sqlite-vec, and the pragmas."""
    dbapi_conn.isolation_level = None  # BEGIN is ours to emit, see _on_begin
    dbapi_conn.enable_load_extension(True)
    try:
        dbapi_conn.load_extension(_vec0_path())
    finally:
        dbapi_conn.enable_load_extension(False)
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")  # durable across process crashes in WAL mode
    cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    cur.execute("PRAGMA foreign_keys=ON")
    # vec0 inserts slow down 3x with the 2 MB default page cache (NOTES.md).
    cur.execute(f"PRAGMA cache_size=-{int(cache_size_mb) * 1024}")
    cur.execute("PRAGMA temp_store=MEMORY")
    # Reads through a memory map of the file (writes still go through SQLite's own
    # I/O): a page another connection or an earlier search read is not copied again.
    # Hybrid search at 10k facts, bench.search_profile: the keyword half 5.7 -> 5.1 ms.
    cur.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
    cur.close()


def connect_file(path: Path | str) -> Any:
    """A bare DB-API connection to a memory file, set up as the engine's are: for
    work that needs the driver itself, such as the target of an online backup."""
    conn = sqlean.connect(str(path), isolation_level=None, check_same_thread=False)
    set_up_connection(conn)
    return conn


def close_engine(engine: Engine) -> None:
    """Close the engine's pooled connections, the database's log folded into it first
    (its backend's fold_log: on SQLite, the WAL into memory.db)."""
    backend(engine).fold_log(engine)
    engine.dispose()


def _postgres_engine(url: URL, *, pool_size: int, statement_timeout_ms: int) -> Engine:
    """PostgreSQL: MVCC, so no writer queue and no BEGIN of our own.

    Writes run at READ COMMITTED, the server's default: every rule that must hold under
    concurrent writers is a constraint or a single atomic UPDATE (the unique
    supersedes_id; recall's UPDATE that reads the row it writes), and PostgreSQL
    re-checks both against the newest committed row. Reads take a REPEATABLE READ
    snapshot, as SQLite's deferred transaction gives one: a page and its hydration see
    one state. The statement timeout is the server's to enforce (an `options` startup
    parameter), so a runaway query cannot hold a pool connection forever.
    """
    options = f"-c statement_timeout={int(statement_timeout_ms)}"
    # A request never waits without bound: for a connection from the pool (more
    # requests than pool_size + overflow queue, then 503), for a server to accept one
    # (a stopped or unreachable server fails at once or within connect_timeout), or for
    # a statement (the server's statement_timeout). Each bound is the statement
    # timeout, capped so a request fails within seconds when the server is gone.
    wait = min(statement_timeout_ms / 1000, MAX_WAIT_SECONDS) or MAX_WAIT_SECONDS
    engine = create_engine(
        url,
        pool_size=pool_size,
        max_overflow=2 * pool_size,
        pool_timeout=wait,
        pool_use_lifo=POOL_USE_LIFO,
        # A replica outlives database restarts and failovers: test a pooled connection
        # before handing it out rather than failing the request that draws it.
        pool_pre_ping=True,
        connect_args={
            "options": options,
            "application_name": "embornal",
            "connect_timeout": max(1, math.ceil(wait)),
            # A server that vanishes without closing the connection (a host down, a
            # partition) sends no error and enforces no statement timeout: TCP keepalive
            # probes find it within wait + 3 s. libpq ignores them on a unix socket.
            "keepalives": 1,
            "keepalives_idle": max(1, math.ceil(wait)),
            "keepalives_interval": 1,
            "keepalives_count": 3,
        },
    )
    _modes[engine] = ({"isolation_level": "REPEATABLE READ"}, {})
    _commit_reads.add(engine)
    return engine


DATABASE_FILE_MODE = 0o600
# The first 16 bytes of every SQLite database file (sqlite.org/fileformat.html).
SQLITE_HEADER = b"SQLite format 3\x00"


def _private_files(path: Path) -> None:
    """memory.db and its -wal/-shm are for their owner alone (SPEC "Files").

    SQLite creates a new database 0644 (less the umask), and its -wal and -shm
    with the mode of the database file. So the file is made here first, empty
    (an empty file is a valid empty database) and 0600, and SQLite's companions
    follow it. A database from an older build, or copied in with looser modes, is
    tightened here, at the one place that opens the file, with one log line.
    """
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, DATABASE_FILE_MODE))
        return  # new: 0600 already, and no companions yet
    except FileExistsError:
        pass
    _refuse_unless_database(path)
    tightened = []
    for file in (path, *(Path(f"{path}{suffix}") for suffix in DATABASE_COMPANIONS)):
        try:
            st = file.stat()
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISREG(st.st_mode) and mode & 0o077:
                file.chmod(mode & ~0o077)
                tightened.append(f"{file.name} (was {mode:04o})")
        except FileNotFoundError:
            continue  # no -wal or -shm: the last connection removed them
    if tightened:
        log.warning("made %s readable by its owner only: %s", path.parent, ", ".join(tightened))


def _refuse_unless_database(path: Path) -> None:
    """Stop (ConfigError) when `path` names something that is not a memory file, before
    its mode is touched: database.path set to /tmp made /tmp 0700, and set to a text file
    made it 0600, then failed inside SQLite with a traceback. An empty file is a new
    database (SQLite writes its header with the first table)."""
    try:
        st = path.stat()
        if stat.S_ISDIR(st.st_mode):
            problem = "is a directory, not a memory file"
        elif not stat.S_ISREG(st.st_mode):
            problem = "is not a regular file"
        elif st.st_size == 0:
            return
        else:
            with path.open("rb") as fh:
                if fh.read(len(SQLITE_HEADER)) == SQLITE_HEADER:
                    return
            problem = "is not a SQLite database"
    except FileNotFoundError:
        return  # a dangling link: SQLite makes the file it names
    except OSError as exc:
        problem = f"cannot be read: {exc.strerror}"
    raise ConfigError(f"database.path: {path} {problem}")


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """A write transaction; commits on success. On SQLite it holds the write lock from
    its first statement, queued behind this process's other writers."""
    queue, timeout = _writer_queues.get(engine, (None, 0.0))
    # Past the busy timeout, BEGIN IMMEDIATE waits (and fails) as it would without the queue.
    queued = queue is not None and queue.acquire(timeout=timeout)
    try:
        with faults_as_problems(engine), engine.connect() as conn:
            conn.execution_options(**_modes.get(engine, ({}, {}))[1])
            with conn.begin():
                yield conn
    finally:
        if queued:
            queue.release()  # type: ignore[union-attr]


@contextmanager
def read_transaction(engine: Engine) -> Iterator[Connection]:
    """A read snapshot; rolled back at the end (it has nothing to keep)."""
    with faults_as_problems(engine), engine.connect() as conn:
        conn.execution_options(**_modes.get(engine, ({}, {}))[0])
        with conn.begin() as tx:
            yield conn
            if engine in _commit_reads:
                # psycopg forgets every statement it prepared on a ROLLBACK (one might
                # have been prepared in the transaction undone); a read-only transaction's
                # COMMIT ends it the same way and keeps them.
                tx.commit()
            else:
                tx.rollback()


@contextmanager
def faults_as_problems(engine: Engine) -> Iterator[None]:
    """Turn a database fault inside the block into the problem a client can act on
    (app.db.faults: a 503 with Retry-After, a 507); other errors pass unchanged.

    Every transaction runs under this, so no front end sees a driver's exception for
    a database that is gone, busy, slow or out of disk. The connection that failed is
    invalidated by SQLAlchemy when the driver says it is dead, and pre-ping replaces
    the others on their next checkout: the process recovers with the database.
    """
    try:
        yield
    except (DBAPIError, PoolTimeout) as exc:
        timeout = getattr(engine.pool, "timeout", None)
        problem = faults.as_problem(exc, pool_timeout=timeout() if callable(timeout) else None)
        if problem is None and faults.names_a_missing_object(exc):
            problem = _vectors_missing(engine)
        if problem is None:
            raise
        faults.log_fault(exc, problem)
        raise problem from None


def _vectors_missing(engine: Engine) -> Unavailable | None:
    """The 503 of a statement that failed on a part of the vectors' schema the database
    lacks (a restore without pgvector, or one that skipped facts_vec), or None when no
    such part is missing. Asked only after a failure: a request that succeeds pays
    nothing, and the memory follows the owner's repair without a restart."""
    try:
        with engine.connect() as conn:  # the failed transaction is over: a fresh one
            missing = backend(engine).vectors.missing(conn)
    except (DBAPIError, PoolTimeout):
        return None  # the statement's own error says more
    if missing is None or missing.usable:
        return None
    return Unavailable(missing.detail)
