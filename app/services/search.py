"""Search by keyword (FTS5 bm25), by meaning (vectors), or both (reciprocal rank fusion).

The keyword index and, on PostgreSQL, nearest-neighbour search are the backend's
(app.db.dialects): tsvector + ts_rank and pgvector HNSW there, FTS5 and the
process's in-memory vector index on SQLite. The tiers, fusion and filters are here.

Every mode filters inside SQL with the subject's read clause and the request's
filters, and keeps going until the page is full, so a page is never starved by
filtering: keyword search ranks in the keyword index and widens its window until
enough of the candidates are visible, and semantic search keeps examining
candidates (nearest first) until it has enough *visible* ones, falling back to
every visible fact when the filters are very selective. The statements over the
subject's fragment are built once and kept in its Access (Scope.statement).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import Connection, bindparam, select

from app.db.dialects import backend
from app.db.tables import facts
from app.embeddings.base import Embedder
from app.embeddings.query_cache import QueryCache
from app.errors import InvalidInput, Unavailable
from app.rules import MAX_QUERY_CHARS, Mode, SearchSort
from app.services import facts as fact_service
from app.services import timewords
from app.services.context import Context
from app.services.facts import Fact
from app.services.strength import decay_sql
from app.services.timewords import Window
from app.services.validation import check_limit, check_query, fold_path, parse_tag_filter
from app.services.vector_index import (
    POOL,
    POOL_SHARE,
    RANKED_HEAD,
    VectorIndex,
    unpack_blobs,
)
from app.services.visibility import visible_current

MAX_TERMS = 64
# Reciprocal rank fusion's k; on bench.quality's dev split k from 5 to 60 moved hybrid
# recall@5 by under a point once keyword matches weigh their share of the question
# (Fusion); 60 is the usual value.
RRF_K = 60
# The best EXACT_RERANK x limit visible candidates by int8 similarity (at least
# MIN_RESCORED) are re-scored exactly from facts.embedding: the int8 order is right
# to ~1e-3 in cosine, so the true top 10 are among them (bench/search_bench.py). At
# 10k facts, 2x and 3x gave the same recall@10 (1.000) and @20 (0.999); each visible
# candidate costs an ACL check and a vector read.
MIN_RESCORED = 30
EXACT_RERANK = 2
# Each half of a hybrid search ranks this deep, so that a fact low in one list but high
# in the other can still reach the page. 20, 30 or 50 gave the same quality figures;
# the semantic half's exact re-scoring grows with it, so the least of them. The semantic
# half itself now reads deeper (Centering.depth): reordered, its 100 nearest hold more.
HYBRID_DEPTH = 20
HYBRID_DEPTH_FACTOR = 2
HYBRID_RELAXED_WORDS: int | None = 3
# Hybrid's relaxed tier first reads the newest this many visible matches of the
# question's words (None: rank every match, as keyword search does): at 100k facts an OR
# of common words matches thousands, and ranking them all is most of the keyword half's
# cost (bench/hybrid_cost.py). The window is also a sample of the reader's own matches:
# the words that at most RARE_IN_WINDOW of its facts hold are ranked again in full, by
# bm25 over every visible fact holding them, so an old fact holding the rare word the
# question is about is found wherever it sits in the memory.
HYBRID_RELAXED_WINDOW: int | None = 100
# One fact of the window: a word held more often than that has its newest facts in the
# window already, and ranking it in full costs in proportion to its matches (a word held
# by a tenth of the window made the keyword half 6.5-7.7 ms at 100k facts, more than
# ranking every match; by at most one, ~4 ms against 2.9 for the window alone).
RARE_IN_WINDOW = 1
# The window reads at most this many of the question's words (its longest): each one
# is a doclist FTS5 merges newest first.
WINDOW_WORDS = 8


@dataclass(frozen=True)
class Centering:
    """How hybrid's semantic half takes out what the question's nearest facts share.

    Facts near a question share much that does not answer it: in a conversation, every
    turn of the speaker it names ("Felix: Tell me about it." sits near any question
    about Felix, above the turn that answers it). The half reads `depth` nearest facts
    (by cosine, above the floor) and orders them by the question less `weight` times
    the mean of its `head` nearest: cosine(q, f) - weight * cosine(mean, f). What every
    candidate shares moves no one; what the question asks beyond it decides.

    bench.quality's dev split, eight views (python -m bench.fusion_explore), recall@5 /
    MRR@10 of hybrid before -> after: minilm-l6 0.462/0.312 -> 0.613/0.415; worded
    0.584/0.460 -> 0.680/0.501; long 0.424/0.304 -> 0.559/0.392; long worded
    0.603/0.520 -> 0.675/0.559; the lexical test embedder about level (0.360/0.247 ->
    0.373/0.240, worded 0.538/0.472 -> 0.540/0.462). Depth 20, 40 and 60 gave a third,
    three fifths and five sixths of it; a mean of 20, the same; a weight of 0.6 a
    little more on the model's views and less on the lexical ones, 0.25, 0.75 and 1.0
    less: 0.5 sits in the middle of the plateau. The mean and
    the candidates are the reader's own visible facts: nothing the reader cannot see
    moves the order.
    """

    depth: int = 100
    head: int = 10
    weight: float = 0.5


CENTERING = Centering()
# Words that carry no topic: they never decide whether a fact matches (a fact that
# shares only "the" or "or" with a question is not an answer to it). Question words
# are here too, since agents ask in sentences. Single letters (the "s" of "what's",
# which the tokenizer splits off) count as stop words as well.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been
    before being below between both but by can could did do does doing don down
    during each few for from further had has have having he her here hers herself
    him himself his how i if in into is it its itself just me more most my myself no
    nor not now of off on once only or other our ours ourselves out over own same
    she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when
    where which while who whom why will with would you your yours yourself
    yourselves
    """.split()  # noqa: SIM905 (a list of 130 strings reads worse)
)
_TERM = re.compile(r"\w", re.UNICODE)
_WORD = re.compile(r"\w+", re.UNICODE)


def _invalid(field: str, message: str) -> InvalidInput:
    return InvalidInput(message, errors=[{"loc": [field], "msg": message}])


