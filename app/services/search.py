"""Search by keyword (FTS5 bm25), by meaning (vectors), or both (reciprocal rank fusion).

Every mode filters inside SQL with the subject's read clause and the request's
filters, so a page is never starved by filtering after the fact: keyword search
filters in the FTS query itself, and semantic search keeps examining candidates
(nearest first) until it has enough *visible* ones, falling back to every
visible fact when the filters are very selective.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from sqlalchemy import Connection, func, select

from app.db.dialects import backend
from app.db.tables import facts
from app.embeddings.base import Embedder
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
# A word in more than this share of facts is left out of the relaxed (OR) query.
RELAX_MAX_SHARE = 0.05
RELAX_MAX_WORDS = 4
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "he",
        "i",
        "if",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "she",
        "so",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "which",
        "who",
        "will",
        "with",
        "you",
    ]
)
# The best EXACT_RERANK x limit int8-scored candidates are re-scored in float32.
EXACT_RERANK = 3
_TERM = re.compile(r"\w", re.UNICODE)


def _invalid(field: str, message: str) -> InvalidInput:
    return InvalidInput(message, errors=[{"loc": [field], "msg": message}])


def fts_chunks(q: str) -> list[str]:
    """User text -> FTS5 strings that cannot raise: each word-bearing chunk quoted
    (quotes doubled), so operators, parentheses and stray quotes are just text."""
    chunks = [c for c in q.replace("\x00", " ").split() if _TERM.search(c)]
    unique = list(dict.fromkeys(chunks))[:MAX_TERMS]
    return ['"' + c.replace('"', '""') + '"' for c in unique]


def _filters(
    ctx: Context, under: str | None, tags: Sequence[str] | None, min_strength: float | None
) -> list[Any]:
    clauses = [visible_current(ctx), *fact_service.tag_filters(tags)]
    scope = fact_service.subtree_filter(under)
    if scope is not None:
        clauses.append(scope)
    if min_strength is not None and min_strength > 0:
        # strength >= m  <=>  elapsed/stability <= -ln(m)
        clauses.append(decay_sql(ctx.clock()) <= -math.log(min_strength))
    return clauses


def _visible_among(
    conn: Connection, filters: list[Any], ids: Sequence[int], columns: Sequence[Any]
) -> list[Any]:
    """The rows of `ids` that pass the filters (ACL included), in no particular order."""
    among = backend(conn).ids_in(facts.c.id, ids)
    return list(conn.execute(select(facts.c.id, *columns).where(among, *filters)).all())


def _fts_ranked(
    conn: Connection, filters: list[Any], chunks: list[str], want: int, *, any_word: bool = False
) -> list[tuple[int, float]]:
    """Best bm25 first among visible facts: rank in the keyword index alone (fast), then
    keep the visible candidates; widen until `want` are found or the matches run out."""
    keywords = backend(conn).keywords
    fetch = max(4 * want, 40)
    while True:
        candidates = keywords.ranked(conn, chunks, any_word=any_word, limit=fetch)
        keep = {row.id for row in _visible_among(conn, filters, [c[0] for c in candidates], [])}
        ranked = [(int(fid), float(bm25)) for fid, bm25 in candidates if fid in keep]
        if len(ranked) >= want or len(candidates) < fetch:
            ranked.sort(key=lambda pair: (pair[1], pair[0]))
            return ranked[:want]
        fetch *= 4


def keyword_ranking(
    conn: Connection, filters: list[Any], q: str, want: int
) -> list[tuple[int, float]]:
    """(fact id, bm25) best first; bm25 is lower-is-better as FTS5 gives it.

    Facts holding every word, best first. When no visible fact holds them all, facts
    holding any of the query's *selective* words instead: words found in more than
    RELAX_MAX_SHARE of all facts (the, of, value ...) would make the relaxed query
    score most of the memory for almost no ranking signal, so they are left out.
    """
    chunks = fts_chunks(q)
    if not chunks:
        return []
    # Function words are in most facts: requiring them filters almost nothing and
    # makes FTS5 walk their very long doclists. A query of only such words keeps them.
    strict = [c for c in chunks if c[1:-1].lower() not in STOPWORDS] or chunks
    ranked = _fts_ranked(conn, filters, strict, want)
    if ranked or len(chunks) == 1:
        return ranked
    # No visible fact holds every word: fall back to any of the selective ones.
    # (max(id) stands in for the number of facts: exact enough for a share, and free.)
    total = conn.execute(select(func.max(facts.c.id))).scalar() or 0
    frequency = {c: backend(conn).keywords.document_frequency(conn, c) for c in chunks}
    selective = [c for c in chunks if 0 < frequency[c] <= max(RELAX_MAX_SHARE * total, 50)]
    if not selective:
        return ranked
    # The rarest words carry most of bm25's signal; a long question's other words
    # would only make FTS5 score thousands more facts.
    rarest = sorted(selective, key=lambda c: (frequency[c], c))[:RELAX_MAX_WORDS]
    return _fts_ranked(conn, filters, rarest, want, any_word=True)


def _exact(
    conn: Connection, filters: list[Any], query: np.ndarray, ids: Sequence[int] | None
) -> list[tuple[int, float]]:
    """Cosine distance for the visible facts among `ids` (or all visible ones)."""
    with_vector = [*filters, facts.c.embedding.is_not(None)]
    if ids is None:
        rows = conn.execute(select(facts.c.id, facts.c.embedding).where(*with_vector)).all()
    else:
        rows = _visible_among(conn, with_vector, ids, [facts.c.embedding])
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
    """(fact id, cosine distance) nearest first, among visible facts that match filters.

    Coarse candidates come in Hamming order; each chunk is scored with the in-memory
    int8 vectors and kept if visible, until MIN_RESCORED visible ones are scored.
    The best of those are then scored exactly from facts.embedding.
    """
    index.refresh(conn)
    candidates = index.candidates(query)
    needed = max(want, MIN_RESCORED)
    scored: list[tuple[int, float]] = []
    # Start wide enough that a subject seeing half the memory needs one round.
    start, chunk = 0, 2 * needed
    while start < candidates.total and len(scored) < needed:
        if start >= candidates.total // 4:
            # The filters keep few facts: score every visible one exactly instead.
            exact = _exact(conn, filters, query, None)
            exact.sort(key=lambda pair: (pair[1], pair[0]))
            return exact[:want]
        ids, approx = candidates.chunk(start, start + chunk)
        keep = {row.id for row in _visible_among(conn, filters, ids, [])}
        scored += [(fid, float(d)) for fid, d in zip(ids, approx, strict=True) if fid in keep]
        start += chunk
        chunk *= 4
    scored.sort(key=lambda pair: (pair[1], pair[0]))
    best = [fid for fid, _ in scored[: max(EXACT_RERANK * want, 30)]]
    exact = _exact(conn, [], query, best)
    exact.sort(key=lambda pair: (pair[1], pair[0]))
    return exact[:want]


@dataclass(frozen=True)
class Query:
    """A checked search request; `vector` is the query's embedding when the mode needs one."""

    q: str
    mode: Mode
    limit: int
    vector: np.ndarray | None = None
    under: str | None = None
    tags: Sequence[str] = ()
    min_strength: float | None = None
    sort: SearchSort = "relevance"


