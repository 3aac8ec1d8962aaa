"""`GET /`: a browser is sent to the console; any other client learns where things are."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse
from pydantic import BaseModel, Field

from app import __version__
from app.api.responses import problems

router = APIRouter(tags=["meta"])


class Index(BaseModel):
    name: str
    version: str
    api: str = Field(description="The REST API's prefix")
    docs: str = Field(description="The API's documentation (and /openapi.json)")
    openapi: str
    mcp: str = Field(description="MCP over streamable HTTP, for agents")
    console: str = Field(description="The web console, for people")


def wants_html(accept: str) -> bool:
    """Whether an Accept header asks for HTML before JSON: a browser's does
    (text/html first, */* at a lower q); curl's */* and an API client's do not."""
    quality: dict[str, float] = {}
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        quality[media.lower()] = max(q, quality.get(media.lower(), 0.0))
    html = quality.get("text/html", 0.0)
    return html > 0 and html >= quality.get("application/json", 0.0)


@router.get(
    "/",
    response_model=Index,
    operation_id="index",
    responses={
        303: {"description": "A browser (Accept: text/html) is sent to the console, /ui"},
        **problems(500),
    },
)
def index(request: Request) -> Any:
    """Name where the API, its documents, MCP and the console are (no auth)."""
    if wants_html(request.headers.get("accept", "")):
        return RedirectResponse("/ui", status_code=303)
    return {
        "name": "embornal",
        "version": __version__,
        "api": "/v1",
        "docs": "/docs",
        "openapi": "/openapi.json",
        "mcp": "/mcp",
        "console": "/ui",
    }
