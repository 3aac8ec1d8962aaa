"""Search by keyword, by meaning, or both: one fitted ranking over what the reader can see.

- keyword: the facts the reader can see holding any of the query's words, ranked by
  BM25 whose statistics (how many facts hold each word, their lengths) are counted over
  those facts alone. Each word's matches are read newest first, the reader's rules in
  the same statement, up to MATCH_WINDOW of them: a word held more often than that is
  common among what the reader sees, and its older holders are not read.
- semantic: the facts nearest the query's embedding, above the model's cosine floor
  (search.min_cosine): a query that matches nothing gets an empty page.
- hybrid: the best of both halves, and the nearest facts created in a time span the
  query names, are the candidates; each is described by six features and scored by
  one model (app.services.ranking) whose weights and floor `python -m
  bench.fit_ranking` fits, nobody sets by hand. The page holds the candidates whose
  chance reaches the floor, best first: nonsense gets an empty page.

No input to any score or order depends on a fact the reader cannot read, nor on a
deleted or superseded one: every count is over the reader's own current matches, the
cosines are the fact's and the query's own, and the candidates come from statements
that apply the reader's rules (the index's own statistics, FTS5's bm25 among them,
are never read). The keyword index and, on PostgreSQL, nearest-neighbour search are
the backend's (app.db.dialects); the statements over a subject's rules are built once
and kept in its Access (Scope.statement).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any, TypeVar

import numpy as np
from sqlalchemy import Connection, bindparam, select

from app.db.dialects import backend
from app.db.tables import facts
from app.embeddings.base import Embedder
from app.embeddings.query_cache import QueryCache
from app.errors import Unavailable, invalid
from app.rules import MAX_QUERY_CHARS, Mode, SearchSort
from app.services import facts as fact_service
from app.services import ranking, timewords
from app.services.context import Context
from app.services.facts import Fact
from app.services.strength import decay_sql
from app.services.timewords import Window
from app.services.validation import check_limit, check_query, fold_path, parse_tag_filter
from app.services.vector_index import (
    POOL,
    POOL_SHARE,
    RANKED_HEAD,
    Probe,
    VectorIndex,
    unpack_blobs,
)
from app.services.visibility import readable_scope, visible_current

T = TypeVar("T")

# A query's words looked up in the keyword index: its longest this many. Each one is a
# walk of the index under the reader's rules: on the dev parts 6 ranked as 8 did (per
# question 0.6155 against 0.6162), and hybrid over HTTP took a tenth less.
MAX_TERMS = 6
# Per word, the newest visible facts holding it that are read. A cost bound: a word
# that more facts hold is common among what the reader sees and weighs little (see
# Keyword). On the dev parts, 25 cost BEAM's keyword search a third of its recall@5
# (0.437 -> 0.310) and hybrid 0.05; 50, a point of hybrid's.
MATCH_WINDOW = 100
# The best EXACT_RERANK x limit visible candidates by int8 similarity (at least
# MIN_RESCORED) are re-scored exactly from facts.embedding: the int8 order is right
# to ~1e-3 in cosine, so the true top 10 are among them (bench/search_bench.py).
MIN_RESCORED = 30
# A candidate's access check in SQL costs about this many times what a member of the
# reader's part of the index costs its walk (~7 us against ~0.6 us at 100k facts,
# bench.reader_cost_bench): see _scoped_at_most.
CHECK_COST = 12
EXACT_RERANK = 2
# A walk's first chunk holds what the reader needs divided by the share of candidates
# it found visible last time, this much more (see _Walk): a chunk found short is
# followed by one twice as wide, so the margin keeps that rare (a reader who sees 63%
# checks 199 of hybrid's candidates first, as it checked 200 before).
SHARE_MARGIN = 1.25
# Hybrid's candidates: the nearest SEMANTIC_DEPTH facts, the best KEYWORD_DEPTH keyword
# matches and the SPAN_DEPTH nearest facts created in a span the question names (or
# twice the page, if more). On the dev parts (bench.fit_ranking), the nearest 100 held
# 0.85-0.92 of the answers, the nearest 20 0.61-0.79; keyword matches past the 40th
# added under a point.
SEMANTIC_DEPTH = 100
KEYWORD_DEPTH = 40
SPAN_DEPTH = 20
# The `similar` searches of a batch of stores (similar_to_many) that check their first
# candidates in one statement: at 1000 a batch, each of 16 statements asks for up to
# 64 x 60 ids, and a group's first candidates are all the walks hold at once.
SIMILAR_GROUP = 64
# The candidates whose mean is the query's neighbourhood (ranking's `neighbourhood`).
NEIGHBOURS = 10
# How many of its kin a candidate's crowd is the mean over (ranking's `crowd`): chosen on
# dev, fitted without each view's own shape, of 1, 3, 5, 10 and 20 the one that raised
# recall@5 on all four views (10, the neighbourhood's count, left BEAM's a little under).
KIN = 5
# Words that carry no topic: they never decide whether a fact matches (a fact that
# shares only "the" or "or" with a question is not an answer to it). Question words
# are here too, since agents ask in sentences.
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
# Runs of letters and digits, as FTS5's unicode61 tokenizer (and the PostgreSQL
# configuration) splits text: "ABC-123" and "foo_bar" are two words each.
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def query_terms(q: str) -> tuple[str, ...]:
    """The query's words that carry a topic (no stop word, no single letter; a number
    does), each once, the longest MAX_TERMS of them in the query's order. A query of stop
    words alone ("to be or not to be") looks for those."""
    every = _WORD.findall(q.lower())
    words = [w for w in every if (len(w) > 1 and w not in STOPWORDS) or w.isdigit()] or every
    unique = list(dict.fromkeys(words))
    kept = set(sorted(unique, key=lambda w: (-len(w), unique.index(w)))[:MAX_TERMS])
    return tuple(w for w in unique if w in kept)


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

    def _kept(self, kind: str, make: Callable[[], T]) -> T:
        """What `make` makes for these filters, kept in the subject's Access for its next
        requests, unless the scope holds the time (then made each time)."""
        if self._holds_time:
            return make()
        return self.ctx.access.statements.get((kind, self.under, self.tags), make)

    def statement(self, kind: str, build: Callable[[list[Any]], Any]) -> Any:
        """The statement `build` makes from the clauses."""
        return self._kept(kind, lambda: build(self.clauses()))

    def visible_share(self) -> VisibleShare:
        """The share of the index's candidates this subject found visible under these
        filters in its last walk (a scope that holds the time starts from the default)."""
        return self._kept("visible-share", VisibleShare)


class VisibleShare:
    """How many of the index's candidates a walk found visible, of those it checked:
    the next walk of the same reader sizes its first chunk by it. Half until a walk has
    run (the first chunk twice what is needed). Two searches writing it at once leave
    either's value: it only sizes a chunk, never decides what is returned."""

    def __init__(self) -> None:
        self.value = 0.5


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
    bk = backend(conn)
    ids_in = bk.ids_in

    def build(clauses: list[Any]) -> Any:
        return select(facts.c.id, bk.vectors.stored()).where(
            ids_in(facts.c.id, "ids"), *clauses, facts.c.embedding.is_not(None)
        )

    stmt = scope.statement("visible-vectors", build)
    return {fid: blob for fid, blob in conn.execute(stmt, {"ids": list(ids)})}


