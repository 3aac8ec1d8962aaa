"""Annotated dependencies: a route's signature says what it needs.

A route opens its transaction itself, through `DbDep`, inside the one worker
thread that runs it. It must not come from a yield-dependency: FastAPI enters
such a dependency, runs the route and leaves it in three separate threadpool
jobs, so a request would hold its connection (and, writing, SQLite's one write
lock) while it waits for a free thread. Under load every thread then waits on a
connection or the lock held by requests that wait for a thread: measured with
200 concurrent recalls, 156 failed with "database is locked"; 240 of 300
concurrent listings timed out on the pool. Done in one thread, none failed.

Writes (and recalls, which write) take BEGIN IMMEDIATE; reads a snapshot. The
transaction commits before the route returns, so a client never sees a 201 for
a write that did not commit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import Connection

from app.auth.tokens import UNAUTHORIZED_MESSAGE, TokenVerifier
from app.db.engine import read_transaction, write_transaction
from app.errors import Unauthorized
from app.runtime import Runtime
from app.services.context import Context

Clock = Callable[[], float]

# auto_error=False: a missing header is our 401 problem, not FastAPI's own error.
_bearer = HTTPBearer(auto_error=False, description="A JWT whose `sub` is the subject")


def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


def get_clock(request: Request) -> Clock:
    clock: Clock = getattr(request.app.state, "clock", None) or time.time
    return clock


def get_subject(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    """The token's subject; every failure is the same 401 (the verifier logs which check)."""
    if credentials is None:
        raise Unauthorized(UNAUTHORIZED_MESSAGE)
    verifier: TokenVerifier = request.app.state.verifier
    return verifier.verify(credentials.credentials)


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
ClockDep = Annotated[Clock, Depends(get_clock)]
SubjectDep = Annotated[str, Depends(get_subject)]


class Db:
    """The authenticated subject's way into the memory for one request."""

    def __init__(self, rt: Runtime, subject: str, clock: Clock) -> None:
        self.rt, self.subject, self.clock = rt, subject, clock

    def _context(self, conn: Connection) -> Context:
        # Built per transaction: a policy change shows on the very next request.
        return replace(self.rt.context(conn, self.subject), clock=self.clock)

    @contextmanager
    def reading(self) -> Iterator[tuple[Connection, Context]]:
        with read_transaction(self.rt.engine) as conn:
            yield conn, self._context(conn)

    @contextmanager
    def writing(self) -> Iterator[tuple[Connection, Context]]:
        with write_transaction(self.rt.engine) as conn:
            yield conn, self._context(conn)


def get_db(subject: SubjectDep, rt: RuntimeDep, clock: ClockDep) -> Db:
    return Db(rt, subject, clock)


DbDep = Annotated[Db, Depends(get_db)]