def fts_chunks(q: str) -> list[str]:
    """User text -> FTS5 strings that cannot raise: each word-bearing chunk quoted
    (quotes doubled), so operators, parentheses and stray quotes are just text."""
    chunks = [c for c in q.replace("\x00", " ").split() if _TERM.search(c)]
    unique = list(dict.fromkeys(chunks))[:MAX_TERMS]
    return ['"' + c.replace('"', '""') + '"' for c in unique]


@dataclass(frozen=True)
class Scope:
    """Which facts a search may return: those the subject may read, current, and
    within the request's filters. Statements over it are built once per subject and
    filters (app.db.statements) and kept in the subject's Access."""

    ctx: Context
    under: str | None = None
    tags: tuple[str, ...] = ()
    min_strength: float | None = None
    # Current at this moment (UNIX seconds) rather than now: see visibility.current_only.
    as_of: float | None = None
    # Created inside this span (the time a question names), when set.
    created: Window | None = None

    @property
    def _holds_time(self) -> bool:
        """A minimum strength is a test against the time now, and `as_of` and a span
        hold moments too: no statement to keep."""
        return (
            (self.min_strength is not None and self.min_strength > 0)
            or self.as_of is not None
            or self.created is not None
        )

    def clauses(self) -> list[Any]:
        clauses = [visible_current(self.ctx, self.as_of), *fact_service.tag_filters(self.tags)]
        if self.created is not None:
            clauses += _created_within(self.created.start, self.created.end)
        scope = fact_service.subtree_filter(self.under)
        if scope is not None:
            clauses.append(scope)
        if self.min_strength is not None and self.min_strength > 0:
            # strength >= m  <=>  elapsed/stability <= -ln(m)
            clauses.append(decay_sql(self.ctx.clock()) <= -math.log(self.min_strength))
        return clauses

    def statement(self, kind: str, build: Callable[[list[Any]], Any]) -> Any:
        """The statement `build` makes from the clauses, kept unless it holds the time."""
        if self._holds_time:
            return build(self.clauses())
        key = (kind, self.under, self.tags)
        return self.ctx.access.statements.get(key, lambda: build(self.clauses()))


def _visible(conn: Connection, scope: Scope, ids: Sequence[int]) -> set[int]:
    """The ids among `ids` that the scope keeps (ACL included)."""
    if not ids:
        return set()
    ids_in = backend(conn).ids_in

    def build(clauses: list[Any]) -> Any:
        return select(facts.c.id).where(ids_in(facts.c.id, "ids"), *clauses)

    stmt = scope.statement("visible", build)
    return set(conn.execute(stmt, {"ids": list(ids)}).scalars())


def _visible_vectors(conn: Connection, scope: Scope, ids: Sequence[int]) -> dict[int, bytes]:
    """The stored vectors of the facts among `ids` that the scope keeps (ACL included)
    and that have one, by id: the access check and the read in one statement."""
    if not ids:
        return {}
    ids_in = backend(conn).ids_in

    def build(clauses: list[Any]) -> Any:
        return select(facts.c.id, facts.c.embedding).where(
            ids_in(facts.c.id, "ids"), *clauses, facts.c.embedding.is_not(None)
        )

    stmt = scope.statement("visible-vectors", build)
    return {fid: blob for fid, blob in conn.execute(stmt, {"ids": list(ids)})}


def _fts_ranked(
    conn: Connection, scope: Scope, chunks: list[str], want: int, *, any_word: bool = False
) -> list[tuple[int, float]]:
    """Best bm25 first among visible facts: rank in the keyword index alone (fast), then
    keep the visible candidates; widen until `want` are found or the matches run out."""
    keywords = backend(conn).keywords
    fetch = max(4 * want, 40)
    while True:
        candidates = keywords.ranked(conn, chunks, any_word=any_word, limit=fetch)
        keep = _visible(conn, scope, [c[0] for c in candidates])
        ranked = [(int(fid), float(bm25)) for fid, bm25 in candidates if fid in keep]
        if len(ranked) >= want or len(candidates) < fetch:
            ranked.sort(key=lambda pair: (pair[1], pair[0]))
            return ranked[:want]
        fetch *= 4


def _newest_matches(
    conn: Connection, scope: Scope, chunks: list[str], window: int
) -> list[tuple[int, float, str]]:
    """(fact id, bm25, content) of the `window` newest visible facts holding any chunk.

    An OR of common words matches a large share of a big memory, and FTS5 scores every
    match before it can sort them (p50 6.5 ms for a median of 2,800 matches at 100k
    facts, growing with the memory). Read newest first, the access rules and filters
    applied in the same statement, it stops after `window` visible matches and scores
    those alone. Which facts are in the window depends on facts the reader can see alone.
    """
    keywords = backend(conn).keywords
    stmt = scope.statement(
        f"newest-{len(chunks)}", lambda clauses: keywords.newest_statement(clauses, len(chunks))
    )
    rows = conn.execute(stmt, keywords.newest_params(chunks, window)).all()
    return [(int(fid), float(score), content) for fid, score, content in rows]


