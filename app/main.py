"""create_app(settings) -> FastAPI: the HTTP service.

The lifespan opens the memory once (engine, schema at head, rules, model) and
builds the token verifier (creating the local signing key on first start). A
caller that already holds a Runtime, such as tests or `embornal serve`, passes
it in and keeps ownership of it, unless it hands it over (`close_runtime`): the
app then closes it at shutdown, the WAL folded into the memory file. Building
the app touches no file, so the OpenAPI document can be made without a database.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from prometheus_client import CollectorRegistry

from app import __version__
from app.api.cors import Cors
from app.api.docs import install_docs
from app.api.limits import BodyLimitMiddleware, JsonBodyMiddleware
from app.api.observability import HttpMetrics, MemoryCollector, ObservabilityMiddleware
from app.api.problems import PROBLEM_JSON, install_problem_handlers
from app.api.routers import activity, facts, health, meta, paths, policies, root, search, tokens
from app.api.slashes import relative_slash_redirects
from app.auth.tokens import TokenVerifier
from app.mcp.http import MCP_PATH, JwtVerifier, McpEndpoint, jsonrpc_refusal, token_subject
from app.mcp.server import ToolMetrics, build_server
from app.runtime import Runtime, open_runtime
from app.settings import Settings
from app.ui.console import PREFIX as UI_PREFIX
from app.ui.console import install as install_console
from app.usecases.memory import Memory

DESCRIPTION = (
    "A memory of small facts for AI agents: store one fact at a time, find it again "
    "by keyword, by meaning, or by how strong it still is. Every route but health, "
    "readiness and this document needs `Authorization: Bearer <JWT>`. Errors are RFC 9457 "
    "`application/problem+json`."
)


def create_app(
    settings: Settings,
    *,
    runtime: Runtime | None = None,
    close_runtime: bool = False,
    clock: Callable[[], float] | None = None,
    verifier: TokenVerifier | None = None,
) -> FastAPI:
    """Make the app; `runtime`, `clock` and `verifier` are for callers that already hold
    them. With `close_runtime`, the app closes the runtime it is given when it shuts down."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = runtime is None or close_runtime
        rt = runtime or open_runtime(settings, load_model=True)
        worker = upkeep = None
        try:
            app.state.runtime = rt
            memory = app.state.memory = Memory(rt, clock=clock, via="rest")
            app.state.verifier = verifier or TokenVerifier(settings)
            # Every front end's tokens meet the memory's list of revoked ones.
            app.state.verifier.check_revocations(memory.token_revoked)
            # A console backup's hidden copy that a killed server left (kill -9, OOM).
            memory.sweep_killed_sends()
            # The vector index is in memory before the server takes a request: no
            # /readyz says ready, and no first search pays for the load (~1 s at a
            # million facts: one read of facts_vec, see app.services.vector_index).
            await anyio.to_thread.run_sync(rt.load_vector_index)
            # With a model, facts waiting for one (the /memory starter facts, imports,
            # stores made without a model) are embedded in the background.
            worker = app.state.embed_worker = memory.start_embedding_worker()
            # The activity record (and old token records) pruned past activity.keep_days.
            upkeep = memory.start_upkeep()
            async with mcp_endpoint.running():
                yield
        finally:
            if worker is not None:
                worker.stop()
            if upkeep is not None:
                upkeep.stop()
            # Last, once no worker holds a connection: every one is then closed.
            if owned:
                rt.close()

    app = FastAPI(
        title="embornal",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        # Their CDN scripts would leave them blank offline: app.api.docs serves /docs.
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    # Per app, not prometheus_client's global one: two apps in one process (tests) never clash.
    registry = CollectorRegistry()
    app.state.metrics_registry = registry
    registry.register(MemoryCollector(lambda: getattr(app.state, "memory", None)))
    install_problem_handlers(app)
    install_docs(app)
    # The console (/ui) takes HTML forms; every other body must be JSON.
    app.add_middleware(JsonBodyMiddleware, forms_under=(UI_PREFIX + "/",))
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=settings.limits.body_bytes,
        refusals={MCP_PATH: jsonrpc_refusal},
    )
    if settings.http.cors_origins:
        # Outside the body checks, so a preflight (OPTIONS, no body) is answered before them.
        app.add_middleware(Cors, origins=settings.http.cors_origins)
    # Outermost: every response, a refused body included, gets an id and is counted.
    app.add_middleware(ObservabilityMiddleware, metrics=HttpMetrics(registry))
    for module in (facts, search, paths, policies, tokens, activity, meta, health, root):
        _summaries_from_docstrings(module.router)
        app.include_router(module.router)
    install_console(app)
    mcp_endpoint = _mcp_endpoint(app, settings, registry)
    app.router.routes.extend(mcp_endpoint.routes())
    relative_slash_redirects(app.router)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _mcp_endpoint(app: FastAPI, settings: Settings, registry: CollectorRegistry) -> McpEndpoint:
    """MCP at /mcp: the same memory, verifier and subjects as the REST routes (app.state)."""

    def memory() -> Memory:
        found: Memory = app.state.memory
        return found.via("mcp")

    def verify(token: str) -> str:
        subject: str = app.state.verifier.verify(token)
        return subject

    server = build_server(memory, token_subject, metrics=ToolMetrics(registry))
    verifier = JwtVerifier(verify, admit=lambda subject: memory().whoami(subject))
    return McpEndpoint(
        server,
        verifier,
        issuer=settings.auth.issuer,
        http=settings.http,
        bind_host=settings.server.host,
    )


def _summaries_from_docstrings(router: APIRouter) -> None:
    """A route's first docstring line is its summary (FastAPI would use its function name)."""
    for route in router.routes:
        if isinstance(route, APIRoute) and not route.summary and route.endpoint.__doc__:
            route.summary = inspect.cleandoc(route.endpoint.__doc__).partition("\n")[0].strip()


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, with error bodies declared as application/problem+json."""
    if app.openapi_schema is None:
        schema = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
        )
        # Problem and every problem with extension members (StoreConflict): the schemas
        # that hold a problem's four members.
        components = schema.get("components", {}).get("schemas", {})
        problems = {
            f"#/components/schemas/{name}"
            for name, body in components.items()
            if {"type", "title", "status", "detail"} <= set(body.get("properties", {}))
        }
        for path_item in schema.get("paths", {}).values():
            for operation in path_item.values():
                for response in operation.get("responses", {}).values():
                    content = response.get("content", {})
                    body = content.get("application/json", {})
                    if body.get("schema", {}).get("$ref") in problems:
                        content[PROBLEM_JSON] = content.pop("application/json")
        app.openapi_schema = schema
    return app.openapi_schema
