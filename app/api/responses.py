"""Declared error responses, so generated clients know every status a route can give."""

from __future__ import annotations

from typing import Any

from app.schemas.common import Problem
from app.schemas.facts import StoreConflict

_DESCRIPTIONS = {
    401: "Missing or invalid bearer token",
    403: "Readable, but the subject may not change it",
    404: "Not found, or not visible to the subject",
    409: "Conflict with the current state",
    413: "Request body too large",
    415: "The request body is not application/json",
    422: "Invalid input; `errors` names the fields",
    500: "Unexpected server error",
    503: "A needed part of the service is unavailable (the database, the model); "
    "Retry-After, when present, says how many seconds to wait",
    507: "The database's disk is full; nothing was written",
}

# Every authenticated route can give these: each reads the database, and each may write
# (a read by id is a recall).
AUTHED = (401, 422, 500, 503, 507)
# A route that reads a JSON body can also give these (app.api.limits).
WITH_BODY = (413, 415)


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` entries; app.main moves their schema under application/problem+json."""
    return {
        status: {"model": Problem, "description": _DESCRIPTIONS[status]}
        for status in sorted(set(statuses))
    }


def refused_duplicate() -> dict[int | str, dict[str, Any]]:
    """The 409 of a store: a superseded fact, or (`on_duplicate: "refuse"`) a similar one."""
    description = (
        "The fact to supersede is superseded already, or on_duplicate is refuse and a fact "
        "you can read says nearly the same (named in `similar`; nothing was stored)"
    )
    return {409: {"model": StoreConflict, "description": description}}
