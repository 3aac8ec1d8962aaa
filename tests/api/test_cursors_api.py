"""Pagination cursors are opaque and unforgeable: a cursor the server did not make,
in any spelling, is a 422 problem naming `cursor`, never a 500 and never a page."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from app import b64url
from app.db.tables import meta
from app.main import create_app
from app.runtime import Runtime, open_runtime
from app.services.facts import _CURSOR_CONTEXT, CURSOR_KEY
from app.settings import Settings
from tests.api.conftest import Auth, assert_problem

PAGE = {"limit": 2, "under": "/memory"}  # seven public /memory facts: four pages


def _cursor(client: TestClient, auth: Auth, sort: str = "created") -> str:
    body = client.get("/v1/facts", params={**PAGE, "sort": sort}, headers=auth("default")).json()
    assert body["next_cursor"], body
    return body["next_cursor"]


def _listing(client: TestClient, auth: Auth, cursor: str, sort: str = "created"):
    params = {**PAGE, "sort": sort, "cursor": cursor}
    return client.get("/v1/facts", params=params, headers=auth("default"))


def _refused(response) -> None:
    problem = assert_problem(response, 422)
    assert problem["errors"][0]["loc"] == ["query", "cursor"], problem
    assert "Traceback" not in response.text and "SELECT" not in response.text


def _signed(key: bytes, data: object) -> str:
    """A cursor as the server would sign it, for payloads the server would never write."""
    payload = json.dumps(data).encode()
    mac = hmac.new(key, _CURSOR_CONTEXT + payload, hashlib.sha256).digest()
    return f"{b64url.encode(payload)}.{b64url.encode(mac)}"


def _key(rt: Runtime) -> bytes:
    with rt.engine.connect() as conn:
        return bytes.fromhex(
            conn.execute(select(meta.c.value).where(meta.c.key == CURSOR_KEY)).scalar_one()
        )


@pytest.mark.parametrize("sort", ["created", "strength"])
def test_a_real_cursor_pages_on_and_does_not_fit_the_other_sort(
    client: TestClient, auth: Auth, sort: str
) -> None:
    cursor = _cursor(client, auth, sort)
    assert _listing(client, auth, cursor, sort).status_code == 200
    other = "strength" if sort == "created" else "created"
    _refused(_listing(client, auth, cursor, other))


# What an attacker wrote by hand against the old, unsigned cursors (base64 of JSON).
UNSIGNED = [
    {"sort": "created", "id": 10**30},
    {"sort": "created", "id": 2**63},
    {"sort": "created", "id": 1e400},
    {"sort": "strength", "id": 1, "key": 1e400, "now": 1},
    {"sort": "strength", "id": 2**70, "key": 0.5, "now": 1},
]


@pytest.mark.parametrize("data", UNSIGNED)
def test_a_hand_made_cursor_is_422(client: TestClient, auth: Auth, data: dict) -> None:
    raw = json.dumps(data).encode()
    forged = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    _refused(_listing(client, auth, forged, data["sort"]))
    # Signed with a key of its own: still not ours.
    _refused(_listing(client, auth, _signed(secrets.token_bytes(32), data), data["sort"]))


@pytest.mark.parametrize(
    "data",
    [
        {"sort": "created", "id": 2**63},
        {"sort": "created", "id": 0},
        {"sort": "created", "id": "12"},
        {"sort": "created", "id": True},
        {"sort": "created", "id": 1.5},
        {"sort": "created"},
        {"sort": "strength", "id": 1, "key": float("nan"), "now": 1.0},
        {"sort": "strength", "id": 1, "key": 0.5, "now": float("inf")},
        {"sort": "strength", "id": 1, "key": "0.5", "now": 1.0},
        {"sort": "strength", "id": 1},
        ["created", 1],
    ],
)
def test_even_a_signed_cursor_must_hold_values_sqlite_can(
    client: TestClient, auth: Auth, rt: Runtime, data: object
) -> None:
    """Defence in depth: the payload is checked after the signature, so a cursor from a
    buggy build (or a leaked key) still cannot push a bad value into SQL."""
    sort = data["sort"] if isinstance(data, dict) else "created"
    _refused(_listing(client, auth, _signed(_key(rt), data), sort))


def test_the_signature_is_checked(client: TestClient, auth: Auth) -> None:
    cursor = _cursor(client, auth)
    payload, _, mac = cursor.partition(".")
    other = _cursor(client, auth, "strength")
    spellings = [
        cursor + "=",  # padding: one cursor has one spelling
        cursor + "==",
        payload,  # no signature
        f"{payload}.",
        f"{payload}.{other.partition('.')[2]}",  # another cursor's signature
        f"{other.partition('.')[0]}.{mac}",
        f"{payload}.{mac[:-1]}",
        f"{payload}.{mac}.{mac}",
        cursor.replace(".", ".="),
        " " + cursor,
    ]
    for spelling in spellings:
        _refused(_listing(client, auth, spelling))


def test_every_process_on_the_database_accepts_the_cursor(
    client: TestClient, auth: Auth, settings: Settings
) -> None:
    cursor = _cursor(client, auth)
    second = open_runtime(settings)
    try:
        with TestClient(create_app(settings, runtime=second)) as other:
            response = _listing(other, auth, cursor)
            assert response.status_code == 200, response.text
            assert len(response.json()["facts"]) == 2
    finally:
        second.close()


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=1100), sort=st.sampled_from(["created", "strength"]))
def test_any_string_as_cursor_is_never_a_5xx(
    client: TestClient, auth: Auth, text: str, sort: str
) -> None:
    response = _listing(client, auth, text, sort)
    assert response.status_code < 500, response.text
    if text:  # an empty cursor is no cursor: the first page
        _refused(response)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_mutated_real_cursor_is_refused(client: TestClient, auth: Auth, data) -> None:
    sort = data.draw(st.sampled_from(["created", "strength"]))
    cursor = _cursor(client, auth, sort)
    at = data.draw(st.integers(0, len(cursor)))
    cut = data.draw(st.integers(0, 3))
    insert = data.draw(st.text(min_size=0, max_size=3))
    mutated = cursor[:at] + insert + cursor[at + cut :]
    response = _listing(client, auth, mutated, sort)
    assert response.status_code < 500, response.text
    if mutated != cursor:
        _refused(response)