def _relaxed_by_window(
    conn: Connection,
    scope: Scope,
    content: list[str],
    want: int,
    window: int,
    most: int | None,
    wanted: set[str],
    held: dict[int, set[str]],
) -> list[tuple[int, float]]:
    """The relaxed tier at a bounded cost, best first: facts holding any of the words.

    The `window` newest visible matches come first (never fewer than `want`). When they
    are all the visible matches, they are ranked by bm25 and that is the tier. Otherwise
    the window is a sample of the reader's matches: the words that at most
    RARE_IN_WINDOW of its facts hold (not a speaker's name on every turn, nor a word of
    every fact in a project), the `most` that fewest of them hold, are ranked by bm25
    over every visible fact holding them, wherever it sits in time, ahead of the
    window's own order. A rare word's doclist is short, so this costs little; a question
    whose words the window holds often keeps the window's order. Every count here is
    over facts the reader can see. The query's content words (`wanted`, stemmed) each
    window fact holds go into `held` (by fact id), for the fusion to reuse.
    """
    longest = _longest(content, WINDOW_WORDS)
    size = max(window, want)
    sample = _newest_matches(conn, scope, longest, size)
    in_window = sorted(((fid, bm25) for fid, bm25, _ in sample), key=lambda p: (p[1], p[0]))
    held.update(_held_in({fid: text for fid, _, text in sample}, wanted))
    if len(sample) < size:
        return in_window[:want]  # every visible match is in the window
    stems = {c: _content_stems(c) for c in content}
    held_by = {
        c: sum(bool(need) and need <= held[fid] for fid, _, _ in sample)
        for c, need in stems.items()
    }
    rare = [c for c in content if held_by[c] <= RARE_IN_WINDOW]
    if not rare:
        return in_window[:want]
    rare.sort(key=lambda c: (held_by[c], -len(c), content.index(c)))
    ranked = _fts_ranked(conn, scope, rare[:most] if most else rare, want, any_word=True)
    taken = {fid for fid, _ in ranked}
    return (ranked + [pair for pair in in_window if pair[0] not in taken])[:want]


def _longest(chunks: list[str], most: int) -> list[str]:
    """The `most` longest chunks (the first among equals): a rarity proxy that reads the
    query alone."""
    return sorted(chunks, key=lambda c: (-len(c), chunks.index(c)))[:most]


def _is_content_word(word: str) -> bool:
    """A lowercased word that carries a topic: no stop word, no single letter (a number
    does)."""
    return (len(word) > 1 and word not in STOPWORDS) or word.isdigit()


def _is_content(chunk: str) -> bool:
    """A chunk carries a topic when one of its words is not a stop word."""
    return any(_is_content_word(word) for word in _WORD.findall(chunk.lower()))


@dataclass(frozen=True)
class KeywordHit:
    fact_id: int
    all_words: bool  # holds every content word of the query (the strict tier)


def keyword_ranking(
    conn: Connection,
    scope: Scope,
    q: str,
    want: int,
    *,
    relax: bool = True,
    relaxed_words: int | None = None,
    relaxed_window: int | None = None,
    held: dict[int, set[str]] | None = None,
) -> list[KeywordHit]:
    """Up to `want` visible facts, best first: those holding every content word, then
    (with `relax`), when fewer than `want` visible facts hold them all, those holding
    any of them.

    Stop words never decide a match. Which words are asked for, and whether the
    relaxed tier runs, depend on the query and on facts the reader can see only:
    no document frequency or other whole-memory count chooses anything here. The
    ORDER within a tier is FTS5's bm25, whose statistics (document frequencies,
    average length) cover the whole table: that residual channel is documented
    in the README ("Search"). Callers get positions, never bm25 values. With a
    window, the content words each fact of it holds go into `held`.
    """
    chunks = fts_chunks(q)
    if not chunks:
        return []
    content = [c for c in chunks if _is_content(c)]
    # A query of stop words alone ("to be or not to be") must hold all of them.
    strict = _fts_ranked(conn, scope, content or chunks, want)
    hits = [KeywordHit(fid, True) for fid, _ in strict]
    if not relax or len(hits) >= want or len(content) < 2:
        return hits
    # Every strict match is also a relaxed one: ask for that many more.
    seen = {hit.fact_id for hit in hits}
    if relaxed_window is None:
        # An OR over many words ranks every fact holding any of them (its cost grows
        # with their doclists): with `relaxed_words`, only the longest words of the
        # query, a rarity proxy that reads the query alone.
        words = content
        if relaxed_words is not None and len(content) > relaxed_words:
            words = _longest(content, relaxed_words)
        relaxed = _fts_ranked(conn, scope, words, want + len(hits), any_word=True)
    else:
        relaxed = _relaxed_by_window(
            conn,
            scope,
            content,
            want + len(hits),
            relaxed_window,
            relaxed_words,
            _content_stems(q),
            {} if held is None else held,
        )
    hits += [KeywordHit(fid, False) for fid, _ in relaxed if fid not in seen]
    return hits[:want]


def _exact(
    conn: Connection,
    scope: Scope,
    query: np.ndarray,
    ids: Sequence[int] | None,
    known: Mapping[int, bytes] | None = None,
) -> list[tuple[int, float]]:
    """Cosine distance for the facts among `ids` (checked before; `known`: their stored
    vectors read already), or for every fact the scope keeps when `ids` is None."""
    if ids is None:
        stmt = scope.statement(
            "embedded",
            lambda clauses: select(facts.c.id, facts.c.embedding).where(
                *clauses, facts.c.embedding.is_not(None)
            ),
        )
        blobs = {fid: blob for fid, blob in conn.execute(stmt)}
        found, matrix = _stacked(list(blobs), blobs, query.shape[0])
    else:
        found, matrix = _stacked(ids, _blobs_of(conn, ids, known), query.shape[0])
    distances = 1.0 - matrix @ query
    return [(fid, float(d)) for fid, d in zip(found, distances, strict=True)]


def _blobs_of(
    conn: Connection, ids: Sequence[int], known: Mapping[int, bytes] | None = None
) -> dict[int, bytes]:
    """The stored vectors of the facts among `ids` (checked before) that have one, by
    id: those in `known` (read already) as they are, the others read here."""
    blobs = {fid: known[fid] for fid in ids if fid in known} if known else {}
    missing = [fid for fid in ids if fid not in blobs]
    if not missing:
        return blobs
    bk = backend(conn)
    stmt = bk.statements.get(
        "embeddings",
        lambda: select(facts.c.id, facts.c.embedding).where(
            bk.ids_in(facts.c.id, "ids"), facts.c.embedding.is_not(None)
        ),
    )
    blobs.update({fid: blob for fid, blob in conn.execute(stmt, {"ids": missing})})
    return blobs


def _stacked(
    ids: Sequence[int], blobs: Mapping[int, bytes], width: int
) -> tuple[list[int], np.ndarray]:
    """The ids among `ids` whose blob holds a vector of `width`, in that order, and those
    vectors, one row each (a fact embedded by another model has another width)."""
    found = [fid for fid in ids if fid in blobs and len(blobs[fid]) == 4 * width]
    if not found:
        return found, np.empty((0, width), np.float32)
    return found, unpack_blobs([blobs[fid] for fid in found])


