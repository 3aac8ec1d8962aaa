"""/docs works with no internet: its script and stylesheet come from the package."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient


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
