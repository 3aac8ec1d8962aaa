"""The committed openapi.json is the app's document, and good to generate clients from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.openapi import document, render

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "openapi.json"
METHODS = {"get", "post", "put", "patch", "delete"}
OPERATIONS = {
    "store_fact", "store_facts_batch", "get_fact", "delete_fact", "get_fact_history",
    "recall_fact", "list_facts", "search_facts", "search_facts_post", "get_path",
    "set_path_tags", "delete_path_tag", "list_policies", "add_policy", "remove_policy",
    "whoami", "healthz", "readyz", "metrics", "list_tokens", "issue_token", "revoke_token",
    "list_activity", "index",
}  # fmt: skip
PUBLIC = {"healthz", "readyz", "index"}


def _operations() -> list[tuple[str, str, dict]]:
    return [
        (path, method, operation)
        for path, item in document()["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    ]


def test_committed_document_is_current() -> None:
    assert COMMITTED.read_text(encoding="utf-8") == render(), (
        "openapi.json is stale: run `python -m app.openapi > openapi.json`"
    )


def test_operation_ids_are_the_stable_ones() -> None:
    ids = [operation["operationId"] for _, _, operation in _operations()]
    assert len(ids) == len(set(ids))
    assert set(ids) == OPERATIONS


@pytest.mark.parametrize(("path", "method", "operation"), _operations())
def test_every_operation_is_described(path: str, method: str, operation: dict) -> None:
    assert operation.get("operationId"), (method, path)
    summary = operation.get("summary", "")
    assert summary and "\n" not in summary and summary[0].isupper(), (method, path, summary)
    errors = {code: r for code, r in operation["responses"].items() if code[0] in "45"}
    assert errors, f"{method} {path} declares no error response"
    for code, response in errors.items():
        if operation["operationId"] == "readyz":
            continue  # its 503 is the readiness report itself
        schema = response["content"]["application/problem+json"]["schema"]
        if code == "409" and operation["operationId"] in ("store_fact", "store_facts_batch"):
            # on_duplicate "refuse": the problem names the similar facts, as a 201 does.
            assert schema == {"$ref": "#/components/schemas/StoreConflict"}, (method, path)
            continue
        assert schema == {"$ref": "#/components/schemas/Problem"}, (method, path, code)
    if operation["operationId"] not in PUBLIC:
        assert "401" in errors and operation.get("security"), (method, path)


def test_a_duplicate_refusal_declares_its_similar_facts() -> None:
    schemas = document()["components"]["schemas"]
    conflict = schemas["StoreConflict"]
    assert {"type", "title", "status", "detail", "similar", "index"} <= set(conflict["properties"])
    similar = conflict["properties"]["similar"]["anyOf"]
    assert {"type": "array", "items": {"$ref": "#/components/schemas/Similar"}} in similar
    # A supersede's 409 names no similar fact: generated clients must take its absence.
    assert "similar" not in conflict["required"]


def test_request_bodies_refuse_unknown_fields() -> None:
    schemas = document()["components"]["schemas"]
    for name in ("FactIn", "BatchIn", "SearchIn", "PolicyIn", "TokenIn"):
        assert schemas[name]["additionalProperties"] is False, name


def test_document_is_deterministic_json() -> None:
    assert json.loads(render()) == document()