@dataclass(frozen=True)
class Ranking:
    mode: Mode
    order: list[tuple[int, float]]  # (fact id, the score it was ranked by), best first
    scores: dict[int, dict[str, float]]
    sort: SearchSort = "relevance"


def prepare(
    *,
    q: str,
    embedder: Embedder | None,
    model_problem: str | None = None,
    mode: Mode | None = None,
    limit: int = 10,
    under: str | None = None,
    tags: Sequence[str] | None = None,
    min_strength: float | None = None,
    sort: SearchSort = "relevance",
) -> Query:
    """Check the request and embed the query text: model time, spent before any
    transaction opens, so a search never holds the database while the model runs."""
    fact_service.check_limit(limit)
    if not q or not q.strip():
        raise _invalid("q", "q must hold some text to search for")
    if len(q) > MAX_QUERY_CHARS:
        raise _invalid("q", f"q is longer than {MAX_QUERY_CHARS} characters")
    if min_strength is not None and not 0 <= min_strength <= 1:
        raise _invalid("min_strength", "min_strength must be between 0 and 1")
    mode = mode or ("hybrid" if embedder is not None else "keyword")
    vector = None
    if mode in ("semantic", "hybrid"):
        if embedder is None:
            reason = model_problem or "no embedding model is loaded"
            raise Unavailable(f"{mode} search needs an embedding model: {reason}")
        vector = np.asarray(embedder.embed_query(q), dtype=np.float32)
    return Query(q, mode, limit, vector, under, tuple(tags or ()), min_strength, sort)


