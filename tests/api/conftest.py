"""An app over the per-test memory of tests/conftest.py, a client, and tokens for any subject."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from functools import cache

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.auth.tokens import issue_token
from app.db.tables import facts
from app.main import create_app
from app.runtime import Runtime
from app.services import policies as policy_service
from app.settings import Settings
from tests.conftest import BACKENDS, Actor, FakeClock, both_backends

Auth = Callable[[str], dict[str, str]]

# The API suite runs on both backends.
backend = pytest.fixture(scope="module", params=BACKENDS)(both_backends)


@pytest.fixture
def app(settings: Settings, rt: Runtime, clock: FakeClock) -> FastAPI:
    return create_app(settings, runtime=rt, clock=clock)


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    # raise_server_exceptions=False: a 500 is checked as the client sees it.
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def auth(settings: Settings) -> Auth:
    """`auth("alice")` -> the Authorization header of a token for alice."""

    @cache
    def headers(subject: str) -> dict[str, str]:
        token = issue_token(settings, subject, dt.timedelta(hours=1))
        return {"Authorization": f"Bearer {token}"}

    return headers


@pytest.fixture
def add_policy(actor: Callable[[str], Actor]) -> Callable[..., None]:
    """Add policy lines as the CLI does (subject default, the policy service)."""

    def add(*lines: str) -> None:
        with actor("default").tx() as (conn, ctx):
            for line in lines:
                policy_service.add_policy(conn, ctx, line)

    return add


@pytest.fixture
def fact_count(rt: Runtime) -> Callable[[], int]:
    """Every row of facts, whoever may read it: to prove a refused request wrote nothing."""

    def count() -> int:
        with rt.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(facts)).scalar_one())

    return count


def assert_problem(response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    for key in ("type", "title", "status", "detail"):
        assert key in body, body
    assert body["status"] == status
    assert isinstance(body["detail"], str) and body["detail"]
    return body
