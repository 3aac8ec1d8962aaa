"""Property-based API tests: schemathesis drives every operation of the committed openapi.json.

One test per operation, against the ASGI app in-process (no network), on a fresh memory
seeded with a few facts, as subject `default` (admin: may do anything). The examples,
coverage (boundary values, missing and wrong-typed fields, undeclared methods) and fuzzing
phases run, positive and negative data alike, under schemathesis's checks (all on):

- no 5xx (`not_a_server_error`);
- the status code is documented, the content type is the documented one, the body matches
  its schema, and so do the documented headers;
- schema-violating input is refused with a 4xx; schema-valid input is not refused (but see
  `SEMANTIC_422` below);
- the same request without the token is a 401 (`ignored_auth`);
- an undeclared method is a 405 whose `Allow` names the documented methods;

and ours, `errors_are_problems`: every error is an RFC 9457 problem whose `status` is the
response's, with nothing else in it, and a 422 names the fields at fault.
(A stateful run chaining calls along inferred links was tried and left out: its data
generation depends on ids the previous examples made, which Hypothesis calls flaky.)

A fake embedding model is loaded, so semantic and hybrid search run too (without one they are
a declared 503, which the search tests cover).

Each operation gets its own memory, shared by its examples: a DELETE /v1/policies may remove
the admin's own rule, after which the rest of that test sees (declared) 403s.

The run is seeded and derandomized: the same requests every time. It is small by default
(`make test`); a longer run:

    SCHEMATHESIS_MAX_EXAMPLES=500 .venv/bin/pytest tests/api/test_schemathesis.py

One operation: add `-k whoami` (or any part of `GET /v1/whoami`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from starlette.types import Message, Receive, Scope, Send

from app.embeddings.fake import FakeEmbedder
from app.runtime import Runtime
from tests.api.conftest import Auth
from tests.conftest import TEST_WIDTH

OPENAPI = Path(__file__).resolve().parents[2] / "openapi.json"
MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "25"))
SEED = 20_240_601

# Operations whose input has rules the document cannot state: a path's segments (folded to
# lowercase first), tag keys and values and the reserved `owner` key, content limits set in
# config, an opaque cursor, the grammar of a policy line, an `as_of` within the memory's
# life (after it began, not in the future). Schema-valid input may break them,
# and the answer is a 422 naming the field (checked by `errors_are_problems`), so
# `positive_data_acceptance` takes a 422 there. Everywhere else it takes none.
SEMANTIC_422 = [
    "store_fact",
    "store_facts_batch",
    "list_facts",
    "search_facts",
    "search_facts_post",
    "get_fact",
    "get_fact_history",
    "get_path",
    "set_path_tags",
    "delete_path_tag",
    "add_policy",
    "remove_policy",
]
POSITIVE_STATUSES = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]

# `/v1/paths/{path}` takes a topic path with slashes, so `/v1/paths/a/tags` is the node
# `/a/tags` for GET and the tags of `/a` for PUT: its `Allow` is `GET, PUT`, rightly. OpenAPI
# path parameters hold no `/`, so the check sees GET there as undocumented.
TOPIC_PATH_TAIL_OPERATIONS = ["set_path_tags", "delete_path_tag"]


def _config() -> schemathesis.Config:
    return schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "generation": {
                "max-examples": MAX_EXAMPLES,
                "deterministic": True,
                # No example database: a run never depends on an earlier one.
                "database": "none",
                # The token is ours, a valid one on every request: a generated case that
                # drops it (negative data) would have it put back, and be judged as if it
                # had not. `ignored_auth` sends each request again without it instead.
                "with-security-parameters": False,
            },
            "phases": {
                "examples": {"enabled": True},
                "coverage": {"enabled": True},
                "fuzzing": {"enabled": True},
            },
            "operations": [
                {
                    "include-operation-id": SEMANTIC_422,
                    "checks": {
                        "positive_data_acceptance": {
                            "expected-statuses": [*POSITIVE_STATUSES, "422"]
                        }
                    },
                },
                {
                    "include-operation-id": TOPIC_PATH_TAIL_OPERATIONS,
                    "checks": {"allow_header_conformance": {"enabled": False}},
                },
                {
                    "include-operation-id": ["get_fact", "get_fact_history"],
                    "checks": {"use_after_free": {"enabled": False}},
                },
            ],
        }
    )


def errors_are_problems(
    _ctx: schemathesis.CheckContext, response: schemathesis.Response, case: schemathesis.Case
) -> None:
    """SPEC "HTTP API shape": every error is a problem; a validation error names its fields."""
    status = response.status_code
    if status < 400:
        return
    content_type = (response.headers.get("content-type") or [""])[0]
    assert content_type.startswith("application/problem+json"), (status, content_type)
    body = response.json()
    # Nothing but the problem's members: no stack trace, no SQL, no echo of the request.
    assert set(body) <= {"type", "title", "status", "detail", "errors"}, body
    assert body["status"] == status, body
    assert body["title"] and body["detail"], body
    if status == 401:
        assert response.headers.get("www-authenticate"), "a 401 without WWW-Authenticate"
    if status == 405:
        assert response.headers.get("allow"), "a 405 without Allow"
    if status == 422:
        errors = body.get("errors")
        assert errors, f"a 422 that names no field: {body}"
        for error in errors:
            assert error["loc"] and error["loc"][0] in ("body", "query", "path"), body


def _seed_memory(client: TestClient, headers: dict[str, str]) -> None:
    """Facts for generated ids to find (the migration stores 7 under /memory): a supersede
    chain, a link, tags on a fact and on nodes, a deleted fact; and what the documented
    examples name, so that they find it: the tag of `projects/embornal`, the second policy."""

    def store(**body: Any) -> int:
        response = client.post("/v1/facts", json=body, headers=headers)
        assert response.status_code == 201, response.text
        fact_id: int = response.json()["id"]
        return fact_id

    first = store(path="/projects/embornal", content="embornal stores facts", tags={"lang": "py"})
    store(
        path="/projects/embornal",
        content="embornal stores small facts, see [[/projects/other]]",
        supersedes_id=first,
    )
    gone = store(path="/notes", content="a fact that is deleted")
    assert client.delete(f"/v1/facts/{gone}", headers=headers).status_code == 204
    for node in ("projects", "projects/embornal"):
        put = client.put(f"/v1/paths/{node}/tags", json={"visibility": "public"}, headers=headers)
        assert put.status_code == 200, put.text
    policy = client.post("/v1/policies", json={"line": "g, alice, team-acme"}, headers=headers)
    assert policy.status_code == 201, policy.text


class CurrentApp:
    """The ASGI app schemathesis sends to, its own requests and its checks' probes alike
    (those ignore an `app=` given to the call): it hands each to the running test's app."""

    def __init__(self) -> None:
        self.app: FastAPI | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            # Each test's app runs its own lifespan, in the `seeded_app` fixture.
            while True:
                message = await receive()
                await send({"type": f"{message['type']}.complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        assert self.app is not None, "no test is running"
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            # Starlette re-raises an unhandled error after it has sent the 500: the checks
            # judge that 500 (and report it with a curl line to reproduce it).
            if not started:
                raise


CURRENT = CurrentApp()
schema = schemathesis.openapi.from_path(OPENAPI, config=_config())
schema.app = CURRENT


@pytest.fixture
def seeded_app(app: FastAPI, auth: Auth, rt: Runtime) -> Iterator[FastAPI]:
    rt.embedder = FakeEmbedder(TEST_WIDTH)
    with TestClient(app) as client:
        _seed_memory(client, auth("default"))
        CURRENT.app = app
        try:
            yield app
        finally:
            CURRENT.app = None


@schema.parametrize()
# One memory per operation, shared by its examples: on purpose (see the module docstring).
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_api(case: schemathesis.Case, seeded_app: FastAPI, auth: Auth) -> None:
    case.call_and_validate(headers=auth("default"), additional_checks=[errors_are_problems])
