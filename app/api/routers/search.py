"""Search by keyword, meaning, or both (GET, and POST for long queries)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from app.api.deps import MemoryDep, SubjectDep
from app.api.params import TagQuery, UnderQuery
from app.api.problems import located
from app.api.responses import AUTHED, WITH_BODY, problems
from app.schemas.search import MAX_QUERY_CHARS, MAX_RESULTS, Mode, SearchIn, SearchOut, Sort
from app.usecases.memory import Memory, SearchRequest

router = APIRouter(prefix="/v1/search", tags=["search"])

ERRORS = problems(*AUTHED, 503)


def _search(memory: Memory, subject: str, where: str, params: SearchIn) -> dict[str, Any]:
    request = SearchRequest(
        q=params.q,
        mode=params.mode,
        under=params.under,
        tags=tuple(params.tag),
        min_strength=params.min_strength,
        limit=params.limit,
        sort=params.sort,
        peek=params.peek,
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
    limit: Annotated[int, Query(ge=1, le=MAX_RESULTS)] = 10,
    sort: Annotated[Sort, Query(description="Order the page by relevance or strength")] = (
        "relevance"
    ),
    peek: Annotated[bool, Query(description="Read without counting a recall")] = False,
) -> dict[str, Any]:
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
    )
    return _search(memory, subject, "query", params)


@router.post(
    "",
    response_model=SearchOut,
    operation_id="search_facts_post",
    responses=problems(*AUTHED, *WITH_BODY, 503),
)
def search_facts_post(body: SearchIn, memory: MemoryDep, subject: SubjectDep) -> dict[str, Any]:
    """Search facts, with the query in a JSON body (for long queries)."""
    return _search(memory, subject, "body", body)
