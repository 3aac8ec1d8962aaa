"""Policy lines (role admin): list, add, remove. A change shows on the next request."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response, status

from app.api.deps import MemoryDep, SubjectDep
from app.api.problems import located
from app.api.responses import AUTHED, WITH_BODY, problems
from app.schemas.policies import Policy, PolicyIn, PolicyList

router = APIRouter(prefix="/v1/policies", tags=["policies"])


@router.get(
    "",
    response_model=PolicyList,
    operation_id="list_policies",
    responses=problems(*AUTHED, 403),
)
def list_policies(memory: MemoryDep, subject: SubjectDep) -> dict[str, Any]:
    """List the policy lines."""
    return {"policies": memory.list_policies(subject)}


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=Policy,
    operation_id="add_policy",
    responses=problems(*AUTHED, *WITH_BODY, 403, 409),
)
def add_policy(body: PolicyIn, memory: MemoryDep, subject: SubjectDep) -> dict[str, Any]:
    """Add a policy line, e.g. `p, alice, path:/work/acme/*, read, allow`."""
    with located("body", "line"):
        return memory.add_policy(subject, body.line)


@router.delete(
    "",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    operation_id="remove_policy",
    responses={
        **problems(*AUTHED, *WITH_BODY, 403, 404),
        409: {
            **problems(409)[409],
            "description": "The last line that gives anyone the admin role: add another first",
        },
    },
)
def remove_policy(body: PolicyIn, memory: MemoryDep, subject: SubjectDep) -> None:
    """Remove a policy line (never the last one that gives anyone the admin role)."""
    with located("body", "line"):
        memory.remove_policy(subject, body.line)
