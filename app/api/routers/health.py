"""Liveness, readiness and metrics, at the top level (not under /v1)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from sqlalchemy import text

from app.api.deps import MemoryDep, RuntimeDep, SubjectDep
from app.api.responses import problems
from app.db import migrate
from app.db.engine import read_transaction
from app.schemas.meta import Health, Ready
from app.services.embedding import pending_count

log = logging.getLogger(__name__)
router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, operation_id="healthz", responses=problems(500))
def healthz() -> dict[str, str]:
    """Say the process is alive (no auth, no database)."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=Ready,
    operation_id="readyz",
    responses={
        503: {
            "model": Ready,
            "description": "Not ready: the database, its schema or the vector index",
        }
    },
)
def readyz(rt: RuntimeDep) -> Any:
    """Report whether the database, its migrations, the model and the index are ready (no auth).

    Without a model the service is still ready: keyword search and stores work,
    and facts wait for `embornal memory reindex` (`pending_embeddings` counts them;
    with a model the server embeds them itself).
    """
    database = {"ok": False, "detail": "the database cannot be reached"}
    migrations = {"ok": False, "detail": "not checked: no database"}
    pending = None
    try:
        with read_transaction(rt.engine) as conn:
            conn.execute(text("SELECT 1"))
            database = {"ok": True, "detail": None}
            current, head = migrate.current_revision(conn), migrate.head_revision()
            if current == head:
                migrations = {"ok": True, "detail": f"at head {head}"}
                pending = pending_count(conn)
            else:
                migrations = {"ok": False, "detail": f"at {current}, head is {head}"}
    except Exception:
        # The reason goes to the log: it may name the file or hold SQL.
        log.exception("readiness check failed")
    embedder = rt.embedder
    model = (
        {"loaded": True, "name": embedder.name, "reason": None}
        if embedder is not None
        else {"loaded": False, "name": None, "reason": rt.model_problem or "no model loaded"}
    )
    loaded = rt.vector_index.ready.is_set()
    index = (
        {"ok": True, "detail": f"{len(rt.vector_index)} vectors in memory"}
        if loaded
        else {"ok": False, "detail": "the vector index is not loaded (see the log)"}
    )
    ok = database["ok"] and migrations["ok"] and loaded
    body = {
        "status": "ready" if ok else "unready",
        "database": database,
        "migrations": migrations,
        "model": model,
        "index": index,
        "pending_embeddings": pending,
    }
    if ok:
        return body
    return JSONResponse(Ready.model_validate(body).model_dump(mode="json"), status_code=503)


@router.get(
    "/metrics",
    response_class=Response,
    operation_id="metrics",
    responses={
        200: {"content": {CONTENT_TYPE_LATEST.split(";")[0]: {"schema": {"type": "string"}}}},
        **problems(401, 403, 500),
    },
)
def metrics(request: Request, memory: MemoryDep, subject: SubjectDep) -> Response:
    """Expose Prometheus metrics (role admin).

    The memory gauges count every fact, whoever may read it: to any other subject
    they would tell how much it cannot see, and how fast that grows.
    """
    memory.require_admin(subject, "metrics need the admin role")
    registry: CollectorRegistry = request.app.state.metrics_registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
