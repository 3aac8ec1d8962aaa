"""The activity record: who changed what (SPEC "Memory over time")."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.api.deps import MemoryDep, SubjectDep
from app.api.params import UnderQuery
from app.api.problems import located
from app.api.responses import AUTHED, problems
from app.auth.subjects import MAX_SUBJECT_CHARS
from app.rules import MAX_ID, MAX_LIMIT, ActivityAction
from app.schemas.activity import ActivityPage
from app.schemas.search import MAX_AS_OF_CHARS
from app.usecases.memory import ActivityFilters, EntryPage

router = APIRouter(prefix="/v1/activity", tags=["activity"])

Moment = Annotated[
    str | None,
    Query(
        max_length=MAX_AS_OF_CHARS,
        description="RFC 3339 date-time with a timezone",
        json_schema_extra={"format": "date-time"},
        examples=["2026-12-01T09:30:00Z"],
    ),
]


@router.get(
    "",
    response_model=ActivityPage,
    operation_id="list_activity",
    responses=problems(*AUTHED, 403),
)
def list_activity(
    memory: MemoryDep,
    caller: SubjectDep,
    subject: Annotated[
        str | None,
        Query(
            max_length=MAX_SUBJECT_CHARS, description="Only this subject's changes (others': admin)"
        ),
    ] = None,
    action: Annotated[ActivityAction | None, Query(description="Only this kind of change")] = None,
    under: UnderQuery = None,
    since: Moment = None,
    until: Moment = None,
    fact_id: Annotated[
        int | None, Query(ge=1, le=MAX_ID, description="Only changes naming this fact")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
    cursor: Annotated[
        str | None, Query(max_length=1024, description="next_cursor of the previous page")
    ] = None,
) -> EntryPage:
    """List who changed what, newest first: every change for an admin, else your own."""
    wanted = ActivityFilters(
        subject=subject, action=action, under=under, since=since, until=until, fact_id=fact_id
    )
    with located("query"):
        return memory.activity(caller, wanted, limit=limit, cursor=cursor)
