"""Request ids, access logs and Prometheus metrics, as one pure ASGI middleware.

Logs never hold fact content, tokens or query text: a line names the request
(id, method, route template, status, duration), not what it carried.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.usecases.memory import Memory

REQUEST_ID_HEADER = "x-request-id"
_VALID_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
access_log = logging.getLogger("embornal.access")


class HttpMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "embornal_http_requests",
            "HTTP requests by route template, method and status",
            ["method", "route", "status"],
            registry=registry,
        )
        self.latency = Histogram(
            "embornal_http_request_duration_seconds",
            "HTTP request latency by route template and method",
            ["method", "route"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=registry,
        )


class MemoryCollector(Collector):
    """Gauges read at scrape time, so they are right whoever wrote (server or CLI)."""

    def __init__(self, get_memory: Callable[[], Memory | None]) -> None:
        self._get_memory = get_memory

    def collect(self) -> Iterator[GaugeMetricFamily]:
        memory = self._get_memory()
        if memory is None:
            return
        gauges = memory.gauges()
        yield GaugeMetricFamily(
            "embornal_facts", "Facts stored, deleted ones included", gauges.facts
        )
        yield GaugeMetricFamily("embornal_facts_deleted", "Facts deleted", gauges.deleted)
        yield GaugeMetricFamily(
            "embornal_embeddings_pending",
            "Facts waiting for an embedding",
            gauges.pending_embeddings,
        )
        yield GaugeMetricFamily(
            "embornal_vector_index_size",
            "Vectors in this process's index",
            gauges.vector_index_size,
        )
        loaded = GaugeMetricFamily("embornal_model_loaded", "1 when a model is loaded")
        loaded.add_metric([], 1 if gauges.model_loaded else 0)
        yield loaded
        if gauges.model_load_seconds is not None:
            yield GaugeMetricFamily(
                "embornal_model_load_seconds",
                "Time the model took to load",
                gauges.model_load_seconds,
            )


class ObservabilityMiddleware:
    def __init__(self, app: ASGIApp, metrics: HttpMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = (
            dict(scope.get("headers") or []).get(REQUEST_ID_HEADER.encode(), b"").decode("latin-1")
        )
        request_id = given if _VALID_ID.match(given) else uuid.uuid4().hex
        token = request_id_var.set(request_id)
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                headers.append((REQUEST_ID_HEADER.encode(), request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            # The template as documented: `/v1/facts/{fact_id}`, not the route's `{fact_id:int}`.
            route = getattr(scope.get("route"), "path_format", None) or "unmatched"
            method = scope.get("method", "-")
            self.metrics.requests.labels(method, route, str(status)).inc()
            self.metrics.latency.labels(method, route).observe(elapsed)
            access_log.info(
                "%s %s %s %.1fms",
                method,
                route,
                status,
                elapsed * 1000,
                extra={
                    "method": method,
                    "route": route,
                    "status": status,
                    "duration_ms": round(elapsed * 1000, 2),
                },
            )
            request_id_var.reset(token)


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        return True


class JsonFormatter(logging.Formatter):
    FIELDS = ("method", "route", "status", "duration_ms", "tool", "outcome")

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", "-"),
        }
        for field in self.FIELDS:
            if hasattr(record, field):
                entry[field] = getattr(record, field)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(log_format: str, level: str) -> None:
    """Log to stderr as text or JSON lines, each with the request id."""
    handler = logging.StreamHandler()
    handler.addFilter(_RequestIdFilter())
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")
        )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Casbin logs the model, the whole policy table and each decision (who may do what)
    # at INFO and WARNING: subjects' rights stay out of the logs unless asked for.
    logging.getLogger("casbin").setLevel(logging.DEBUG if level == "debug" else logging.ERROR)
    if level != "debug":
        # Readiness asks Alembic for the revision on every probe; its INFO lines are noise.
        logging.getLogger("alembic").setLevel(logging.WARNING)