def semantic_ranking(
    conn: Connection,
    scope: Scope,
    index: VectorIndex,
    query: np.ndarray,
    want: int,
    *,
    rescore: bool = True,
    vectors: dict[int, bytes] | None = None,
) -> list[tuple[int, float]]:
    """(fact id, cosine distance) nearest first, among visible facts that match filters.

    The index hands out candidates from the cells nearest the query, best first by
    their int8 approximations; each chunk is checked against the filters in SQL
    until enough visible ones are found, and the best of those are scored exactly
    from their stored vectors, which the statement that checks them hands out (unless
    not `rescore`: the order and distances are the int8 approximation's, for a caller
    that scores them itself from `vectors`, where the checked candidates' vectors go
    by id). When the filters keep so few facts that finding enough would mean
    examining more than a quarter of the index, every visible fact is scored instead:
    a page never starves.
    """
    index.refresh(conn)
    probe = index.probe(query)
    needed = max(want * EXACT_RERANK, MIN_RESCORED) if rescore else want
    blobs: dict[int, bytes] = {} if vectors is None else vectors
    visible: list[tuple[int, float]] = []
    seen: set[int] = set()
    examined = 0
    # Wide enough that a subject who sees half the memory needs one round.
    chunk = 2 * needed
    while len(visible) < needed:
        ranked, similarity = probe.ranked(max(POOL, round(POOL_SHARE * probe.total)), RANKED_HEAD)
        if len(ranked) == 0:
            break
        start = 0
        while start < len(ranked):
            batch = [
                (fid, 1.0 - float(sim))
                for fid, sim in zip(
                    ranked[start : start + chunk].tolist(),
                    similarity[start : start + chunk].tolist(),
                    strict=True,
                )
                if fid not in seen
            ]
            seen.update(fid for fid, _ in batch)
            examined += len(batch)
            kept = _visible_vectors(conn, scope, [f for f, _ in batch])
            blobs.update(kept)
            visible += [pair for pair in batch if pair[0] in kept]
            missing = needed - len(visible)
            if missing <= 0:
                break
            # The share of visible facts so far tells how far the rest would go.
            share = max(len(visible), 1) / max(examined, 1)
            if examined + missing / share > probe.total / 4:
                return _best(_exact(conn, scope, query, None), want)
            start += chunk
            chunk *= 2
    if len(visible) < want and examined < probe.total:
        # Every cell taken, yet some visible facts were not among any cell's best.
        return _best(_exact(conn, scope, query, None), want)
    if not rescore:
        return _best(visible, want)
    best = [fid for fid, _ in _best(visible, needed)]
    return _best(_exact(conn, scope, query, best, blobs), want)


def _best(scored: list[tuple[int, float]], want: int) -> list[tuple[int, float]]:
    scored.sort(key=lambda pair: (pair[1], pair[0]))
    return scored[:want]


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
    # Semantic candidates under this cosine are no match (search.min_cosine); -1 keeps all.
    min_cosine: float = -1.0
    # The time span the question names ("last week"), which boosts facts created in it.
    window: Window | None = None
    # Search the memory as it stood at this moment (UNIX seconds, checked by
    # facts.moment); never a recall.
    as_of: float | None = None


@dataclass(frozen=True)
class Ranking:
    mode: Mode
    order: list[tuple[int, float]]  # (fact id, the score it was ranked by), best first
    scores: dict[int, dict[str, Any]]  # the page's facts only
    sort: SearchSort = "relevance"
    as_of: float | None = None


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
    cache: QueryCache | None = None,
    min_cosine: float = -1.0,
    now: float | None = None,
    embed_now: bool = True,
    as_of: float | None = None,
) -> Query:
    """Check the request and embed the query text: model time, spent before any
    transaction opens, so a search never holds the database while the model runs.

    The query is embedded once (or taken from `cache`), and both halves of a
    hybrid search share that vector. With `embed_now` false, only checked: embed()
    it later (a hybrid search ranks its keyword half meanwhile).
    """
    check_limit(limit)
    check_query(q, MAX_QUERY_CHARS)
    if min_strength is not None and not 0 <= min_strength <= 1:
        raise _invalid("min_strength", "min_strength must be between 0 and 1")
    # The filters are made into SQL only when a statement needs them (Scope): check
    # them here, so that a bad one is refused whatever the memory holds.
    if under:
        fold_path(under, field="under")
    for tag in tags or ():
        parse_tag_filter(tag)
    mode = mode or ("hybrid" if embedder is not None else "keyword")
    if mode in ("semantic", "hybrid") and embedder is None:
        reason = model_problem or "no embedding model is loaded"
        raise Unavailable(f"{mode} search needs an embedding model: {reason}")
    span = timewords.window(q, now) if now is not None and mode != "keyword" else None
    query = Query(
        q,
        mode,
        limit,
        None,
        under,
        tuple(tags or ()),
        min_strength,
        sort,
        min_cosine,
        span,
        as_of,
    )
    return embed(query, embedder, cache) if embed_now else query


def embed(query: Query, embedder: Embedder | None, cache: QueryCache | None = None) -> Query:
    """The query with its vector, when its mode needs one (checked by prepare())."""
    if query.mode == "keyword":
        return query
    assert embedder is not None
    if cache is not None:
        vector = cache.embed_query(embedder, query.q)
    else:
        vector = np.asarray(embedder.embed_query(query.q), dtype=np.float32)
    return dataclasses.replace(query, vector=vector)


def keyword_score(position: int) -> float:
    """1 for the best keyword match, 1/2 for the next...: a rank, never a statistic."""
    return 1.0 / position


_SUFFIXES = ("ing", "ed", "es", "er", "ly", "s")


