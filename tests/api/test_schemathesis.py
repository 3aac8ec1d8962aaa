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

One operation: add `-k whoami` (or any part of `GET /v1/whoami`). `make fuzz` runs both
tests with 500 examples an operation.

`test_api_with_invalid_tokens` sends generated requests to every operation with tokens that
are wrong in four ways (expired, another key, `alg: none`, not a JWT): a fifth as many
examples, each sent once a kind.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from starlette.types import Message, Receive, Scope, Send

from app import b64url
from app.auth.tokens import issue_token
from app.embeddings.fake import FakeEmbedder
from app.runtime import Runtime
from app.settings import Settings
from tests.api.conftest import Auth
from tests.conftest import TEST_WIDTH

OPENAPI = Path(__file__).resolve().parents[2] / "openapi.json"
MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "25"))
# Each example of the invalid-token test is sent once per kind of bad token.
INVALID_TOKEN_EXAMPLES = max(1, MAX_EXAMPLES // 5)
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
    # A lifetime's grammar (30d, 1d12h), a subject that is a role's name; a cursor, the
    # times of since and until.
    "issue_token",
    "list_activity",
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


# The problem extension members an operation declares (StoreConflict): a store refused
# by on_duplicate "refuse" names the similar facts, and in a batch which item it was.
PROBLEM_EXTENSIONS = {
    ("POST", "/v1/facts", 409): {"similar", "index"},
    ("POST", "/v1/facts/batch", 409): {"similar", "index"},
}


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
    # Nothing but the problem's members (and the extensions openapi.json declares for the
    # operation): no stack trace, no SQL, no echo of the request.
    extensions = PROBLEM_EXTENSIONS.get((case.method.upper(), case.path, status), set())
    assert set(body) <= {"type", "title", "status", "detail", "errors", *extensions}, body
    for near in body.get("similar") or ():
        assert set(near) == {"id", "path", "cosine"}, body
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


def invalid_tokens(settings: Settings) -> dict[str, str]:
    """Bearer tokens the service must refuse, each a different way to be wrong."""
    now = dt.datetime.now(dt.UTC)
    claims = {"sub": "default", "iat": int(now.timestamp()), "exp": int(now.timestamp()) + 600}
    header = b64url.encode(json.dumps({"alg": "none", "typ": "JWT"}).encode())
    body = b64url.encode(json.dumps(claims).encode())
    return {
        "expired": issue_token(
            settings, "default", dt.timedelta(hours=1), now=now - dt.timedelta(days=1)
        ),
        "another key": jwt.encode(claims, "not-the-service-key-" + "x" * 32, algorithm="HS256"),
        "alg none": f"{header}.{body}.",
        "not a JWT": "not-a-token",
    }


@pytest.fixture
def current_app(app: FastAPI) -> Iterator[FastAPI]:
    """The test's app, unseeded: a refused token reaches no fact."""
    with TestClient(app):
        CURRENT.app = app
        try:
            yield app
        finally:
            CURRENT.app = None


@schema.parametrize()
# The token check is the same on both backends: one is enough.
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@settings(
    max_examples=INVALID_TOKEN_EXAMPLES,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
def test_api_with_invalid_tokens(
    case: schemathesis.Case, current_app: FastAPI, settings: Settings, fact_count: Any
) -> None:
    """Every operation with a token that is expired, signed with another key, `alg: none`
    or not a JWT: no 5xx, never a 2xx from an operation that needs a token, every error a
    problem, and nothing written. The public operations (health, readiness) answer as
    they do without one."""
    needs_token = bool(case.operation.definition.raw.get("security"))
    before = fact_count()
    for kind, token in invalid_tokens(settings).items():
        response = case.call(headers={"Authorization": f"Bearer {token}"})
        errors_are_problems(None, response, case)  # type: ignore[arg-type]
        assert response.status_code < 500, (kind, response.status_code, response.text)
        if needs_token:
            # 401, or a request refused before its token is read: a URL no route takes
            # (404), a method (405), a body too large, not JSON, or not valid JSON.
            refused = (401, 404, 405, 413, 415, 422)
            assert response.status_code in refused, (kind, case.formatted_path, response.text)
    assert fact_count() == before
