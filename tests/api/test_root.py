"""`GET /`: a browser goes to the console; an API client learns where things are."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.api.routers.root import wants_html

# Nothing here reads the database.
pytestmark = pytest.mark.only_backend("sqlite")

BROWSERS = [
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8",  # Chromium
    "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",  # Firefox
    "text/html",
]
CLIENTS = ["", "*/*", "application/json", "application/json, text/html;q=0.5", "text/html;q=0"]


@pytest.mark.parametrize("accept", BROWSERS)
def test_a_browser_is_sent_to_the_console(client: TestClient, accept: str) -> None:
    response = client.get("/", headers={"Accept": accept}, follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/ui"
    # Followed, it lands on the sign-in form (no session yet).
    landed = client.get("/", headers={"Accept": accept})
    assert landed.url.path == "/ui/login" and landed.status_code == 200


@pytest.mark.parametrize("accept", CLIENTS)
def test_an_api_client_gets_a_small_index(client: TestClient, accept: str) -> None:
    response = client.get("/", headers={"Accept": accept} if accept else {})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert {body[k] for k in ("api", "docs", "mcp", "console")} == {"/v1", "/docs", "/mcp", "/ui"}
    assert body["name"] == "embornal"
    # No token needed, and none of the memory's content or counts in it.
    assert set(body) == {"name", "version", "api", "docs", "openapi", "mcp", "console"}


def test_accept_is_read_by_its_quality_values() -> None:
    assert wants_html("application/json;q=0.5, text/html")
    assert not wants_html("text/html;q=0.4, application/json")
    assert not wants_html("text/html;q=x")
