"""The interactive API page at /docs, with its script and stylesheet from the package.

FastAPI's own /docs and /redoc load them from a CDN, so they were blank on a machine
without internet (a homelab's usual state). Swagger UI is vendored under
app/static/swagger-ui (Apache-2.0, its LICENSE and NOTICE beside it; version in
VERSION); ReDoc is left out: one page that can call the API is enough, and
/openapi.json feeds any other viewer.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

ASSETS_DIR = Path(__file__).resolve().parent.parent / "static" / "swagger-ui"
DOCS_PATH = "/docs"
ASSETS_PATH = "/docs/assets"


def install_docs(app: FastAPI) -> None:
    """Serve /docs and its assets; the app must be made with docs_url=None, redoc_url=None."""
    app.mount(ASSETS_PATH, StaticFiles(directory=ASSETS_DIR), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"
    # The page's values, not the app: FastAPI keeps each endpoint it classifies in a
    # module-wide cache of 4,096, and an endpoint closing over its app kept the app (and
    # its routes' validators, ~5,000 objects) alive after it was gone.
    title = f"{app.title} API"

    @app.get(DOCS_PATH, include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=title,
            swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_PATH}/favicon-32x32.png",
        )
