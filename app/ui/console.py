"""Mounting the console on the app: its pages, static files, headers and sessions."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from app.ui.headers import ConsoleHeadersMiddleware
from app.ui.pages import SESSION_COOKIE, NotSignedIn, Refused, router, templates
from app.ui.sessions import Sessions

PREFIX = "/ui"
STATIC = Path(__file__).parent / "static"

__all__ = ["PREFIX", "install"]


def install(app: FastAPI) -> None:
    """Mount the console on `app`: its pages, static files, headers and session store."""
    app.state.ui_sessions = Sessions()
    app.include_router(router)
    app.mount(f"{PREFIX}/static", StaticFiles(directory=STATIC), name="ui-static")
    app.add_middleware(ConsoleHeadersMiddleware, prefix=PREFIX)

    async def to_login(request: Request, exc: Exception) -> Response:
        response = RedirectResponse(f"{PREFIX}/login", status_code=303)
        if SESSION_COOKIE in request.cookies:
            response.delete_cookie(SESSION_COOKIE, path=PREFIX)
        return response

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Refused)
        html = templates.get_template("problem.html").render(
            signed=None,
            csrf="",
            nav="",
            title="Refused",
            detail=exc.detail,
            problem_status=exc.status,
            back=PREFIX,
        )
        return HTMLResponse(html, status_code=exc.status)

    app.add_exception_handler(NotSignedIn, to_login)
    app.add_exception_handler(Refused, refused)
