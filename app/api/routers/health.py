"""Liveness, readiness and metrics, at the top level (not under /v1)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from app.api.deps import MemoryDep, SubjectDep
from app.api.responses import problems
from app.schemas.meta import Health, Ready

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
def readyz(memory: MemoryDep) -> Any:
    """Report whether the database, its migrations, the model and the index are ready (no auth).

    Without a model the service is still ready: keyword search and stores work,
    and facts wait for `embornal memory reindex` (with a model the server embeds them
    itself). No count is given here: `/metrics` has them, for its role.
    """
    readiness = memory.readiness()
    body = {"status": "ready" if readiness.ok else "unready", **asdict(readiness)}
    if readiness.ok:
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
    """Expose Prometheus metrics (role metrics or admin).

    The memory gauges count every fact, whoever may read it: to any other subject
    they would tell how much it cannot see, and how fast that grows. Give a scraper
    the role `metrics` (`g, prometheus, metrics`), which grants nothing else: an
    admin's token can download every fact through export and backup.
    """
    memory.require_metrics(subject)
    registry: CollectorRegistry = request.app.state.metrics_registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
