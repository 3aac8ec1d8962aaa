"""Database faults as the problems a client can act on: wait and retry (503), or free
space (507). Every other database error stays what it is (a 500, logged).

A fault is read from the driver's own code, never from its message alone: SQLite's
result code (`sqlite_errorcode`, primary code in the low byte) and PostgreSQL's
SQLSTATE (`sqlstate`). psycopg's connection-level errors (refused, server closed the
connection, the connection is closed) come with no SQLSTATE at all. Before this
mapping each of these was a 500 ("The server failed to handle the request.") with a
traceback in the log: tests/api/test_database_faults.py, tests/ops/test_database_restart.py
and tests/ops/test_disk_full.py show each one now.

The detail says which kind of fault it was (a timeout, an unreachable or busy
database, a full disk) and never holds SQL, a host name or a file path.
"""

from __future__ import annotations

import logging

from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from app.errors import EmbornalError, InsufficientStorage, Unavailable

log = logging.getLogger(__name__)

# Seconds a client is told to wait (Retry-After): a busy database frees up in about
# the time of a request; one that went away takes a restart or a failover.
RETRY_BUSY = 1
RETRY_GONE = 5

# SQLite primary result codes (https://sqlite.org/rescode.html).
SQLITE_BUSY, SQLITE_LOCKED, SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN = 5, 6, 10, 13, 14

# PostgreSQL SQLSTATEs (https://www.postgresql.org/docs/current/errcodes-appendix.html).
PG_TIMEOUTS = {"57014", "55P03"}  # query_canceled (statement_timeout), lock_not_available
PG_DISK_FULL = "53100"
# deadlock_detected, serialization_failure: the database rolled this transaction back
# for another's sake; the same request again succeeds.
PG_CONFLICTS = {"40P01", "40001"}
PG_GONE = {
    "57P01",  # admin_shutdown: the server is stopping, or pg_terminate_backend
    "57P02",  # crash_shutdown
    "57P03",  # cannot_connect_now: starting up, shutting down, in recovery
    "53300",  # too_many_connections
}

TIMED_OUT = "The database did not answer in time: {what}. Try again shortly."
GONE = "The database is unavailable right now (it cannot be reached). Try again shortly."
BUSY = "The database is busy: {what}. Try again shortly."
FULL = "The database's disk is full: nothing was written. Free space and try again."


def as_problem(exc: BaseException, *, pool_timeout: float | None = None) -> EmbornalError | None:
    """The problem a database fault is to a client, or None when `exc` is not one."""
    if isinstance(exc, PoolTimeout):
        waited = f" within {pool_timeout:g} s" if pool_timeout else ""
        return Unavailable(
            BUSY.format(what=f"no database connection came free{waited}"),
            retry_after=RETRY_BUSY,
        )
    if not isinstance(exc, DBAPIError):
        return None
    orig = exc.orig
    code = getattr(orig, "sqlite_errorcode", None)
    if isinstance(code, int):
        return _sqlite_fault(code & 0xFF)
    if type(orig).__module__.partition(".")[0] == "psycopg":
        return _postgres_fault(getattr(orig, "sqlstate", None), exc)
    if exc.connection_invalidated:
        return Unavailable(GONE, retry_after=RETRY_GONE)
    return None


def _sqlite_fault(primary: int) -> EmbornalError | None:
    if primary in (SQLITE_BUSY, SQLITE_LOCKED):
        # Past the busy timeout (and this process's writer queue): another process
        # holds the write lock, or a checkpoint does.
        return Unavailable(
            BUSY.format(what="another writer held the lock past the busy timeout"),
            retry_after=RETRY_BUSY,
        )
    if primary == SQLITE_FULL:
        return InsufficientStorage(FULL)
    if primary in (SQLITE_IOERR, SQLITE_CANTOPEN):
        return Unavailable(
            "The database file cannot be read or written right now (an I/O error). "
            "Try again shortly.",
            retry_after=RETRY_GONE,
        )
    return None


def _postgres_fault(sqlstate: str | None, exc: DBAPIError) -> EmbornalError | None:
    if sqlstate in PG_TIMEOUTS:
        return Unavailable(
            TIMED_OUT.format(what="a statement ran past its limit (database.statement_timeout_ms)"),
            retry_after=RETRY_BUSY,
        )
    if sqlstate == PG_DISK_FULL:
        return InsufficientStorage(FULL)
    if sqlstate in PG_CONFLICTS:
        return Unavailable(
            BUSY.format(what="a concurrent request held what this one needed"),
            retry_after=RETRY_BUSY,
        )
    if sqlstate in PG_GONE or (sqlstate is not None and sqlstate.startswith("08")):
        return Unavailable(GONE, retry_after=RETRY_GONE)  # class 08: connection_exception
    # No SQLSTATE: psycopg's own connection errors (refused, closed, lost mid-query).
    # Its client-side errors without one (a bad placeholder) are bugs: they stay 500s.
    if sqlstate is None and (
        exc.connection_invalidated or type(exc.orig).__name__ in _PSYCOPG_CONNECTION_ERRORS
    ):
        return Unavailable(GONE, retry_after=RETRY_GONE)
    return None


# undefined_table, undefined_column, undefined_object (a type), undefined_function (an
# operator): what a statement meets where a restore left out a part of the schema.
PG_UNDEFINED = {"42P01", "42703", "42704", "42883"}


def names_a_missing_object(exc: BaseException) -> bool:
    """Whether the database refused a statement for naming something it does not hold
    (app.db.engine then asks what of the schema is missing)."""
    orig = getattr(exc, "orig", None)
    return type(orig).__module__.partition(".")[0] == "psycopg" and (
        getattr(orig, "sqlstate", None) in PG_UNDEFINED
    )


# psycopg's errors that carry no SQLSTATE and mean the connection is unusable.
_PSYCOPG_CONNECTION_ERRORS = {"OperationalError", "InterfaceError", "ConnectionTimeout"}


def log_fault(exc: BaseException, problem: EmbornalError) -> None:
    """One line for the operator: the driver's own first line, which names no password."""
    orig = getattr(exc, "orig", None) or exc
    first = (str(orig).strip().splitlines() or [type(orig).__name__])[0]
    log.warning("database fault (%s %s): %s", problem.status, type(orig).__name__, first)
