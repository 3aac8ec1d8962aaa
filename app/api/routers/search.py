"""Search by keyword, meaning, or both (GET, and POST for long queries)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.api.deps import MemoryDep, SubjectDep
from app.api.params import AsOfQuery, TagQuery, UnderQuery
from app.api.problems import located
from app.api.responses import AUTHED, WITH_BODY, problems
from app.rules import MAX_LIMIT, MAX_QUERY_CHARS, Mode, SearchSort
from app.schemas.search import SearchIn, SearchOut
from app.usecases.memory import Memory, SearchPage, SearchRequest

router = APIRouter(prefix="/v1/search", tags=["search"])

ERRORS = problems(*AUTHED, 503)


def _search(memory: Memory, subject: str, where: str, params: SearchIn) -> SearchPage:
    request = SearchRequest(
        q=params.q,
        mode=params.mode,
        under=params.under,
        tags=tuple(params.tag),
        min_strength=params.min_strength,
        limit=params.limit,
        sort=params.sort,
        peek=params.peek,
        as_of=params.as_of,
    )
    with located(where):
        return memory.search(subject, request)


@router.get("", response_model=SearchOut, operation_id="search_facts", responses=ERRORS)
def search_facts(
    memory: MemoryDep,
    subject: SubjectDep,
    q: Annotated[str, Query(min_length=1, max_length=MAX_QUERY_CHARS, examples=["small facts"])],
    mode: Annotated[
        Mode | None, Query(description="Default: hybrid with a model loaded, else keyword")
    ] = None,
    under: UnderQuery = None,
    tag: TagQuery = None,
    min_strength: Annotated[float | None, Query(ge=0.0, le=1.0)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 10,
    sort: Annotated[SearchSort, Query(description="Order the page by relevance or strength")] = (
        "relevance"
    ),
    peek: Annotated[bool, Query(description="Read without counting a recall")] = False,
    as_of: AsOfQuery = None,
) -> SearchPage:
    """Search facts by keyword, by meaning, or both (a recall of each result unless `peek`)."""
    # Already validated as query parameters, with the same constraints as SearchIn.
    params = SearchIn.model_construct(
        q=q,
        mode=mode,
        under=under,
        tag=tag or [],
        min_strength=min_strength,
        limit=limit,
        sort=sort,
        peek=peek,
        as_of=as_of,
    )
    return _search(memory, subject, "query", params)


@router.post(
    "",
    response_model=SearchOut,
    operation_id="search_facts_post",
    responses=problems(*AUTHED, *WITH_BODY, 503),
)
def search_facts_post(body: SearchIn, memory: MemoryDep, subject: SubjectDep) -> SearchPage:
    """Search facts, with the query in a JSON body (for long queries)."""
    return _search(memory, subject, "body", body)
