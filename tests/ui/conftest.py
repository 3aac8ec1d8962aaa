"""The console over the per-test memory: an app, and browsers-as-clients signed in as
any subject (a TestClient holds its own cookies, as one browser does)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.acl.model import ACTIONS
from app.auth.tokens import issue_token
from app.main import create_app
from app.runtime import Runtime
from app.settings import Settings
from tests.api import conftest as api
from tests.conftest import FakeClock

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(html: str) -> str:
    found = CSRF.search(html)
    assert found, "no CSRF field on the page"
    return found.group(1)


class Browser:
    """One person's cookie jar on the console."""

    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.csrf = ""

    def get(self, url: str, **kwargs):
        response = self.client.get(url, follow_redirects=False, **kwargs)
        if response.status_code == 200 and "text/html" in response.headers["content-type"]:
            found = CSRF.search(response.text)
            if found:
                self.csrf = found.group(1)
        return response

    def post(self, url: str, data: dict[str, str] | None = None, *, csrf: bool = True):
        form = dict(data or {})
        if csrf:
            form["csrf"] = self.csrf
        return self.client.post(url, data=form, follow_redirects=False)


@pytest.fixture
def app(settings: Settings, rt: Runtime, clock: FakeClock) -> FastAPI:
    return create_app(settings, runtime=rt, clock=clock)


@pytest.fixture
def token(settings: Settings) -> Callable[..., str]:
    def make(subject: str, hours: float = 1.0, *, ago_hours: float = 0.0) -> str:
        now = dt.datetime.now(dt.UTC) - dt.timedelta(hours=ago_hours)
        return issue_token(settings, subject, dt.timedelta(hours=hours), now=now)

    return make


@pytest.fixture
def browser(app: FastAPI, token: Callable[..., str]) -> Iterator[Callable[..., Browser]]:
    """`browser("alice")`: a client signed in as alice; `browser()`: not signed in."""
    opened: list[TestClient] = []

    def make(subject: str | None = None) -> Browser:
        client = TestClient(app, raise_server_exceptions=True)
        client.__enter__()
        opened.append(client)
        person = Browser(client)
        if subject is not None:
            form = person.get("/ui/login")
            assert form.status_code == 200
            done = person.post("/ui/login", {"token": token(subject)})
            assert done.status_code == 303, done.text
            assert done.headers["location"] == "/ui"
            assert person.get("/ui").status_code == 200
        return person

    yield make
    for client in opened:
        client.__exit__(None, None, None)


# Policy lines added as the CLI does: the REST tests' fixture.
add_policy = api.add_policy


@pytest.fixture
def two_subjects(add_policy: Callable[..., None]) -> None:
    """alice and bob, each with every right on a subtree of their own, nothing more."""
    for who in ("alice", "bob"):
        add_policy(*(f"p, {who}, path:/{who}/*, {act}, allow" for act in ACTIONS))