def _scored(
    ids: Sequence[int], blobs: Mapping[int, bytes], query: np.ndarray
) -> list[tuple[int, float]]:
    """(fact id, cosine distance) for the facts among `ids` whose vector is in `blobs`."""
    found, matrix = _stacked(ids, blobs, query.shape[0])
    distances = 1.0 - matrix @ query
    return [(fid, float(d)) for fid, d in zip(found, distances, strict=True)]


class _Visibility:
    """Which facts a scope keeps among those asked about, with their stored vectors (the
    access check and the read in one statement, _visible_vectors), each fact asked of the
    database once. The searches of one snapshot share one: a batch's `similar` searches
    ask for their candidates together, and a fact near many of them is read once."""

    def __init__(self, conn: Connection, scope: Scope, index: VectorIndex | None = None) -> None:
        self.conn, self.scope, self.index = conn, scope, index
        self._asked: set[int] = set()
        self._kept: dict[int, bytes] = {}
        self._every: dict[int, bytes] | None = None

    def vectors(self, ids: Sequence[int]) -> dict[int, bytes]:
        """The stored vectors of the facts among `ids` the scope keeps, by id."""
        missing = [fid for fid in ids if fid not in self._asked]
        if missing:
            self._kept.update(_visible_vectors(self.conn, self.scope, missing))
            self._asked.update(missing)
        return {fid: self._kept[fid] for fid in ids if fid in self._kept}

    def scope_members(self, at_most: int, total: int) -> np.ndarray | None:
        """The facts holding one of the reader's scope tokens (a superset of what it may
        read), when the tokens narrow the memory (of `total` vectors) to at most
        `at_most` facts.

        Kept by the index between searches while they are at most a quarter of the
        memory: a search reads only those stored since (fact ids grow; a wipe reloads
        the index, which forgets them). A part found larger than that is remembered as
        such, and read again only once the memory has doubled since."""
        tokens = readable_scope(self.conn, self.scope.ctx)
        if tokens is None or self.index is None:
            return None
        key, cap = tuple(tokens), total // 4
        known = self.index.members_known(key)
        if isinstance(known, int):
            if cap < 2 * known:
                return None  # larger than a quarter of the memory when last read
            known = None
        keywords = backend(self.conn).keywords
        if isinstance(known, np.ndarray) and len(known) <= cap:
            after = int(known[-1]) if len(known) else 0
            new = keywords.scope_members(self.conn, tokens, cap + 1 - len(known), after)
            members = np.concatenate([known, np.asarray(new, np.int64)]) if new else known
        else:
            members = np.asarray(keywords.scope_members(self.conn, tokens, cap + 1), np.int64)
        if len(members) > cap:
            self.index.remember_members(key, cap)
            return None
        self.index.remember_members(key, members)
        return members if len(members) <= at_most else None

    def every_scored(self, query: np.ndarray) -> list[tuple[int, float]]:
        """Every fact the scope keeps that has a vector, scored exactly against `query`:
        the walk's last resort."""
        if self._every is None:
            stored = backend(self.conn).vectors.stored()
            stmt = self.scope.statement(
                "embedded",
                lambda clauses: select(facts.c.id, stored).where(
                    *clauses, facts.c.embedding.is_not(None)
                ),
            )
            self._every = {fid: blob for fid, blob in self.conn.execute(stmt)}
        return _scored(list(self._every), self._every, query)


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
        lambda: select(facts.c.id, bk.vectors.stored()).where(
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
    walk = _Walk(index.probe(query), want, rescore, scope.visible_share())
    return walk.run(_Visibility(conn, scope, index), vectors)


class _Walk:
    """One query's walk of the index (semantic_ranking), which can be started apart from
    the rest: its first chunk of candidates, asked for before the walk runs, lets the
    searches of a batch check all their first chunks in one statement."""

    def __init__(
        self, probe: Probe, want: int, rescore: bool = True, share: VisibleShare | None = None
    ) -> None:
        self.probe, self.want, self.rescore = probe, want, rescore
        self.needed = max(want * EXACT_RERANK, MIN_RESCORED) if rescore else want
        self.share = share or VisibleShare()
        # Wide enough that the reader needs one round, if it sees as much of this walk's
        # candidates as of its last walk's (SHARE_MARGIN); never wider than twice what
        # is needed (a reader who sees little walks on in chunks that double). A reader
        # of everything checks 125 candidates of hybrid's where 200 were checked.
        fitting = math.ceil(self.needed * SHARE_MARGIN / max(self.share.value, 0.5))
        self.first_width = min(2 * self.needed, fitting)  # a share is at most 1: >= needed
        self._first: tuple[np.ndarray, np.ndarray] | None = None

    def _ranked(self) -> tuple[np.ndarray, np.ndarray]:
        probe = self.probe
        return probe.ranked(max(POOL, round(POOL_SHARE * probe.total)), RANKED_HEAD)

    def first_chunk(self) -> list[int]:
        """The candidates the walk checks first."""
        if self._first is None:
            self._first = self._ranked()
        return self._first[0][: self.first_width].tolist()

    def run(
        self, visibility: _Visibility, vectors: dict[int, bytes] | None = None
    ) -> list[tuple[int, float]]:
        probe, want, needed = self.probe, self.want, self.needed
        blobs: dict[int, bytes] = {} if vectors is None else vectors
        # A reader whose scope tokens name a small part of the index walks that part:
        # the index's best cells would hold few facts it may see (see _scoped_at_most).
        members = visibility.scope_members(_scoped_at_most(needed, probe.total), probe.total)
        if members is not None:
            return self._within(members, visibility, blobs)
        visible: list[tuple[int, float]] = []
        seen: set[int] = set()
        examined = 0
        chunk = self.first_width
        while len(visible) < needed:
            if self._first is not None:
                (ranked, similarity), self._first = self._first, None
            else:
                ranked, similarity = self._ranked()
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
                kept = visibility.vectors([f for f, _ in batch])
                blobs.update(kept)
                visible += [pair for pair in batch if pair[0] in kept]
                missing = needed - len(visible)
                if missing <= 0:
                    break
                # The share of visible facts so far tells how far the rest would go.
                share = max(len(visible), 1) / max(examined, 1)
                if examined + missing / share > probe.total / 4:
                    return self._everything(visibility, blobs)
                start += chunk
                chunk *= 2
        if examined:
            self.share.value = len(visible) / examined
        if len(visible) < want and examined < probe.total:
            # Every cell taken, yet some visible facts were not among any cell's best.
            return self._everything(visibility, blobs)
        return self._finish(visible, blobs)

    def _finish(
        self, visible: list[tuple[int, float]], blobs: dict[int, bytes]
    ) -> list[tuple[int, float]]:
        """The best `want` of the visible candidates found, the best `needed` of them
        scored exactly first (unless not `rescore`)."""
        if not self.rescore:
            return _best(visible, self.want)
        best = [fid for fid, _ in _best(visible, self.needed)]
        return _best(_scored(best, blobs, self.probe.query), self.want)

    def _everything(
        self, visibility: _Visibility, blobs: dict[int, bytes]
    ) -> list[tuple[int, float]]:
        """The walk's last resort, when few of the index's best are visible: the reader's
        own part of the index walked whole, when its scope tokens name a part smaller
        than a quarter of the index (a cost in proportion to what it can see); else
        every visible fact read from the database and scored."""
        probe = self.probe
        members = visibility.scope_members(probe.total // 4, probe.total)
        if members is None:
            return _best(visibility.every_scored(probe.query), self.want)
        return self._within(members, visibility, blobs)

    def _within(
        self, members: np.ndarray, visibility: _Visibility, blobs: dict[int, bytes]
    ) -> list[tuple[int, float]]:
        """The walk over the codes of `members` only, best first, checked in chunks: the
        nearest by Hamming distance first, as a pool is walked, then, if the filters
        keep too few of those, every member (the checks already made are not made again)."""
        for whole in (False, True):
            ranked, similarity = self.probe.within(members, whole)
            visible: list[tuple[int, float]] = []
            for start in range(0, len(ranked), self.first_width):
                chunk = ranked[start : start + self.first_width].tolist()
                kept = visibility.vectors(chunk)
                blobs.update(kept)
                near = similarity[start : start + self.first_width].tolist()
                visible += [(f, 1.0 - s) for f, s in zip(chunk, near, strict=True) if f in kept]
                if len(visible) >= self.needed:
                    return self._finish(visible, blobs)
            if len(ranked) == len(members):
                break
        return self._finish(visible, blobs)


def _small_part(conn: Connection, ctx: Context, want: int) -> list[str] | None:
    """The reader's scope tokens when the part of the memory they name is small enough
    that scoring it whole costs less than the index's walk (_scoped_at_most), for a
    database that searches vectors itself (PostgreSQL)."""
    tokens = readable_scope(conn, ctx)
    if tokens is None:
        return None
    bk = backend(conn)
    at_most = _scoped_at_most(max(want, MIN_RESCORED), bk.vectors.estimated_vectors(conn))
    return tokens if bk.keywords.scope_count(conn, tokens, at_most) <= at_most else None


def _scoped_at_most(needed: int, total: int) -> int:
    """The most members a reader's part of the index may hold for a walk over it to cost
    less than the walk of the whole index. The whole index's walk checks about
    needed x total / members candidates in SQL before it has `needed` visible ones; the
    part's walk costs a little for each member (its id from FTS5, its flag, its int8
    approximation). Equal at members = sqrt(CHECK_COST x needed x total)."""
    return min(math.isqrt(CHECK_COST * needed * total), total // 4)


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
        raise invalid("min_strength", "min_strength must be between 0 and 1")
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


@dataclass
class Keyword:
    """The keyword half: each query word's newest visible matches, up to MATCH_WINDOW.

    The facts holding any word (`lengths`' keys) are the collection BM25 counts over: a
    word's rarity is how few of them hold it. A word with a full window is common among
    what the reader sees: its older holders are not read, and a fact found by another
    word is taken not to hold it. Its weight is then near nothing (a rarity under 0.02
    with a hundred holders in a pool of a hundred), so asking the index of each
    candidate (2-5 ms a common word at 10k facts) would move no order.
    """

    terms: tuple[str, ...]
    matches: Mapping[str, frozenset[int]]
    lengths: Mapping[int, int]  # characters of each pooled fact's content
    # Hybrid's: the stored vectors of the best KEYWORD_DEPTH matches, and those of them
    # created in the span the question names (read in the half's own snapshot).
    vectors: Mapping[int, bytes] = dataclasses.field(default_factory=dict)
    spanned: frozenset[int] = frozenset()

    def idf(self) -> dict[str, float]:
        df = {t: len(self.matches[t]) for t in self.terms}
        return ranking.rarity(df, len(self.lengths))

    @cached_property
    def words(self) -> dict[int, tuple[str, ...]]:
        """The query words each matching fact holds (among those whose matches were
        read), in the query's order."""
        held: dict[int, list[str]] = {fid: [] for fid in self.lengths}
        for term in self.terms:
            for fid in self.matches[term]:
                held[fid].append(term)
        return {fid: tuple(w) for fid, w in held.items()}

    @cached_property
    def ranked(self) -> list[tuple[int, float, tuple[str, ...]]]:
        """(fact id, BM25, words held) of every matching fact, best first."""
        words = self.words
        scores = ranking.bm25(words, self.idf(), self.lengths)
        return sorted(((f, scores[f], words[f]) for f in words), key=lambda r: (-r[1], r[0]))


def keyword_half(conn: Connection, ctx: Context, query: Query) -> Keyword:
    """Read the keyword half of `query`; for hybrid, also what the scoring needs of its
    best matches (their vectors, whether created in the span)."""
    terms = query_terms(query.q)
    if not terms:
        return Keyword((), {}, {})
    scope = Scope(ctx, query.under, tuple(query.tags), query.min_strength, query.as_of)
    keywords = backend(conn).keywords
    # The index walks only the facts holding one of the reader's scope tokens, when
    # they narrow the memory: the same rows pass the clauses, found among fewer.
    within = readable_scope(conn, ctx)
    found: dict[int, set[int]] = {i: set() for i in range(len(terms))}
    lengths: dict[int, int] = {}
    for term, fid, n in keywords.matches(conn, terms, MATCH_WINDOW, within, scope.statement):
        found[term].add(fid)
        lengths[fid] = n
    half = Keyword(terms, {t: frozenset(found[i]) for i, t in enumerate(terms)}, lengths)
    if query.mode != "hybrid":
        return half
    best = [f for f, _, _ in half.ranked[: _depth(KEYWORD_DEPTH, query.limit)]]
    half.vectors = _blobs_of(conn, best)
    half.spanned = _created_in(conn, best, query.window)
    return half


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


def _depth(least: int, limit: int) -> int:
    return max(least, 2 * limit)


def _nearest(
    conn: Connection, ctx: Context, query: Query, index: VectorIndex, *, in_span: bool = False
) -> tuple[list[tuple[int, float]], dict[int, bytes]]:
    """(fact id, cosine distance) nearest first, as deep as `query`'s mode ranks, and
    the stored vectors read on the way. With `in_span`, among the facts created in the
    span the question names only."""
    assert query.vector is not None
    span = query.window if in_span else None
    scope = Scope(ctx, query.under, tuple(query.tags), query.min_strength, query.as_of, span)
    hybrid = query.mode == "hybrid"
    depth = (
        _depth(SPAN_DEPTH if in_span else SEMANTIC_DEPTH, query.limit) if hybrid else query.limit
    )
    vectors = backend(conn).vectors
    few = _few_in_span(conn, scope) if span is not None and not vectors.in_database else None
    blobs: dict[int, bytes] = {}
    if few is not None:
        nearest = _best(_scored(few, _blobs_of(conn, few), query.vector), depth)
    elif vectors.in_database:
        within = _small_part(conn, ctx, depth)
        nearest = vectors.nearest(conn, scope.clauses(), query.vector, depth, within)
    else:
        # Hybrid scores its candidates itself, from the vectors the access check hands
        # out: the int8 order is enough to choose them.
        nearest = semantic_ranking(
            conn, scope, index, query.vector, depth, rescore=not hybrid, vectors=blobs
        )
    if hybrid:  # every candidate's vector, whichever way it was found
        blobs = _blobs_of(conn, [f for f, _ in nearest], blobs)
    return nearest, blobs


@dataclass(frozen=True)
class Semantic:
    """The semantic half: the nearest facts (cosine distance, nearest first), with
    hybrid's the nearest created in the span the question names, the stored vectors
    read on the way, and which of them were created in that span."""

    nearest: list[tuple[int, float]]
    in_span: list[tuple[int, float]] = dataclasses.field(default_factory=list)
    vectors: Mapping[int, bytes] = dataclasses.field(default_factory=dict)
    spanned: frozenset[int] = frozenset()


def semantic_half(conn: Connection, ctx: Context, query: Query, index: VectorIndex) -> Semantic:
    """The semantic half of `query`. Semantic search drops the candidates under the
    query's cosine floor; hybrid keeps them for its model to weigh, and reads the span's
    nearest too."""
    nearest, blobs = _nearest(conn, ctx, query, index)
    if query.mode != "hybrid":
        return Semantic([(f, d) for f, d in nearest if 1.0 - d >= query.min_cosine])
    if query.window is None:
        return Semantic(nearest, vectors=blobs)
    in_span, span_blobs = _nearest(conn, ctx, query, index, in_span=True)
    spanned = _created_in(conn, [f for f, _ in nearest], query.window)
    return Semantic(nearest, in_span, {**blobs, **span_blobs}, spanned | {f for f, _ in in_span})


@dataclass(frozen=True)
class Candidates:
    """Hybrid's candidates, and the features of each (arrays aligned with `ids`)."""

    ids: list[int]
    features: dict[str, np.ndarray]
    nearest: np.ndarray  # true for those among the nearest facts (semantic search's own)
    keyword: dict[int, float]  # BM25 of those that hold a query word
    held: dict[int, float]  # the idf-weighted share of the query's words each holds


def candidates(query: Query, keyword: Keyword, semantic: Semantic) -> Candidates:
    """Hybrid's candidates, each half's, and their features (ranking.FEATURES), from what
    the halves read: no statement of its own."""
    assert query.vector is not None
    ranked = keyword.ranked
    best = [f for f, _, _ in ranked[: _depth(KEYWORD_DEPTH, query.limit)]]
    nearest = [f for f, _ in semantic.nearest]
    among_nearest = set(nearest)
    found = list(dict.fromkeys(best + nearest + [f for f, _ in semantic.in_span]))
    # A fact not embedded yet (stored with no model, waiting for the background worker)
    # has a vector of zeros: near nothing, its keyword feature nothing either. Keyword
    # search finds it at once; hybrid once it is embedded.
    matrix = np.zeros((len(found), query.vector.shape[0]), np.float32)
    have, rows = _stacked(found, {**keyword.vectors, **semantic.vectors}, query.vector.shape[0])
    at = {f: i for i, f in enumerate(found)}
    matrix[[at[f] for f in have]] = rows
    cosine = (matrix @ query.vector).astype(np.float64)
    bm25 = {f: s for f, s, _ in ranked}
    best_bm25 = max(bm25.values(), default=0.0) or 1.0
    idf = keyword.idf()
    words = keyword.words
    held = ranking.words_held_each({f: words[f] for f in found if f in words}, idf)
    near = np.argsort(-cosine, kind="stable")[:NEIGHBOURS]
    mean = matrix[near].mean(axis=0) if len(found) else np.zeros_like(query.vector)
    norm = float(np.linalg.norm(mean))
    spanned = keyword.spanned | semantic.spanned
    neighbourhood = (matrix @ (mean / norm) if norm > 0 else 0.0 * cosine).astype(np.float64)
    features = {
        "cosine": cosine,
        "keyword": np.array([bm25.get(f, 0.0) / best_bm25 for f in found]) * cosine,
        "neighbourhood": neighbourhood,
        "neighbourhood_squared": neighbourhood * neighbourhood,
        "in_span": np.array([float(f in spanned) for f in found]),
        "crowd": _crowd(matrix),
    }
    return Candidates(
        found,
        features,
        np.array([f in among_nearest for f in found], dtype=bool),
        {f: bm25[f] for f in found if f in bm25},
        {f: s for f, s in held.items() if s > 0},
    )


def _crowd(matrix: np.ndarray) -> np.ndarray:
    """Each row's mean cosine to the KIN other rows most like it (all the others when
    there are fewer), less the mean of that over the rows: how much more than the other
    candidates it has close kin among them, so that a lone candidate (or a few alike) is
    neither pushed down nor lifted. Rows are unit vectors, or zeros for a fact not
    embedded."""
    kin = min(KIN, len(matrix) - 1)
    if kin < 1:
        return np.zeros(len(matrix))
    likeness = matrix @ matrix.T
    np.fill_diagonal(likeness, -np.inf)  # a fact is not its own kin
    crowd = np.partition(likeness, -kin, axis=1)[:, -kin:].mean(axis=1).astype(np.float64)
    return crowd - crowd.mean()


def rank(conn: Connection, ctx: Context, query: Query, index: VectorIndex) -> Ranking:
    """Rank the facts the subject may see; reads only (a read transaction will do).
    Scores are made for the page alone."""
    limit = query.limit
    if query.mode == "keyword":
        half = keyword_half(conn, ctx, query)
        idf = half.idf()
        top = half.ranked[:limit]
        matched = {
            f: {
                "keyword": s,
                "words_held": ranking.words_held(w, idf),
                "all_words": len(w) == len(half.terms),
            }
            for f, s, w in top
        }
        return Ranking(query.mode, [(f, s) for f, s, _ in top], matched, query.sort, query.as_of)
    if query.mode == "semantic":
        order = [(f, 1.0 - d) for f, d in semantic_half(conn, ctx, query, index).nearest]
        cosines = {fid: {"cosine": c} for fid, c in order}
        return Ranking(query.mode, order, cosines, query.sort, query.as_of)
    return score(query, keyword_half(conn, ctx, query), semantic_half(conn, ctx, query, index))


def score(
    query: Query, keyword: Keyword, semantic: Semantic, model: ranking.Model | None = None
) -> Ranking:
    """Hybrid's page from its halves, read before (in one snapshot or two): the fitted
    model's order and floor over their candidates. Reads nothing."""
    model = model or ranking.shipped()
    found = candidates(query, keyword, semantic)
    order = [(found.ids[i], chance) for i, chance in model.page(found.features, query.limit)]
    position = {f: i for i, f in enumerate(found.ids)}
    scores: dict[int, dict[str, Any]] = {}
    for fid, relevance in order:
        at = position[fid]
        scores[fid] = {"relevance": relevance, "cosine": float(found.features["cosine"][at])}
        if fid in found.keyword:
            scores[fid]["keyword"] = found.keyword[fid]
            scores[fid]["words_held"] = round(found.held.get(fid, 0.0), 6)
        if found.features["in_span"][at]:
            scores[fid]["in_window"] = True
    return Ranking(query.mode, order, scores, query.sort, query.as_of)


def similar_to_many(
    conn: Connection,
    ctx: Context,
    index: VectorIndex,
    vectors: Sequence[np.ndarray],
    *,
    want: int,
    min_cosine: float,
    excludes: Sequence[frozenset[int]],
) -> list[list[tuple[int, float]]]:
    """The store's near-duplicate check, for each of `vectors`: (fact id, cosine),
    nearest first, up to `want` current facts the subject may read at least
    `min_cosine` near it, leaving out `excludes[i]`. The nearest-neighbour search of
    semantic mode (the same ACL-inside-the-search, never-starved walk) on the vectors
    the store already made, as one pass: the same facts and cosines as a search per
    vector, for a fraction of the statements. On SQLite the index is brought up to
    date once, and the searches check their first candidates in one statement a group
    of SIMILAR_GROUP (the walks that must go further ask for more themselves); on
    PostgreSQL a group's nearest-neighbour walks are one statement."""
    scope = Scope(ctx)
    out: list[list[tuple[int, float]]] = []
    stored = backend(conn).vectors
    visibility = _Visibility(conn, scope, index)
    if not stored.in_database:
        index.refresh(conn)
    for start in range(0, len(vectors), SIMILAR_GROUP):
        group = list(vectors[start : start + SIMILAR_GROUP])
        excluded = list(excludes[start : start + SIMILAR_GROUP])
        depths = [want + len(e) for e in excluded]
        if stored.in_database:
            nearest = stored.nearest_many(conn, scope.clauses(), group, depths, close=True)
        else:
            walks = [_Walk(index.probe(v), depth) for v, depth in zip(group, depths, strict=True)]
            visibility.vectors(sorted({fid for walk in walks for fid in walk.first_chunk()}))
            nearest = [walk.run(visibility) for walk in walks]
        for found, exclude in zip(nearest, excluded, strict=True):
            near = [
                (fid, 1.0 - d) for fid, d in found if fid not in exclude and 1.0 - d >= min_cosine
            ]
            out.append(near[:want])
    return out


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