def rank(conn: Connection, ctx: Context, query: Query, index: VectorIndex) -> Ranking:
    """Rank the facts the subject may see; reads only (a read transaction will do)."""
    filters = _filters(ctx, query.under, query.tags, query.min_strength)
    limit, scores = query.limit, {}
    order: list[tuple[int, float]]
    if query.mode == "keyword":
        ranked = keyword_ranking(conn, filters, query.q, limit)
        scores = {fid: {"bm25": bm25} for fid, bm25 in ranked}
        order = [(fid, -bm25) for fid, bm25 in ranked]
        return Ranking(query.mode, order, scores, query.sort)
    assert query.vector is not None
    depth = limit if query.mode == "semantic" else max(2 * limit, 50)
    vectors = backend(conn).vectors
    if vectors.in_database:
        semantic = vectors.nearest(conn, filters, query.vector, depth)
    else:
        semantic = semantic_ranking(conn, filters, index, query.vector, depth)
    for fid, distance in semantic:
        scores.setdefault(fid, {})["cosine"] = 1.0 - distance
    if query.mode == "semantic":
        order = [(fid, 1.0 - distance) for fid, distance in semantic]
        return Ranking(query.mode, order, scores, query.sort)
    keyword = keyword_ranking(conn, filters, query.q, depth)
    for fid, bm25 in keyword:
        scores.setdefault(fid, {})["bm25"] = bm25
    fused: dict[int, float] = {}
    for ranking in (keyword, semantic):
        for position, (fid, _) in enumerate(ranking, start=1):
            fused[fid] = fused.get(fid, 0.0) + 1.0 / (RRF_K + position)
    order = sorted(fused.items(), key=lambda pair: (-pair[1], pair[0]))[:limit]
    for fid, value in order:
        scores[fid]["rrf"] = value
    return Ranking(query.mode, order, scores, query.sort)


def deliver(conn: Connection, ctx: Context, ranking: Ranking, *, peek: bool) -> dict[str, Any]:
    """Hand the results to the reader: each one a recall unless `peek`.

    The ids are checked again here: ranking may have run in an earlier
    transaction, and a fact deleted or hidden since must not be handed out.
    """
    wanted = [fid for fid, _ in ranking.order]
    still = {row.id for row in _visible_among(conn, [visible_current(ctx)], wanted, [])}
    ids = [fid for fid in wanted if fid in still]
    if not peek:
        fact_service.recall(conn, ctx, ids)
    hydrated = {fact["id"]: fact for fact in fact_service.hydrate(conn, ctx, ids)}
    results: list[dict[str, Any]] = [
        {"fact": hydrated[fid], "score": score, "scores": ranking.scores[fid]}
        for fid, score in ranking.order
        if fid in hydrated
    ]
    if ranking.sort == "strength":
        results.sort(key=lambda r: (-r["fact"]["strength"], r["fact"]["id"]))
    return {"mode": ranking.mode, "results": results}
