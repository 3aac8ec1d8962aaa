"""Search by keyword (FTS5 bm25), by meaning (vectors), or both (reciprocal rank fusion).

Every mode filters inside SQL with the subject's read clause and the request's
filters, so a page is never starved by filtering after the fact: keyword search
filters in the FTS query itself, and semantic search keeps examining candidates
(nearest first) until it has enough *visible* ones, falling back to every
visible fact when the filters are very selective.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from sqlalchemy import Connection, func, literal_column, select, text

from app.db.tables import facts, facts_fts
from app.errors import InvalidInput, Unavailable
from app.services import facts as fact_service
from app.services.context import Context
from app.services.strength import decay_sql
from app.services.vector_index import VectorIndex
from app.services.visibility import visible_current

Mode = Literal["keyword", "semantic", "hybrid"]
SearchSort = Literal["relevance", "strength"]
MAX_QUERY_CHARS = 4000
MAX_TERMS = 64
RRF_K = 60
# Exact re-scoring looks at least this many visible candidates: enough that the
# binary coarse ranking keeps recall@10 above 0.95 (bench/search_bench.py).
MIN_RESCORED = 400
_TERM = re.compile(r"\w", re.UNICODE)


def _invalid(field: str, message: str) -> InvalidInput:
    return InvalidInput(message, errors=[{"loc": [field], "msg": message}])


def fts_query(q: str) -> str | None:
    """User text -> an FTS5 query that cannot raise: each word-bearing chunk becomes a
    quoted string (quotes doubled), chunks joined by OR. Operators, parentheses and
    stray quotes in the input are thereby just text."""
    chunks = [c for c in q.replace("\x00", " ").split() if _TERM.search(c)]
    if not chunks:
        return None
    quoted = ['"' + c.replace('"', '""') + '"' for c in chunks[:MAX_TERMS]]
    return " OR ".join(quoted)


def _filters(
    ctx: Context, under: str | None, tags: Sequence[str] | None, min_strength: float | None
) -> list[Any]:
    clauses = [visible_current(ctx), *fact_service.tag_filters(tags)]
    scope = fact_service.subtree_filter(under)
    if scope is not None:
        clauses.append(scope)
    if min_strength is not None and min_strength > 0:
        if min_strength > 1:
            raise _invalid("min_strength", "min_strength must be between 0 and 1")
        # strength >= m  <=>  elapsed/stability <= -ln(m)
        clauses.append(decay_sql(ctx.clock()) <= -math.log(min_strength))
    return clauses


def keyword_ranking(
    conn: Connection, filters: list[Any], q: str, want: int
) -> list[tuple[int, float]]:
    """(fact id, bm25) best first; bm25 is lower-is-better as FTS5 gives it."""
    match = fts_query(q)
    if match is None:
        return []
    fts_rank = func.bm25(literal_column("facts_fts"))
    rows = conn.execute(
        select(facts.c.id, fts_rank.label("bm25"))
        .select_from(facts_fts.join(facts, facts.c.id == facts_fts.c.rowid))
        .where(literal_column("facts_fts").op("MATCH")(match), *filters)
        .order_by(fts_rank, facts.c.id)
        .limit(want)
    ).all()
    return [(row.id, float(row.bm25)) for row in rows]


def _exact(
    conn: Connection, filters: list[Any], query: np.ndarray, ids: Sequence[int] | None
) -> list[tuple[int, float]]:
    """Cosine distance for the visible facts among `ids` (or all visible ones)."""
    stmt = select(facts.c.id, facts.c.embedding).where(facts.c.embedding.is_not(None), *filters)
    if ids is not None:
        id_list = select(text("value")).select_from(func.json_each(json.dumps(list(ids))))
        stmt = stmt.where(facts.c.id.in_(id_list.scalar_subquery()))
    rows = conn.execute(stmt).all()
    if not rows:
        return []
    matrix = np.stack([np.frombuffer(r.embedding, dtype="<f4") for r in rows])
    if matrix.shape[1] != query.shape[0]:
        return []
    distances = 1.0 - matrix @ query
    return [(row.id, float(d)) for row, d in zip(rows, distances, strict=True)]


def semantic_ranking(
    conn: Connection,
    filters: list[Any],
    index: VectorIndex,
    query: np.ndarray,
    want: int,
) -> list[tuple[int, float]]:
    """(fact id, cosine distance) nearest first, among visible facts that match filters."""
    index.refresh(conn)
    order = index.ranked_ids(query)
    needed = max(want, MIN_RESCORED)
    scored: list[tuple[int, float]] = []
    start, chunk = 0, needed
    while start < len(order) and len(scored) < needed:
        if start >= len(order) // 4:
            # The filters keep few facts: score every visible one exactly instead.
            scored = _exact(conn, filters, query, None)
            break
        ids = order[start : start + chunk].tolist()
        scored += _exact(conn, filters, query, ids)
        start += chunk
        chunk *= 4
    scored.sort(key=lambda pair: (pair[1], pair[0]))
    return scored[:want]


def search(
    conn: Connection,
    ctx: Context,
    *,
    q: str,
    index: VectorIndex | None = None,
    mode: Mode | None = None,
    under: str | None = None,
    tags: Sequence[str] | None = None,
    min_strength: float | None = None,
    limit: int = 10,
    peek: bool = False,
    sort: SearchSort = "relevance",
) -> dict[str, Any]:
    """Find facts; each result handed out is a recall unless `peek`."""
    fact_service.check_limit(limit)
    if not q or not q.strip():
        raise _invalid("q", "q must hold some text to search for")
    if len(q) > MAX_QUERY_CHARS:
        raise _invalid("q", f"q is longer than {MAX_QUERY_CHARS} characters")
    has_model = ctx.embedder is not None and index is not None
    mode = mode or ("hybrid" if has_model else "keyword")
    if mode in ("semantic", "hybrid") and not has_model:
        reason = ctx.model_problem or "no embedding model is loaded"
        raise Unavailable(f"{mode} search needs an embedding model: {reason}")
    filters = _filters(ctx, under, tags, min_strength)

    scores: dict[int, dict[str, float]] = {}
    if mode == "keyword":
        ranked = keyword_ranking(conn, filters, q, limit)
        for fid, bm25 in ranked:
            scores[fid] = {"bm25": bm25}
        order = [(fid, -bm25) for fid, bm25 in ranked]
    else:
        assert ctx.embedder is not None and index is not None
        query = np.asarray(ctx.embedder.embed_query(q), dtype=np.float32)
        depth = limit if mode == "semantic" else max(2 * limit, 50)
        semantic = semantic_ranking(conn, filters, index, query, depth)
        for fid, distance in semantic:
            scores.setdefault(fid, {})["cosine"] = 1.0 - distance
        if mode == "semantic":
            order = [(fid, 1.0 - distance) for fid, distance in semantic]
        else:
            keyword = keyword_ranking(conn, filters, q, depth)
            for fid, bm25 in keyword:
                scores.setdefault(fid, {})["bm25"] = bm25
            fused: dict[int, float] = {}
            for ranking in (keyword, semantic):
                for rank, (fid, _) in enumerate(ranking, start=1):
                    fused[fid] = fused.get(fid, 0.0) + 1.0 / (RRF_K + rank)
            order = sorted(fused.items(), key=lambda pair: (-pair[1], pair[0]))[:limit]
            for fid, value in order:
                scores[fid]["rrf"] = value

    ids = [fid for fid, _ in order]
    if not peek:
        fact_service.recall(conn, ctx, ids)
    hydrated = {fact["id"]: fact for fact in fact_service.hydrate(conn, ctx, ids)}
    results: list[dict[str, Any]] = [
        {"fact": hydrated[fid], "score": score, "scores": scores[fid]}
        for fid, score in order
        if fid in hydrated
    ]
    if sort == "strength":
        results.sort(key=lambda r: (-r["fact"]["strength"], r["fact"]["id"]))
    return {"mode": mode, "results": results}
