"""Request ids, Prometheus metrics and logs that hold no secrets or fact content."""

from __future__ import annotations

import json
import logging

from app.api.observability import JsonFormatter, _RequestIdFilter


def test_every_response_carries_a_request_id(client, auth) -> None:
    given = client.get("/healthz", headers={"X-Request-ID": "abc-123"})
    assert given.headers["x-request-id"] == "abc-123"
    made = client.get("/v1/facts/999999", headers=auth("default"))
    assert made.status_code == 404 and len(made.headers["x-request-id"]) == 32
    forged = client.get("/healthz", headers={"X-Request-ID": "bad id\nwith newline"})
    assert forged.headers["x-request-id"] != "bad id\nwith newline"


def test_metrics_count_requests_by_route_and_report_the_memory(client, auth) -> None:
    headers = auth("default")
    client.post("/v1/facts", json={"path": "/m", "content": "counted"}, headers=headers)
    client.get("/v1/facts/1", headers=headers)
    client.get("/v1/facts/2", headers=headers)
    text = client.get("/metrics", headers=headers).text
    assert (
        'embornal_http_requests_total{method="GET",route="/v1/facts/{fact_id}",status="200"} 2.0'
        in text
    )
    assert 'embornal_http_request_duration_seconds_bucket{le="0.001",method="POST"' in text
    assert "embornal_facts 8.0" in text  # the 7 /memory facts and ours
    assert "embornal_embeddings_pending 8.0" in text  # no model in these tests
    assert "embornal_model_loaded 0.0" in text
    assert client.get("/metrics").status_code == 401


def test_access_log_holds_no_content_token_or_query(client, auth, caplog) -> None:
    headers = auth("default")
    secret = "the launch code is 0000"
    with caplog.at_level(logging.DEBUG):
        client.post("/v1/facts", json={"path": "/s", "content": secret}, headers=headers)
        client.get("/v1/search", params={"q": "launch code"}, headers=headers)
    ours = [r for r in caplog.records if r.name.startswith(("embornal", "app", "uvicorn"))]
    logged = "\n".join(r.getMessage() + str(r.__dict__) for r in ours)
    assert "/v1/facts" in logged and "/v1/search" in logged
    assert secret not in logged and "launch" not in logged
    assert headers["Authorization"].split()[1] not in logged


def test_json_log_lines_carry_the_request_id() -> None:
    record = logging.LogRecord(
        "embornal.access", logging.INFO, __file__, 1, "GET %s", ("/x",), None
    )
    record.status = 200
    _RequestIdFilter().filter(record)
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "GET /x" and line["status"] == 200 and "request_id" in line