def _stem(word: str) -> str:
    """A light stemmer, enough to tell which of a query's words a fact holds (FTS5's
    porter decided that it matches; this only counts how many words it holds)."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def _content_stems(text: str) -> set[str]:
    return {_stem(word) for word in _WORD.findall(text.lower()) if _is_content_word(word)}


def held_words(
    conn: Connection, q: str, ids: Sequence[int], known: Mapping[int, set[str]] | None = None
) -> tuple[set[str], dict[int, set[str]]]:
    """The query's content words (stemmed), and for each fact among `ids` (visible
    already) the ones it holds: the facts and the query alone decide it. `known` holds
    some facts' words already (the relaxed window's, for the same query): those are not
    read again."""
    wanted = _content_stems(q)
    if not wanted or not ids:
        return wanted, {}
    known = known or {}
    held = {fid: known[fid] for fid in ids if fid in known}
    missing = [fid for fid in ids if fid not in known]
    if missing:
        held.update(_held_in(_contents(conn, missing), wanted))
    return wanted, held


def _held_in(contents: Mapping[int, str], wanted: set[str]) -> dict[int, set[str]]:
    """For each fact, the stems among `wanted` its content holds."""
    if not wanted:
        return {fid: set() for fid in contents}
    # Only the words that start like a wanted stem can stem to one: one regex pass a
    # fact finds them (stemming every word of 100 facts in Python cost ~3 ms a search).
    alternation = "|".join(re.escape(stem) for stem in sorted(wanted, key=len, reverse=True))
    starts = re.compile(rf"\b(?:{alternation})\w*")
    return {
        fid: _stems_among(starts.findall(text.lower()), wanted) for fid, text in contents.items()
    }


def _stems_among(words: Iterable[str], wanted: set[str]) -> set[str]:
    """The stems of `words` (content words only, as _content_stems keeps) in `wanted`."""
    return {_stem(word) for word in words if _is_content_word(word)} & wanted


def rarity_shares(wanted: set[str], held: dict[int, set[str]]) -> dict[int, float]:
    """How much of the question each keyword match holds, each word weighed by how rare
    it is among the matches (log((n + 1) / (df + 0.5)), n matches, df of them holding
    it): a match on the speaker's name that every fact carries counts for little, one
    on the rare word the question is about for much. Counted over the reader's own
    matches only, so no fact it cannot see weighs in. The sums are fsum's, exact to the
    last bit whatever order a set hands its words out in: with plain sums, two shares
    meant equal could differ in their last bit from one process to the next (str hashes
    are salted), and a tie broke one way or the other."""
    pool = len(held)
    rarity = {w: math.log((pool + 1) / (sum(w in h for h in held.values()) + 0.5)) for w in wanted}
    total = math.fsum(rarity.values()) or 1.0
    return {fid: math.fsum(rarity[w] for w in words) / total for fid, words in held.items()}


@dataclass(frozen=True)
class Fusion:
    """How hybrid search weighs its halves: reciprocal rank fusion, the sum of
    weight / (k + position) over the keyword and the semantic ranking.

    A keyword match weighs its share of the question's words (rarity_shares): on
    bench.quality's dev split (python -m bench.fusion_explore) that lifted hybrid
    recall@5 from 0.405 (the strict tier alone, main before) and 0.357 (both tiers at
    full weight) to 0.426, where semantic alone gave 0.405; a plain share (every word
    alike) gave 0.388-0.425. A fact created inside the time span the question names
    gets `time_boost` times its score on top (temporal recall@5 0.420 -> 0.460, the
    same from 0.5 to 2); the boost moves facts, never removes one.

    Each half also weighs by how sure it is, per question (half_weights). Weighed by
    share alone, the keyword half counted at most half as much as the semantic one
    (a best share is ~0.4), so when the model is the weaker half (questions that
    name their thing, long conversations, a lexical model) hybrid fell below keyword
    alone: -0.08 recall@5 on dev's long conversations with the lexical test embedder.
    When the halves agree (the semantic half's best is among the keyword half's first
    `agree_at`), the shares alone order them, as before. When they do not, and the
    best keyword match holds `sure_share` of the question or more, each match weighs
    its share relative to the best one, and the semantic half weighs by how far its
    best cosine stands above its tenth (`spread` of cosine for full weight, `least` at
    the least); under `unsure_share`, the shares alone; in between, a linear blend.
    Dev split, recall@5 / MRR@10, SHARES_ONLY -> FUSION: minilm-l6 0.436/0.301 ->
    0.439/0.297; lexical embedder 0.310/0.226 -> 0.348/0.239; long conversations,
    minilm-l6 0.368/0.275 -> 0.374/0.271 and lexical 0.237/0.190 -> 0.294/0.207
    (python -m bench.fusion_explore [--long] [--model fake]).

    Agreement needs the semantic half's best to hold the most of the question any match
    holds, and the page shows each text once before any text again (each_text_once):
    on bench.quality's dev split, eight views (minilm-l6 and the lexical embedder,
    usual and `--long`, paraphrased and `--worded`), recall@5 rose on every one
    (0.439 -> 0.453 with minilm-l6; 0.573 -> 0.603 worded and long), and MRR@10 on
    seven (level on the eighth).

    A question that names a time span gets a third ranking: the nearest facts created
    in the span (the semantic half's search under one more filter), fused in full. On
    dev, 58% of the evidence of such temporal questions was in neither half with
    minilm-l6, 86% in the long conversations; recall@5 0.453 -> 0.462, long 0.399 ->
    0.424.

    Positions, the reader's own matches and the semantic half's own cosines decide it
    all: no whole-memory statistic enters a fused score.
    """

    k: float = RRF_K
    keyword: float = 1.0
    semantic: float = 1.0
    time_boost: float = 1.0
    # None: every keyword match weighs its share, the semantic half in full.
    unsure_share: float | None = 0.2
    sure_share: float = 0.3
    spread: float = 0.3
    least: float = 0.3
    # The candidate whose cosine the best's is measured against: the tenth (a page's
    # length), or the last of fewer.
    spread_at: int = 10
    # The semantic half's best among the keyword half's first `agree_at`, holding the best
    # share: the halves agree.
    agree_at: int = 3

    def __post_init__(self) -> None:
        if self.unsure_share is not None and not self.unsure_share < self.sure_share:
            raise ValueError("a Fusion's unsure_share must be under its sure_share")


FUSION = Fusion()
# The fusion before per-question weights (bench.fusion_explore compares the two).
SHARES_ONLY = dataclasses.replace(FUSION, unsure_share=None)


@dataclass(frozen=True)
class HalfWeights:
    """One question's weights: `keyword[fid]` for each keyword match, `semantic` for
    every semantic candidate."""

    keyword: dict[int, float]
    semantic: float


def half_weights(
    keyword: Sequence[KeywordHit],
    semantic: Sequence[tuple[int, float]],
    fusion: Fusion,
    shares: Mapping[int, float] | None,
) -> HalfWeights:
    """How much each half of one question's fusion counts (see Fusion)."""
    if shares is None:
        return HalfWeights({hit.fact_id: 1.0 for hit in keyword}, 1.0)
    share = {hit.fact_id: shares.get(hit.fact_id, 0.0) for hit in keyword}
    best = max(share.values(), default=0.0)
    if fusion.unsure_share is None or best <= 0.0:
        return HalfWeights(share, 1.0)
    # Agreement is the semantic half's best among the keyword half's first `agree_at`
    # AND holding the most of the question any match holds: a short reply ("Don't get
    # me started.") that shares one common word with the question is close to any
    # question about its speaker, and agrees with nothing.
    agreed = {hit.fact_id for hit in keyword[: fusion.agree_at] if share[hit.fact_id] >= best}
    if semantic and semantic[0][0] in agreed:
        return HalfWeights(share, 1.0)  # both halves point at the same place
    low, high = fusion.unsure_share, fusion.sure_share
    sure = min(1.0, max(0.0, (best - low) / (high - low)))
    cosines = [1.0 - distance for _, distance in semantic[: fusion.spread_at]]
    spread = cosines[0] - cosines[-1] if cosines else 0.0
    semantic_weight = min(1.0, max(fusion.least, spread / fusion.spread))
    return HalfWeights(
        {fid: (1.0 - sure) * s + sure * s / best for fid, s in share.items()},
        (1.0 - sure) + sure * semantic_weight,
    )


def fuse(
    keyword: Sequence[KeywordHit],
    semantic: Sequence[tuple[int, float]],
    limit: int | None,
    fusion: Fusion = FUSION,
    shares: Mapping[int, float] | None = None,
    in_window: frozenset[int] = frozenset(),
    in_span: Sequence[tuple[int, float]] = (),
) -> list[tuple[int, float]]:
    """Weighted reciprocal rank fusion of the two halves, best first, `limit` of them
    (None: every candidate). Without `shares` every keyword match weighs in full.
    `in_span` is a third ranking, the nearest facts created in the span the question
    names, each in full (see Fusion)."""
    weights = half_weights(keyword, semantic, fusion, shares)
    fused: dict[int, float] = {}
    for position, hit in enumerate(keyword, start=1):
        fused[hit.fact_id] = fusion.keyword * weights.keyword[hit.fact_id] / (fusion.k + position)
    for position, (fid, _) in enumerate(semantic, start=1):
        weight = fusion.semantic * weights.semantic
        fused[fid] = fused.get(fid, 0.0) + weight / (fusion.k + position)
    for position, (fid, _) in enumerate(in_span, start=1):
        fused[fid] = fused.get(fid, 0.0) + fusion.semantic / (fusion.k + position)
    for fid in in_window & fused.keys():
        fused[fid] *= 1.0 + fusion.time_boost
    return sorted(fused.items(), key=lambda pair: (-pair[1], pair[0]))[:limit]


def each_text_once(
    order: Sequence[tuple[int, float]], text_of: Mapping[int, str], limit: int
) -> list[tuple[int, float]]:
    """The first `limit` of `order` with every text shown once before any is shown again:
    a fact whose content repeats a better one's word for word goes after every other
    candidate (in its order), never off the list while there is room. A conversation's
    short replies ("Anything new?") repeat, and each copy sits at the same cosine to any
    question about its speaker: five of them took five places of a page."""
    seen: set[str] = set()
    first: list[tuple[int, float]] = []
    again: list[tuple[int, float]] = []
    for pair in order:
        text = text_of[pair[0]]
        (again if text in seen else first).append(pair)
        seen.add(text)
        if len(first) >= limit:
            break
    return (first + again)[:limit]


def _page_of_texts(
    conn: Connection, fused: Sequence[tuple[int, float]], limit: int
) -> list[tuple[int, float]]:
    """each_text_once over `fused`, reading the candidates' contents only as deep as the
    page needs: twice its length first (one read, almost always the last), then twice
    as deep until `limit` distinct texts are found or the candidates run out."""
    texts: dict[int, str] = {}
    # A candidate whose row is gone since its half ranked (an import that replaces the
    # memory) is left out here, as deliver() would leave it out.
    kept: list[tuple[int, float]] = []
    read = 0
    while True:
        deeper = min(len(fused), max(2 * limit, 2 * read))
        chunk = fused[read:deeper]
        texts.update(_contents(conn, [fid for fid, _ in chunk]))
        kept += [pair for pair in chunk if pair[0] in texts]
        read = deeper
        page = each_text_once(kept, texts, limit)
        if read == len(fused) or len({texts[fid] for fid, _ in page}) >= limit:
            return page


def _contents(conn: Connection, ids: Sequence[int]) -> dict[int, str]:
    """Each fact's content, for the facts among `ids` (visible already)."""
    if not ids:
        return {}
    bk = backend(conn)
    stmt = bk.statements.get(
        "contents",
        lambda: select(facts.c.id, facts.c.content).where(bk.ids_in(facts.c.id, "ids")),
    )
    return {row.id: row.content for row in conn.execute(stmt, {"ids": list(ids)})}


def _created_within(start: Any, end: Any) -> list[Any]:
    """Created at `start` or later and before `end` (values or bound parameters)."""
    return [facts.c.created_at >= start, facts.c.created_at < end]


def _created_in(conn: Connection, ids: Sequence[int], window: Window | None) -> frozenset[int]:
    """The facts among `ids` (visible already) created inside `window`."""
    if window is None or not ids:
        return frozenset()
    bk = backend(conn)
    stmt = bk.statements.get(
        "created-in",
        lambda: select(facts.c.id).where(
            bk.ids_in(facts.c.id, "ids"), *_created_within(bindparam("start"), bindparam("end"))
        ),
    )
    params = {"ids": list(ids), "start": window.start, "end": window.end}
    return frozenset(conn.execute(stmt, params).scalars())


@dataclass(frozen=True)
class KeywordHalf:
    """The keyword half of a hybrid search: both tiers' matches, best first, and the
    share of the question each one holds."""

    hits: list[KeywordHit]
    shares: dict[int, float]


def _hybrid_depth(limit: int) -> int:
    return max(HYBRID_DEPTH_FACTOR * limit, HYBRID_DEPTH)


def untimed(query: Query) -> str:
    """The question less the words that name its time span ("last week"): they choose
    the span the time boost favours, and name no topic a fact should hold."""
    if query.window is None:
        return query.q
    return query.q.replace(query.window.words, " ", 1)


def keyword_half(conn: Connection, ctx: Context, query: Query) -> KeywordHalf:
    """Rank the keyword half of hybrid `query`: it needs no vector, so it can run (in a
    snapshot of its own) while the query is embedded and the semantic half ranks."""
    scope = Scope(ctx, query.under, tuple(query.tags), query.min_strength, query.as_of)
    depth = _hybrid_depth(query.limit)
    words = untimed(query)
    window_held: dict[int, set[str]] = {}
    hits = keyword_ranking(
        conn,
        scope,
        words,
        depth,
        relaxed_words=HYBRID_RELAXED_WORDS,
        relaxed_window=HYBRID_RELAXED_WINDOW,
        held=window_held,
    )
    wanted, held = held_words(conn, words, [hit.fact_id for hit in hits], window_held)
    shares = rarity_shares(wanted, held)
    # The half's order is the share of the question each match holds (a strict match
    # holds all of it), bm25's order among equal shares: a match on the rare word the
    # question is about ranks above one on the name every fact carries, whichever tier
    # or bm25 put first. bench.quality's dev split: MRR@10 0.292 -> 0.298 with the same
    # recall (minilm-l6), 0.211 -> 0.220 with the lexical test embedder.
    hits.sort(key=lambda hit: -shares.get(hit.fact_id, 0.0))
    return KeywordHalf(hits, shares)


def semantic_half(
    conn: Connection,
    ctx: Context,
    query: Query,
    index: VectorIndex,
    *,
    in_span: bool = False,
    centering: Centering = CENTERING,
) -> list[tuple[int, float]]:
    """(fact id, cosine distance), as deep as `query`'s mode ranks; a candidate under the
    query's cosine floor is no match, in semantic and hybrid alike. Semantic search is
    nearest first; hybrid's half is `centering.depth` deep, in the order of
    centered(). With `in_span`, among the facts created in the span the question names
    only (hybrid: the half's usual depth, centered too)."""
    assert query.vector is not None
    span = query.window if in_span else None
    scope = Scope(ctx, query.under, tuple(query.tags), query.min_strength, query.as_of, span)
    hybrid = query.mode == "hybrid"
    depth = _hybrid_depth(query.limit) if hybrid else query.limit
    if hybrid and not in_span:
        depth = max(depth, centering.depth)
    vectors = backend(conn).vectors
    few = _few_in_span(conn, scope) if span is not None and not vectors.in_database else None
    # Hybrid: the access check hands out the candidates' vectors, and centered() scores
    # them exactly (any it lacks, it reads).
    blobs: dict[int, bytes] = {}
    if few is not None:
        nearest = _best(_exact(conn, scope, query.vector, few), depth)
    elif vectors.in_database:
        nearest = vectors.nearest(conn, scope.clauses(), query.vector, depth)
    else:
        nearest = semantic_ranking(
            conn, scope, index, query.vector, depth, rescore=not hybrid, vectors=blobs
        )
    if not hybrid:
        return [(fid, d) for fid, d in nearest if 1.0 - d >= query.min_cosine]
    ids = [fid for fid, _ in nearest]
    return centered(conn, query.vector, ids, query.min_cosine, centering, known=blobs)


def centered(
    conn: Connection,
    query: np.ndarray,
    ids: Sequence[int],
    min_cosine: float,
    centering: Centering = CENTERING,
    known: Mapping[int, bytes] | None = None,
) -> list[tuple[int, float]]:
    """The facts among `ids` (visible, checked before) at `min_cosine` or more to the
    question, with their cosine distance, in the order of the question less what its
    nearest share (see Centering). A fact whose vector is gone is left out. `known`:
    stored vectors read already, by id (the others are read here)."""
    found, matrix = _stacked(ids, _blobs_of(conn, ids, known), query.shape[0])
    similarity = matrix @ query
    nearest = sorted(
        (i for i in range(len(found)) if similarity[i] >= min_cosine),
        key=lambda i: (-similarity[i], found[i]),
    )
    if not nearest:
        return []
    matrix = matrix[nearest]
    scores = centered_scores(query, matrix, centering)
    order = sorted(range(len(nearest)), key=lambda i: (-scores[i], i))
    return [(found[nearest[i]], float(1.0 - similarity[nearest[i]])) for i in order]


def centered_scores(query: np.ndarray, matrix: np.ndarray, centering: Centering) -> np.ndarray:
    """cosine(q, f) - weight * cosine(mean of the `head` first rows, f), for each row f
    of `matrix` (unit vectors, nearest first)."""
    similarity = matrix @ query
    if centering.weight == 0.0:
        return similarity
    common = matrix[: centering.head].mean(axis=0)
    norm = float(np.linalg.norm(common))
    if norm == 0.0:
        return similarity
    return similarity - centering.weight * (matrix @ (common / norm))


# A span holding at most this many visible facts is scored exactly, fact by fact (their
# vectors read by id), without walking the index: "yesterday" or "last week" in a
# memory of many months holds few, and a walk whose filter keeps almost nothing probes
# the index first before it falls back to the same (10k facts, a span holding none:
# +2.5 ms a search with the walk, +1.0 with this). Counting more costs more when the
# span holds everything ("in 2026": +4.3 ms with 200, +10 with 2,000).
SPAN_EXACT = 200


def _few_in_span(conn: Connection, scope: Scope) -> list[int] | None:
    """The visible facts of the scope's span, when there are at most SPAN_EXACT."""
    stmt = select(facts.c.id).where(*scope.clauses()).limit(SPAN_EXACT + 1)
    ids = list(conn.execute(stmt).scalars())
    return ids if len(ids) <= SPAN_EXACT else None


def rank(
    conn: Connection,
    ctx: Context,
    query: Query,
    index: VectorIndex,
    fusion: Fusion = FUSION,
    *,
    keyword: KeywordHalf | None = None,
    semantic: list[tuple[int, float]] | None = None,
) -> Ranking:
    """Rank the facts the subject may see; reads only (a read transaction will do).

    Each half runs once (here, unless `keyword` or `semantic` brings it, ranked in an
    earlier snapshot); scores are made for the page alone.
    """
    scope = Scope(ctx, query.under, tuple(query.tags), query.min_strength, query.as_of)
    limit = query.limit
    scores: dict[int, dict[str, Any]] = {}
    if query.mode == "keyword":
        hits = keyword_ranking(conn, scope, query.q, limit)
        order = []
        for position, hit in enumerate(hits, start=1):
            score = keyword_score(position)
            order.append((hit.fact_id, score))
            scores[hit.fact_id] = {"keyword": score, "all_words": hit.all_words}
        return Ranking(query.mode, order, scores, query.sort, query.as_of)
    if semantic is None:
        semantic = semantic_half(conn, ctx, query, index)
    if query.mode == "semantic":
        order = [(fid, 1.0 - distance) for fid, distance in semantic]
        cosines = {fid: {"cosine": c} for fid, c in order}
        return Ranking(query.mode, order, cosines, query.sort, query.as_of)
    half = keyword if keyword is not None else keyword_half(conn, ctx, query)
    keyword_hits, shares = half.hits, half.shares
    in_span = semantic_half(conn, ctx, query, index, in_span=True) if query.window else []
    candidates = [hit.fact_id for hit in keyword_hits] + [fid for fid, _ in semantic]
    in_window = _created_in(conn, candidates, query.window) if fusion.time_boost else frozenset()
    if fusion.time_boost:
        in_window |= {fid for fid, _ in in_span}
    fused = fuse(keyword_hits, semantic, None, fusion, shares, in_window, in_span)
    order = _page_of_texts(conn, fused, limit)
    page = {fid for fid, _ in order}
    for position, hit in enumerate(keyword_hits, start=1):
        if hit.fact_id in page:
            scores[hit.fact_id] = {
                "keyword": keyword_score(position),
                "all_words": hit.all_words,
                "words_held": round(shares.get(hit.fact_id, 0.0), 6),
            }
    for fid, distance in [*semantic, *in_span]:
        if fid in page:
            scores.setdefault(fid, {})["cosine"] = 1.0 - distance
    for fid, value in order:
        scores[fid]["rrf"] = value
        if fid in in_window:
            scores[fid]["in_window"] = True
    return Ranking(query.mode, order, scores, query.sort, query.as_of)


def similar_to(
    conn: Connection,
    ctx: Context,
    index: VectorIndex,
    vector: np.ndarray,
    *,
    want: int,
    min_cosine: float,
    exclude: frozenset[int] = frozenset(),
) -> list[tuple[int, float]]:
    """(fact id, cosine), nearest first: up to `want` current facts the subject may read
    at least `min_cosine` near `vector`, leaving out `exclude`. The store's near-duplicate
    check: the nearest-neighbour search of semantic mode (the same ACL-inside-the-search,
    never-starved walk), on the vector the store already made."""
    scope = Scope(ctx)
    depth = want + len(exclude)
    vectors = backend(conn).vectors
    if vectors.in_database:
        nearest = vectors.nearest(conn, scope.clauses(), vector, depth)
    else:
        nearest = semantic_ranking(conn, scope, index, vector, depth)
    near = [(fid, 1.0 - d) for fid, d in nearest if fid not in exclude and 1.0 - d >= min_cosine]
    return near[:want]


def still_visible(conn: Connection, ctx: Context, ids: Iterable[int]) -> set[int]:
    """The ids among `ids` the subject may read now and that are still current."""
    return _visible(conn, Scope(ctx), sorted(ids))


@dataclass(frozen=True, slots=True)
class SearchResult:
    fact: Fact
    score: float  # what the results are ordered by, higher is better
    scores: dict[str, Any]  # the scores it was ranked by (app.schemas.search.Scores)


@dataclass(frozen=True, slots=True)
class SearchPage:
    mode: Mode
    results: list[SearchResult]
    as_of: datetime | None = None  # the moment searched, when not now


def deliver(conn: Connection, ctx: Context, ranking: Ranking, *, peek: bool) -> SearchPage:
    """Hand the results to the reader: each one a recall unless `peek` (or `as_of`:
    a search of the past is never a recall).

    The ids are checked again here: ranking may have run in an earlier
    transaction, and a fact deleted or hidden since must not be handed out.
    """
    wanted = [fid for fid, _ in ranking.order]
    as_of = ranking.as_of
    if peek or as_of is not None:
        still = _visible(conn, Scope(ctx, as_of=as_of), wanted)
        kept = [fid for fid in wanted if fid in still]
        handed = fact_service.hydrate(conn, ctx, kept, as_of=as_of)
    else:
        handed = fact_service.recall_visible(conn, ctx, wanted)
    hydrated = {fact.id: fact for fact in handed}
    results = [
        SearchResult(hydrated[fid], score, ranking.scores[fid])
        for fid, score in ranking.order
        if fid in hydrated
    ]
    if ranking.sort == "strength":
        results.sort(key=lambda r: (-r.fact.strength, r.fact.id))
    return SearchPage(ranking.mode, results, fact_service.shown_moment(as_of))
