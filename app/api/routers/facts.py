"""Facts: store, batch, read, recall, history, delete, list."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response, status

from app.api.deps import MemoryDep, SubjectDep
from app.api.params import AsOfQuery, TagQuery, UnderQuery
from app.api.problems import located
from app.api.responses import AUTHED, WITH_BODY, problems, refused_duplicate
from app.rules import MAX_ID, MAX_LIMIT, ListSort
from app.schemas import facts as schema
from app.usecases.memory import Fact, FactPage, NewFact, StoredFact, moment_of

router = APIRouter(prefix="/v1/facts", tags=["facts"])

# Each filter is a subquery; far more than a fact can carry would only make slow SQL.

# The routes take `{fact_id:int}`: `/v1/facts/batch` is then no fact id, and a GET or DELETE on
# it is a 405 (that route takes only POST), not a 422 from the fact routes. A bad id is a 404.
FactId = Annotated[int, Path(ge=1, le=MAX_ID, description="Fact id")]
Peek = Annotated[bool, Query(description="Read without counting a recall")]


def _new(item: schema.FactIn) -> NewFact:
    return NewFact(item.path, item.content, item.tags, item.supersedes_id)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=schema.StoredFact,
    operation_id="store_fact",
    responses={**problems(*AUTHED, *WITH_BODY, 403, 404), **refused_duplicate()},
)
def store_fact(body: schema.StoreIn, memory: MemoryDep, subject: SubjectDep) -> StoredFact:
    """Store one fact (superseding another with `supersedes_id`)."""
    with located("body"):
        return memory.store(subject, _new(body), on_duplicate=body.on_duplicate)


@router.post(
    "/batch",
    status_code=status.HTTP_201_CREATED,
    response_model=schema.StoredFacts,
    operation_id="store_facts_batch",
    responses={**problems(*AUTHED, *WITH_BODY, 403, 404), **refused_duplicate()},
)
def store_facts_batch(
    body: schema.BatchIn, memory: MemoryDep, subject: SubjectDep
) -> dict[str, Any]:
    """Store several facts, all or nothing."""
    items = [_new(f) for f in body.facts]
    stored = memory.store_batch(
        subject, items, error_prefix=["body", "facts"], on_duplicate=body.on_duplicate
    )
    return {"facts": stored}


@router.get(
    "",
    response_model=schema.FactList,
    operation_id="list_facts",
    responses=problems(*AUTHED),
)
def list_facts(
    memory: MemoryDep,
    subject: SubjectDep,
    under: UnderQuery = None,
    tag: TagQuery = None,
    sort: Annotated[ListSort, Query(description="Newest or strongest first")] = "created",
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
    cursor: Annotated[
        str | None, Query(max_length=1024, description="next_cursor of the previous page")
    ] = None,
    as_of: AsOfQuery = None,
) -> FactPage:
    """List current facts (browsing, not a recall), with cursor pagination."""
    with located("query"):
        return memory.list_facts(
            subject, under=under, tags=tag, sort=sort, limit=limit, cursor=cursor, as_of=as_of
        )


@router.get(
    "/{fact_id:int}",
    response_model=schema.Fact,
    operation_id="get_fact",
    responses=problems(*AUTHED, 404),
)
def get_fact(
    fact_id: FactId,
    memory: MemoryDep,
    subject: SubjectDep,
    peek: Peek = False,
    include_deleted: Annotated[bool, Query(description="Show a deleted fact too")] = False,
    as_of: AsOfQuery = None,
) -> Fact:
    """Read one fact by id (a recall, unless `peek` or `as_of`)."""
    with located("query"):
        return memory.get(subject, fact_id, peek=peek, include_deleted=include_deleted, as_of=as_of)


@router.delete(
    "/{fact_id:int}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    operation_id="delete_fact",
    responses=problems(*AUTHED, 403, 404),
)
def delete_fact(fact_id: FactId, memory: MemoryDep, subject: SubjectDep) -> None:
    """Delete a fact: it drops out of everything but history."""
    memory.delete(subject, fact_id)


@router.get(
    "/{fact_id:int}/history",
    response_model=schema.FactsOut,
    operation_id="get_fact_history",
    responses=problems(*AUTHED, 404),
)
def get_fact_history(
    fact_id: FactId, memory: MemoryDep, subject: SubjectDep, as_of: AsOfQuery = None
) -> dict[str, Any]:
    """Return the supersede chain through a fact, oldest first."""
    with located("query"):
        chain = memory.history(subject, fact_id, as_of=as_of)
    return {"facts": chain, "as_of": moment_of(as_of)}


@router.post(
    "/{fact_id:int}/recall",
    response_model=schema.Fact,
    operation_id="recall_fact",
    responses=problems(*AUTHED, 404),
)
def recall_fact(fact_id: FactId, memory: MemoryDep, subject: SubjectDep) -> Fact:
    """Recall a fact explicitly: its stability grows."""
    return memory.recall(subject, fact_id)
