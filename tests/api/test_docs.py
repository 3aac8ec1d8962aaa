"""/docs works with no internet: its script and stylesheet come from the package."""

from __future__ import annotations

import gc
import re
import weakref

from fastapi.testclient import TestClient

from app.main import create_app
from app.runtime import Runtime
from app.settings import Settings
from tests.conftest import FakeClock


def test_docs_page_loads_only_its_own_assets(client: TestClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
    assert urls, page.text
    # Nothing from a CDN, or from anywhere but this server.
    assert all(url.startswith("/docs/assets/") for url in urls), urls
    assert "url: '/openapi.json'" in page.text
    for url in urls:
        asset = client.get(url)
        assert asset.status_code == 200, url
        assert len(asset.content) > 100, url
    script = client.get("/docs/assets/swagger-ui-bundle.js")
    assert "javascript" in script.headers["content-type"]
    # The licence travels with the vendored files.
    assert "Apache License" in client.get("/docs/assets/LICENSE").text


def test_redoc_is_gone_rather_than_blank(client: TestClient) -> None:
    # FastAPI's /redoc loads its script from a CDN: left out, not served blank.
    assert client.get("/redoc").status_code == 404


def test_an_app_that_is_dropped_is_freed(settings: Settings, rt: Runtime, clock: FakeClock) -> None:
    # FastAPI keeps every endpoint it classifies in module-wide caches (4,096 each): an
    # endpoint closing over its app (/docs did) kept every app a process ever made,
    # ~5,000 objects each, and a test worker's last garbage collection took seconds.
    app = create_app(settings, runtime=rt, clock=clock)
    with TestClient(app) as client:
        for path in ("/docs", "/openapi.json", "/healthz", "/v1/whoami"):
            client.get(path)
    gone = weakref.ref(app)
    del app, client
    gc.collect()
    assert gone() is None, [type(r).__qualname__ for r in gc.get_referrers(gone())]
