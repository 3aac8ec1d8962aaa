"""Search by keyword, meaning, or both (GET, and POST for long queries)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from app.api.deps import Db, DbDep, RuntimeDep
from app.api.params import TagQuery, UnderQuery
from app.api.problems import located
from app.api.responses import AUTHED, problems
from app.runtime import Runtime
from app.schemas.search import MAX_QUERY_CHARS, MAX_RESULTS, Mode, SearchIn, SearchOut, Sort
from app.services import search as search_service

router = APIRouter(prefix="/v1/search", tags=["search"])

ERRORS = problems(*AUTHED, 503)


def _search(rt: Runtime, db: Db, where: str, params: SearchIn) -> dict[str, Any]:
    with located(where):
        # The model runs first, with no transaction open; ranking only reads; and
        # the write lock is taken just to count the recalls of what is handed out.
        query = search_service.prepare(
            q=params.q,
            embedder=rt.embedder,
            model_problem=rt.model_problem,
            mode=params.mode,
            limit=params.limit,
            under=params.under,
            tags=params.tag,
            min_strength=params.min_strength,
            sort=params.sort,
            cache=rt.query_cache,
        )
        with db.reading() as (conn, ctx):
            ranking = search_service.rank(conn, ctx, query, rt.vector_index)
        with db.reading() if params.peek else db.writing() as (conn, ctx):
            return search_service.deliver(conn, ctx, ranking, peek=params.peek)


@router.get("", response_model=SearchOut, operation_id="search_facts", responses=ERRORS)
def search_facts(
    rt: RuntimeDep,
    db: DbDep,
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
    return _search(rt, db, "query", params)


@router.post(
    "",
    response_model=SearchOut,
    operation_id="search_facts_post",
    responses=problems(*AUTHED, 413, 503),
)
def search_facts_post(body: SearchIn, rt: RuntimeDep, db: DbDep) -> dict[str, Any]:
    """Search facts, with the query in a JSON body (for long queries)."""
    return _search(rt, db, "body", body)
