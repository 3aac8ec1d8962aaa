"""The table of app.db.faults: which driver errors are which problem, and which stay 500s.

The faults themselves are provoked for real in tests/api/test_database_faults.py,
tests/ops/test_database_restart.py and tests/ops/test_disk_full.py; this pins the
codes no test here can provoke (PostgreSQL's full disk, a crash shutdown) and the
errors that must not be mistaken for a fault.
"""

from __future__ import annotations

import psycopg
import pytest
import sqlean
from psycopg import errors as pg
from sqlalchemy.exc import DBAPIError, OperationalError, ProgrammingError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from app.db.faults import as_problem
from app.errors import InsufficientStorage, Unavailable


def sqlite_error(code: int, message: str) -> DBAPIError:
    orig = sqlean.OperationalError(message)
    orig.sqlite_errorcode = code  # type: ignore[attr-defined]
    return OperationalError("statement", {}, orig)


@pytest.mark.parametrize(
    ("error", "kind", "status", "words"),
    [
        (
            OperationalError("s", {}, pg.DiskFull("no space")),
            InsufficientStorage,
            507,
            "disk is full",
        ),
        (
            OperationalError("s", {}, pg.QueryCanceled("x")),
            Unavailable,
            503,
            "did not answer in time",
        ),
        (OperationalError("s", {}, pg.LockNotAvailable("x")), Unavailable, 503, "did not answer"),
        (OperationalError("s", {}, pg.DeadlockDetected("x")), Unavailable, 503, "concurrent"),
        (OperationalError("s", {}, pg.SerializationFailure("x")), Unavailable, 503, "concurrent"),
        (OperationalError("s", {}, pg.AdminShutdown("x")), Unavailable, 503, "cannot be reached"),
        (OperationalError("s", {}, pg.CrashShutdown("x")), Unavailable, 503, "cannot be reached"),
        (
            OperationalError("s", {}, pg.CannotConnectNow("x")),
            Unavailable,
            503,
            "cannot be reached",
        ),
        (
            OperationalError("s", {}, pg.TooManyConnections("x")),
            Unavailable,
            503,
            "cannot be reached",
        ),
        (
            OperationalError("s", {}, psycopg.OperationalError("refused")),
            Unavailable,
            503,
            "cannot be reached",
        ),
        (sqlite_error(5, "database is locked"), Unavailable, 503, "busy timeout"),
        (
            sqlite_error(517, "database is locked"),
            Unavailable,
            503,
            "busy timeout",
        ),  # BUSY_SNAPSHOT
        (sqlite_error(13, "database or disk is full"), InsufficientStorage, 507, "disk is full"),
        (sqlite_error(778, "disk I/O error"), Unavailable, 503, "I/O error"),  # IOERR_WRITE
        (PoolTimeout("QueuePool limit"), Unavailable, 503, "no database connection came free"),
    ],
)
def test_faults_are_problems(error: Exception, kind: type, status: int, words: str) -> None:
    problem = as_problem(error, pool_timeout=2.0)
    assert isinstance(problem, kind)
    assert problem.status == status and words in problem.detail
    if isinstance(problem, Unavailable):
        assert problem.retry_after is not None and problem.retry_after >= 1


@pytest.mark.parametrize(
    "error",
    [
        ProgrammingError("s", {}, psycopg.ProgrammingError("bad placeholder")),  # a bug
        OperationalError("s", {}, pg.UndefinedTable("no such table")),
        OperationalError("s", {}, pg.UniqueViolation("duplicate")),
        sqlite_error(1, "no such table: facts"),  # SQLITE_ERROR
        sqlite_error(19, "UNIQUE constraint failed"),  # SQLITE_CONSTRAINT
        ValueError("not a database error"),
    ],
)
def test_other_errors_are_not_faults(error: Exception) -> None:
    assert as_problem(error) is None
