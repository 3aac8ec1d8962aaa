"""Tokens the memory signed: list, issue, revoke (SPEC "Auth")."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response, status

from app.api.deps import MemoryDep, SubjectDep
from app.api.problems import located
from app.api.responses import AUTHED, WITH_BODY, problems
from app.durations import parse_duration
from app.rules import MAX_JTI_CHARS
from app.schemas.tokens import IssuedTokenOut, TokenIn, TokenList

router = APIRouter(prefix="/v1/tokens", tags=["tokens"])


@router.get(
    "",
    response_model=TokenList,
    operation_id="list_tokens",
    responses=problems(*AUTHED),
)
def list_tokens(
    memory: MemoryDep,
    subject: SubjectDep,
    include_expired: Annotated[
        bool, Query(description="List expired tokens too (kept for activity.keep_days)")
    ] = False,
) -> dict[str, Any]:
    """List the tokens the memory signed: your own, or every one for an admin."""
    return {"tokens": memory.list_tokens(subject, include_expired=include_expired)}


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=IssuedTokenOut,
    operation_id="issue_token",
    responses=problems(*AUTHED, *WITH_BODY, 403, 409),
)
def issue_token(body: TokenIn, memory: MemoryDep, subject: SubjectDep) -> dict[str, Any]:
    """Issue a token signed with the memory's key, for yourself or (admin) anyone."""
    with located("body", "expires_in"):
        lifetime = parse_duration(body.expires_in)
    with located("body"):
        issued = memory.issue_token(subject, body.subject or subject, lifetime, label=body.label)
    return {**asdict(issued.record), "token": issued.token}


@router.delete(
    "/{jti}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    operation_id="revoke_token",
    responses=problems(*AUTHED, 404, 409),
)
def revoke_token(
    jti: Annotated[str, Path(max_length=MAX_JTI_CHARS, description="The token's id (`jti`)")],
    memory: MemoryDep,
    subject: SubjectDep,
) -> None:
    """Revoke a token: every server refuses it from its next request (by default)."""
    memory.revoke_token(subject, jti)
