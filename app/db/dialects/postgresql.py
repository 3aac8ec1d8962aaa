"""PostgreSQL's side of the seams: tsvector + GIN for keywords, pgvector HNSW for meaning.

The schema these queries run on is made by the migrations (their PostgreSQL branch):
facts.content_tsv, a stored generated tsvector with a GIN index, and facts_vec, a
halfvec(width) column (migration 0011: two bytes a dimension) with an HNSW index for
cosine distance. facts_vec holds the one copy of each vector (migration 0009):
facts.embedding is a boolean there, true when facts_vec holds the fact's vector, NULL
while it waits for a model. Vectors arrive and leave as float32; the database keeps
them as IEEE halves.
"""

from __future__ import annotations

import logging
import math
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from pgvector.sqlalchemy import HALFVEC, VECTOR
from sqlalchemy import (
    BigInteger,
    Connection,
    Engine,
    Float,
    Integer,
    LargeBinary,
    Table,
    any_,
    bindparam,
    cast,
    column,
    func,
    literal,
    literal_column,
    select,
    table,
    text,
    true,
    type_coerce,
    union_all,
    values,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import NullType, TypeDecorator

from app.db.dialects import StatementOf, VectorsMissing, walk_matches
from app.db.statements import Statements
from app.db.tables import facts
from app.errors import Unavailable

log = logging.getLogger(__name__)

# facts_vec as the PostgreSQL migration makes it (SQLite's holds codes instead).
_VECTORS = table("facts_vec", column("fact_id"), column("embedding"))
# The migration's text-search configuration: English stems, no stop words (see there).
TS_CONFIG = "embornal"
# The advisory lock a migration holds (any constant no other tool of ours uses).
SCHEMA_LOCK = 7_342_000
# A plan for each execution of this transaction's statements, made for their parameters:
# psycopg prepares a statement on its 5th run, and PostgreSQL may then plan it once for
# any (a generic plan). Taken by the statements whose best plan depends on them.
_CUSTOM_PLAN = "set_config('plan_cache_mode', 'force_custom_plan', true)"
# One plan for any parameters, made when a prepared statement first runs: for statements
# whose plan does not depend on them (PostgresKeywords.matches).
_GENERIC_PLAN = "set_config('plan_cache_mode', 'force_generic_plan', true)"
# While the keyword walks run (PostgresKeywords.matches): the least work_mem PostgreSQL
# takes, so that no subquery of the read rules is hashed, and a plan for each execution.
_WALK_SETTINGS = f"SELECT set_config('work_mem', '64kB', true), {_CUSTOM_PLAN}"
# facts_vec's HNSW index, and the most memory (MB) a bulk load's rebuild of it takes
# (build_index): a million 384-d vectors want about 2.4 GB.
HNSW_INDEX = "facts_vec_hnsw"
# The graph's links a vector (pgvector's m): half its default, since inserting into the
# graph was most of a store's own time and searches, at ef_search 400 or more, find as
# much in the sparser graph (migration 0016's docstring has the figures).
HNSW_LINKS = 8
BUILD_MEMORY_MB = 8192
# Each query asks HNSW for this many candidates at least (pgvector's ef_search). At
# 100k facts under the bench's ACL (bench/search_bench.py --backend postgresql, two
# builds), recall@10 was 0.890-0.928 at 100 (4.9 ms of ranking), 0.948-0.975 at 200
# (6.4 ms), 0.987 at 400 (9.6 ms): HNSW graphs differ from build to build, and 400
# is the least that held the 0.95 the index is held to on both.
EF_SEARCH = 400
# Past EF_SIZE vectors the walk widens with the square root of how many times larger
# the memory is, up to pgvector's most (1000): a fixed 400 found 0.763 of the true ten
# at a million (bench/search_bench.py, halfvec graph), 800 found 0.869 and 1000 0.882
# (27 ms of ranking against 12).
EF_SIZE = 100_000
EF_SEARCH_MOST = 1000
# The walk of a store's `similar` check, which wants only the few facts at or above the
# model's similar cosine: close neighbours, which a narrower walk finds. Against the
# exact answer (bench/similar_ef_bench.py, 400 stores, half of them near-duplicates,
# each walk fetching twice the 3 it names): at 20k facts the same facts named for every
# store at 60 and above, 0.995 at 40; at 36k 0.995 at 60 and at 100 alike, 0.990 at 40.
# A fact's check: 1.48 ms at 60 against 1.80 at 100 (20k), 1.73 against 2.01 (36k);
# 5.0 at 400. In the sparser graph (HNSW_LINKS 8, migration 0016), at 20k: 0.993 the
# same and 0.995 of the near-duplicates found at 60, 0.995 and all of them at 100,
# 1.34 ms against 1.35: 100.
SIMILAR_EF_SEARCH = 100
# Candidates looked at per result wanted: relaxed_order returns them nearly sorted;
# the exact distances of the extra ones re-sort the page and raise recall.
OVERFETCH = 2
# A reader's small part is filtered among its nearest PART_HEAD x fetch holders first
# (_part_scored): most of a part is what its reader may read.
PART_HEAD = 4


# What separates two runs of letters and digits (FTS5's unicode61 splits there too).
_NOT_ALNUM = "[^[:alnum:]]+"


def _ids_in(column: ColumnElement[Any], name: str) -> ColumnElement[bool]:
    """`column` among the ids bound as one array parameter `name`."""
    return column == any_(bindparam(name, type_=ARRAY(BigInteger)))


def _tsquery(term: Any) -> Any:
    """The tsquery of one term, split into runs of letters and digits as FTS5's unicode61
    tokenizer splits it: "ABC-123" is the words abc and 123 on both backends (PostgreSQL's
    own parser would make a signed number of "-123")."""
    return func.phraseto_tsquery(TS_CONFIG, func.regexp_replace(term, _NOT_ALNUM, " ", "g"))


_TSV: Any = literal_column("facts.content_tsv")
_SCOPE_TSV: Any = literal_column("facts.scope_tsv")


def _in_scope(tokens: Any) -> Any:
    """Facts holding one of the scope tokens `tokens` names (a parameter or a value:
    _scope_query's text), through the GIN index of the words and the tokens (0014)."""
    return _SCOPE_TSV.op("@@")(func.to_tsquery("simple", tokens))


def _scope_query(tokens: Sequence[str]) -> str:
    return " | ".join(tokens)


# A parameter SQLAlchemy hands to the driver as it is: psycopg sends a numpy array to
# a vector column through pgvector's binary dumper (_binary_vectors).
_ANY = NullType()


# A word held by at most one in FEW_HOLDERS_PER facts, and by FEW_HOLDERS at least,
# (whoever may read them) has the rules asked of each holder; a more common one is
# walked newest first (PostgresKeywords.matches). The fewer holders a word has, the
# further its walk goes for the same 100, so the bound grows with the memory: at 100k
# facts 100 holders tied the walk on hybrid's keyword half and 1,000 lost; at a million
# 1,000 cut the bench's keyword words' p90 from 78 to 52 ms against 100 (173 before).
FEW_HOLDERS = 100
FEW_HOLDERS_PER = 1000
# How long the planner's list of common stems is kept between reads (seconds).
STATS_KEPT_S = 60.0
_STATISTICS = text(
    "SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs::float8[], "
    "(SELECT reltuples FROM pg_class WHERE oid = 'facts'::regclass) "
    "FROM (SELECT 1) AS one LEFT JOIN pg_stats AS s ON s.schemaname = current_schema() "
    "AND s.tablename = 'facts' AND s.attname = 'content_tsv'"
)
# Facts fall into blocks of BLOCK_IDS consecutive ids, and the GIN index of their words
# holds each fact's block as a word too (migration 0018: the expression below, which a
# statement must write as the index does). A common word's newest holders are then asked
# of the index among the newest blocks (PostgresKeywords._newest_in_blocks): the holders
# of those blocks alone are read, where a walk of the primary key reads every fact of
# them. The blocks asked are as many as should hold `limit` holders the reader sees if it
# sees BLOCK_SHARE of them, at most MAX_BLOCKS (a rarer word is walked).
BLOCK_IDS = 1024
BLOCK_SHARE = 0.5
MAX_BLOCKS = 32
_BLOCK: Any = literal_column(
    f"to_tsvector('simple'::regconfig, 'b' || (facts.id / {BLOCK_IDS})::text)"
)
# The most readers' scope counts kept at once (PostgresKeywords.scope_count).
SCOPE_COUNTS_KEPT = 1024
_NEWEST_FACT = select(func.max(facts.c.id))
# Each term's stems, as the index holds them (the same cut into runs as _tsquery).
_STEMS = text(
    f"SELECT n, tsvector_to_array(to_tsvector('{TS_CONFIG}'::regconfig, "
    f"regexp_replace(t, '{_NOT_ALNUM}', ' ', 'g'))) "
    "FROM unnest(CAST(:terms AS text[])) WITH ORDINALITY AS u(t, n)"
)


def _memory_key(conn: Connection) -> str:
    """Which memory a kept statistic is of: its database's URL (an engine's id comes
    back for another database once the engine is gone)."""
    return conn.engine.url.render_as_string()


def _newest_holders(clauses: list[Any], terms: int, more: Callable[[int], list[Any]]) -> Any:
    """Each of `terms` terms' newest :limit holders that pass `clauses` and the term's own
    conditions `more(i)`: rows (the term's place, fact id, characters of content)."""
    parts = []
    for i in range(terms):
        newest = (
            select(facts.c.id, func.length(facts.c.content).label("n"))
            .where(_TSV.op("@@")(_tsquery(bindparam(f"term{i}"))), *more(i), *clauses)
            .order_by(facts.c.id.desc())
            .limit(bindparam("limit"))
            .subquery(f"t{i}")
        )
        parts.append(select(literal(i).label("term"), newest.c.id, newest.c.n))
    return union_all(*parts) if len(parts) > 1 else parts[0]


def _plans(conn: Connection, generic: bool) -> None:
    """This transaction's statements from here on: planned once for any parameters
    (generic), or for each run's own."""
    conn.exec_driver_sql(f"SELECT {_GENERIC_PLAN if generic else _CUSTOM_PLAN}")


def _in_blocks(i: int) -> list[Any]:
    """In one of the blocks `:blocks<i>` names ("b97 | b96"), through the GIN index."""
    return [_BLOCK.op("@@")(func.to_tsquery("simple", bindparam(f"blocks{i}")))]


def _below(i: int) -> list[Any]:
    return [facts.c.id < bindparam(f"below{i}")]


class PostgresKeywords:
    def __init__(self) -> None:
        self._statements = Statements()
        self._statistics: dict[str, tuple[float, dict[str, float] | None, int]] = {}
        # scope_count's counts: (database, tokens) -> (when, facts counted, the most
        # asked, the newest fact's id then).
        self._scope_counts: dict[tuple[str, tuple[str, ...]], tuple[float, int, int, int]] = {}

    def matches_statement(self, clauses: list[Any], terms: int, scoped: bool = False) -> Any:
        if scoped:  # the reader's tokens (match_params)
            clauses = [_in_scope(bindparam("scope")), *clauses]
        return _newest_holders(clauses, terms, lambda i: [])

    def match_params(
        self, terms: Sequence[str], limit: int, scope: Sequence[str] | None = None
    ) -> dict[str, Any]:
        params: dict[str, Any] = {f"term{i}": t for i, t in enumerate(terms)}
        if scope:
            params["scope"] = _scope_query(scope)
        return {**params, "limit": limit}

    def matches(
        self,
        conn: Connection,
        terms: Sequence[str],
        limit: int,
        scope: Sequence[str] | None,
        statement: StatementOf,
    ) -> Sequence[Any]:
        """Two ways to a word's newest visible holders, which give the same rows:

        - a common word's holders are walked newest first, the primary key backwards,
          until `limit` pass the rules (matches_statement);
        - a rare word's holders, all of them, are read through the GIN index and have
          the rules asked once each (_among_statement). A word is rare when one of its
          stems is missing from the planner's list of the column's most common ones
          (pg_stats), and then holds few facts, whoever may read them (FEW_HOLDERS).

        The planner chose between the two by its estimate of the word alone, and for a
        stem outside its list (held by none, or by a few hundred of a million facts) it
        walked the primary key to the end: 0.4-8.6 s a word at a million facts, ~35 ms
        at 100k (a typo finds nothing slowly). Counting every word's holders first cost
        more than it saved on common words (+30% on hybrid's keyword half at 100k).

        The statements run with hashing their subqueries out of the planner's reach:
        the read rules test a fact's tags with EXISTS subqueries, which PostgreSQL
        would turn into hash tables of every fact holding the tags the rules name
        (at 100k facts, 25,000 rows and ~10 ms a word for the bench's rules), where a
        walk reads a few hundred rows and probes each one's tags by index. A hash must
        fit work_mem to be chosen; for these statements none does.

        A walk is planned for its words every time: only a plan made for the word walks
        it well. The two ways chosen here beforehand, a common word's blocks and a rare
        word's holders' rules, have one good plan whatever the words (the index of words
        and blocks; the ids given), so theirs is made once (a generic plan, from psycopg's
        preparing a statement on its 5th run on a connection): planning the blocks'
        statement for its words was a quarter of its time (6.2 -> 4.6 ms p50 at 100k
        facts, 7.2 -> 4.9 at a million, the bench's rules and sentences). A walk planned
        once read every holder of its words: faster at 100k, six times slower at a million
        (16 -> 103 ms p50 a statement), and the walk below a word's blocks 28 times slower
        (2.7 -> 75 at 100k). bench.keyword_plans_bench prints each kind both ways."""
        conn.exec_driver_sql(_WALK_SETTINGS)
        # A reader the scope tokens narrow walks its own part already (the tokens in each
        # walk's WHERE): counting a word's holders would count everyone's.
        maybe, few, blocks = self._kinds(conn, terms, limit) if scope is None else ([], 0, {})
        held = self._holders(conn, [terms[i] for i in maybe], few) if maybe else {}
        rare = {maybe[k]: ids for k, ids in held.items() if len(ids) <= few}
        common = [i for i in range(len(terms)) if i not in rare and i not in blocks]
        rows: list[Any] = []
        reads_rare = any(rare.values())
        chosen = bool(blocks) or reads_rare
        if chosen:
            _plans(conn, generic=True)
        if reads_rare:
            among = statement("among", self._among_statement)
            asked = {"ids": sorted({f for ids in rare.values() for f in ids})}
            passed = dict(conn.execute(among, asked).tuples().all())
            for i, ids in rare.items():
                newest = sorted((f for f in ids if f in passed), reverse=True)[:limit]
                rows += [(i, f, passed[f]) for f in newest]
        if blocks:
            rows += self._newest_in_blocks(conn, terms, blocks, limit, statement)
        if common:
            if chosen:
                _plans(conn, generic=False)
            walked = walk_matches(self, conn, [terms[i] for i in common], limit, scope, statement)
            rows += [(common[t], f, n) for t, f, n in walked]
        # Not in a `finally`: after a failed statement the transaction is aborted (and
        # rolls the settings back with it), and a RESET there would raise a second error
        # over the first, hiding the database fault a 503 is made from.
        conn.exec_driver_sql("RESET work_mem; RESET plan_cache_mode")
        return rows

    def _kinds(
        self, conn: Connection, terms: Sequence[str], limit: int
    ) -> tuple[list[int], int, dict[int, int]]:
        """Which way each term is read: the terms one of whose stems the planner's
        statistics do not count among the column's most common (a term without a stem
        matches nothing: rare too) and how many holders a rare word may have in this
        memory; and the terms of one common stem frequent enough that MAX_BLOCKS blocks
        should hold `limit` of their holders, with the blocks to ask (_newest_in_blocks).
        Neither when there are no statistics yet: then every term is walked, as the
        planner would choose."""
        common, facts_held = self._common_stems(conn)
        few = max(FEW_HOLDERS, facts_held // FEW_HOLDERS_PER)
        if common is None:
            return [], few, {}
        stems = conn.execute(_STEMS, {"terms": list(terms)}).tuples().all()
        by_term = {int(n) - 1: lexemes or [] for n, lexemes in stems}
        maybe = [
            i
            for i in range(len(terms))
            if not by_term.get(i) or any(lexeme not in common for lexeme in by_term[i])
        ]
        blocks = {}
        for i, lexemes in by_term.items():
            if len(lexemes) == 1 and lexemes[0] in common:
                per_block = common[lexemes[0]] * BLOCK_IDS * BLOCK_SHARE
                wanted = math.ceil(limit / per_block) if per_block > 0 else MAX_BLOCKS + 1
                if wanted <= MAX_BLOCKS:
                    blocks[i] = wanted
        return maybe, few, blocks

    def _common_stems(self, conn: Connection) -> tuple[dict[str, float] | None, int]:
        """pg_stats' most common stems of facts.content_tsv with the share of facts
        holding each, and the planner's count of facts (ANALYZE keeps them), read again
        after STATS_KEPT_S: only which way a word is read depends on them."""
        key = _memory_key(conn)
        kept = self._statistics.get(key)
        now = time.monotonic()
        if kept is not None and now - kept[0] < STATS_KEPT_S:
            return kept[1], kept[2]
        stems, shares, count = conn.execute(_STATISTICS).one()
        # pg_stats gives a share for each stem, then three of its own (least, most, and
        # the share of facts with no words): those are not a stem's. A stem without a
        # share still counts as common, and is never read by blocks.
        known: list[float] = list(shares or [])
        common = (
            {stem: known[k] if k < len(known) else 0.0 for k, stem in enumerate(stems)}
            if stems
            else None
        )
        facts_held = max(0, int(count or 0))
        self._statistics[key] = (now, common, facts_held)
        return common, facts_held

    def _newest_in_blocks(
        self,
        conn: Connection,
        terms: Sequence[str],
        blocks: dict[int, int],
        limit: int,
        statement: StatementOf,
    ) -> list[Any]:
        """The newest `limit` holders that pass the clauses of each term of `blocks`, read
        through the index among the term's newest blocks (BLOCK_IDS): the same rows as
        the walk of the primary key, since every holder newer than those found is in a
        block asked. A term whose blocks hold fewer is walked on below them."""
        asked = list(blocks)
        newest = int(conn.execute(_NEWEST_FACT).scalar_one() or 0)
        top = newest // BLOCK_IDS
        # The newest block is being filled: it is asked beside the full ones.
        lowest = {i: max(0, top - blocks[i]) for i in asked}
        params: dict[str, Any] = {"limit": limit}
        for k, i in enumerate(asked):
            params[f"term{k}"] = terms[i]
            params[f"blocks{k}"] = " | ".join(f"b{b}" for b in range(top, lowest[i] - 1, -1))
        stmt = statement(
            f"blocks-{len(asked)}", lambda c: _newest_holders(c, len(asked), _in_blocks)
        )
        found: dict[int, list[tuple[int, int]]] = {i: [] for i in asked}
        for k, fid, n in conn.execute(stmt, params):
            found[asked[k]].append((fid, n))
        short = [i for i in asked if len(found[i]) < limit and lowest[i] > 0]
        if short:
            _plans(conn, generic=False)  # a walk, below the blocks
            params = {"limit": limit}
            for k, i in enumerate(short):
                params[f"term{k}"] = terms[i]
                params[f"below{k}"] = lowest[i] * BLOCK_IDS
            stmt = statement(
                f"below-{len(short)}", lambda c: _newest_holders(c, len(short), _below)
            )
            for k, fid, n in conn.execute(stmt, params):
                found[short[k]].append((fid, n))
        return [(i, fid, n) for i in asked for fid, n in found[i][:limit]]

    def _holders(self, conn: Connection, terms: Sequence[str], few: int) -> dict[int, list[int]]:
        """Each term's holders through the GIN index, at most `few` + 1 of them,
        whatever the rules: only how many they are decides, never which rows."""

        def build() -> Any:
            parts = []
            for i in range(len(terms)):
                held = (
                    select(facts.c.id)
                    .where(_TSV.op("@@")(_tsquery(bindparam(f"term{i}"))))
                    .limit(bindparam("few"))
                    .subquery(f"h{i}")
                )
                parts.append(select(literal(i).label("term"), held.c.id))
            return union_all(*parts) if len(parts) > 1 else parts[0]

        stmt = self._statements.get(("holders", len(terms)), build)
        # Asked only of words outside the planner's common stems, which it expects few
        # facts to hold: it reads them through the index's bitmap.
        found: dict[int, list[int]] = {i: [] for i in range(len(terms))}
        params: dict[str, Any] = {f"term{i}": t for i, t in enumerate(terms)}
        params["few"] = few + 1
        for term, fid in conn.execute(stmt, params):
            found[term].append(fid)
        return found

    def _among_statement(self, clauses: list[Any]) -> Any:
        """The facts among `:ids` that pass `clauses`: (id, characters of content)."""
        return select(facts.c.id, func.length(facts.c.content)).where(
            _ids_in(facts.c.id, "ids"), *clauses
        )

    def scope_members(
        self, conn: Connection, tokens: Sequence[str], limit: int, after: int = 0
    ) -> list[int]:
        stmt = (
            select(facts.c.id)
            .where(_in_scope(bindparam("scope")), facts.c.id > bindparam("after"))
            .order_by(facts.c.id)
            .limit(limit)
        )
        params = {"scope": _scope_query(tokens), "after": after}
        return list(conn.execute(stmt, params).scalars())

    def scope_count(self, conn: Connection, tokens: Sequence[str], at_most: int) -> int:
        # The count decides only which way a search reads the reader's part, never what
        # it finds, and counting is most of that choice's cost (1.2-2.5 ms for 1,250 to
        # 5,000 members): it is kept for STATS_KEPT_S, as the common stems are. Fact ids
        # grow and each new fact adds at most one member, so a kept count answers while
        # the facts stored since could not have taken the part past `at_most`: a bulk
        # import into a small part is counted again at the next search.
        key = (_memory_key(conn), tuple(tokens))
        now = time.monotonic()
        newest = int(conn.execute(_NEWEST_FACT).scalar_one() or 0)
        kept = self._scope_counts.get(key)
        if kept is not None and now - kept[0] < STATS_KEPT_S:
            _, counted, asked, then = kept
            if counted > at_most:  # more than at_most then (or than asked), and now
                return at_most + 1
            grown = counted + max(0, newest - then)
            if counted <= asked and grown <= at_most:  # counted exactly: at most this now
                return grown
        first = select(facts.c.id).where(_in_scope(bindparam("scope"))).limit(at_most + 1)
        stmt = select(func.count()).select_from(first.subquery())
        counted = int(conn.execute(stmt, {"scope": _scope_query(tokens)}).scalar_one())
        if len(self._scope_counts) >= SCOPE_COUNTS_KEPT:
            self._scope_counts.clear()
        self._scope_counts[key] = (now, counted, at_most, newest)
        return counted

    def document_frequency(self, conn: Connection, term: str) -> int:
        stmt = select(func.count()).where(_TSV.op("@@")(_tsquery(bindparam("term"))))
        return conn.execute(stmt.select_from(facts), {"term": term}).scalar_one()


class _SentVector(TypeDecorator[bytes]):
    """halfvec_send's bytes (int16 width, int16 unused, float2 big-endian) as the float32
    little-endian bytes every reader unpacks. Binary both ways: pgvector's text form
    cost 190 us a vector to write and 190 to read (200 candidates: 38 ms), this ~10."""

    impl = LargeBinary
    cache_ok = True

    def process_result_value(self, value: Any, dialect: Any) -> bytes | None:
        if value is None:
            return None
        return np.frombuffer(value, ">f2", offset=4).astype("<f4").tobytes()


def _binary_vectors(conn: Connection) -> None:
    """Let this connection send numpy arrays to vector columns in pgvector's binary form
    (registered once per connection: it looks the type up)."""
    pooled = conn.connection
    if not pooled.info.get("pgvector"):
        try:
            register_vector(pooled.dbapi_connection)  # type: ignore[arg-type]
        except psycopg.ProgrammingError as exc:
            if exc.sqlstate is not None:
                raise  # the server's, not pgvector's finding
            # pgvector's own, outside SQLAlchemy: its type lookup found no vector type,
            # so the extension is not in this database.
            log.warning("the vectors cannot be read or written: %s", exc)
            raise Unavailable(NO_EXTENSION) from None
        pooled.info["pgvector"] = True


def _as_array(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype="<f4")


# What a restore can leave out while the schema's revision says the memory is complete
# (where the restoring role may not create the extension, pg_restore goes on without it,
# facts_vec, its keys and its HNSW index), each with the owner's way back:
# docs/postgresql.md, "Backups".
_REMAKE = (
    "restore the dump again into a database where the pgvector extension is installed, "
    "or run `embornal memory reindex --rebuild`, which makes facts_vec again and embeds "
    "every fact (docs/postgresql.md, Backups)"
)
NO_EXTENSION = (
    "the pgvector extension (vector) is not installed in this database, and the vector "
    "table facts_vec cannot hold vectors without it: an administrator installs it (CREATE "
    f"EXTENSION vector), then {_REMAKE}"
)
NO_TABLE = f"the vector table facts_vec is missing (a restore that skipped it?): {_REMAKE}"
NO_COLUMN = (
    "the vector table facts_vec has lost its vectors (the pgvector extension was removed "
    f"and put back?): {_REMAKE}"
)
NO_INDEX = (
    f"the vector table facts_vec has no HNSW index ({HNSW_INDEX}): searches by meaning "
    "read every vector, slowly in a large memory; restore it from the dump (pg_restore "
    f"--index={HNSW_INDEX}) or run `embornal memory reindex --rebuild` (docs/postgresql.md, "
    "Backups)"
)
# One look at the catalog (~0.1 ms): the extension, facts_vec, its vector column, its
# HNSW index, by the names the queries use (the search path's).
_PARTS = text(
    "SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'vector'), "
    "to_regclass('facts_vec') IS NOT NULL, "
    "EXISTS (SELECT FROM pg_attribute WHERE attrelid = to_regclass('facts_vec') "
    "AND attname = 'embedding' AND NOT attisdropped), "
    f"to_regclass('{HNSW_INDEX}') IS NOT NULL"
)


def vectors_missing(conn: Connection) -> VectorsMissing | None:
    extension, table, column, index = conn.execute(_PARTS).one()
    if not extension:
        return VectorsMissing(NO_EXTENSION)
    if not table:
        return VectorsMissing(NO_TABLE)
    if not column:
        return VectorsMissing(NO_COLUMN)
    if not index:
        return VectorsMissing(NO_INDEX, usable=True)
    return None


class PostgresVectors:
    in_database = True

    def stored(self) -> Any:
        # One index probe per fact read: the readers read a page's or a search's
        # candidates (at most a few hundred), or stream an export.
        sent = type_coerce(func.halfvec_send(_VECTORS.c.embedding), _SentVector())
        return select(sent).where(_VECTORS.c.fact_id == facts.c.id).scalar_subquery()

    def write(self, conn: Connection, fact_ids: Sequence[int], blobs: Sequence[bytes]) -> None:
        _binary_vectors(conn)
        stmt = pg_insert(_VECTORS).values(
            fact_id=bindparam("f"), embedding=bindparam("v", type_=_ANY)
        )
        conn.execute(
            stmt.on_conflict_do_update(
                index_elements=["fact_id"], set_={"embedding": stmt.excluded.embedding}
            ),
            [{"f": fid, "v": _as_array(blob)} for fid, blob in zip(fact_ids, blobs, strict=True)],
        )

    def recreate(self, conn: Connection, width: int) -> None:
        conn.exec_driver_sql("DROP TABLE IF EXISTS facts_vec")
        create_vector_table(conn, int(width))

    def pause_index(self, conn: Connection) -> bool:
        there = conn.exec_driver_sql(f"SELECT to_regclass('{HNSW_INDEX}')").scalar()
        conn.exec_driver_sql(f"DROP INDEX IF EXISTS {HNSW_INDEX}")
        return there is not None

    def build_index(self, conn: Connection) -> None:
        build_hnsw_index(conn)

    def missing(self, conn: Connection) -> VectorsMissing | None:
        return vectors_missing(conn)

    def estimated_vectors(self, conn: Connection) -> int:
        # The planner's estimate (kept by ANALYZE and autovacuum): a count would read
        # the table. Before any, -1: then the count, on a memory that is new.
        estimate = conn.exec_driver_sql(
            "SELECT reltuples FROM pg_class WHERE oid = 'facts_vec'::regclass"
        ).scalar()
        if estimate is not None and estimate >= 0:
            return int(estimate)
        return int(conn.exec_driver_sql("SELECT count(*) FROM facts_vec").scalar_one())

    def nearest(
        self,
        conn: Connection,
        filters: list[Any],
        query: np.ndarray,
        want: int,
        within: Sequence[str] | None = None,
    ) -> list[tuple[int, float]]:
        """HNSW under the filters: pgvector 0.8's iterative scan keeps walking the
        graph until `fetch` rows pass the WHERE (the ACL fragment included), so a
        filtered page fills instead of starving after a fixed-k scan. With `within`
        (scope tokens naming a small part of the memory), that part is scored whole
        instead: the graph's walk would go through the hidden neighbours first."""
        fetch = _fetch(want)
        _binary_vectors(conn)
        distance = _VECTORS.c.embedding.op("<=>", return_type=Float())(
            _as_half(bindparam("q", np.asarray(query, dtype=np.float32), type_=_ANY))
        )
        if within:
            return _nearest_first(_part_scored(conn, within, filters, distance, fetch), want)
        _walk_settings(conn, fetch, ef_search_for(self.estimated_vectors(conn)))
        rows = conn.execute(_walk(filters, distance).limit(fetch)).all()
        if len(rows) < want:
            # The scan gave up (hnsw.max_scan_tuples) before the filters let `want`
            # through: the filters keep few facts, so score all of them exactly.
            rows = _every_scored(conn, filters, distance, fetch)
        return _nearest_first(rows, want)

    def nearest_many(
        self,
        conn: Connection,
        filters: list[Any],
        queries: Sequence[np.ndarray],
        wants: Sequence[int],
        close: bool = False,
    ) -> list[list[tuple[int, float]]]:
        """`nearest` for each query (wanting `wants[i]`), the walks of queries that fetch
        alike in one statement: a LATERAL join walks the HNSW graph once per query, with
        the settings and the per-candidate filters `nearest` uses, so each query gets the
        rows its own statement would. A query the walk leaves short (the filters keep
        few facts) is asked again on its own, as `nearest` tops it up."""
        found: list[list[tuple[int, float]]] = [[] for _ in queries]
        # A near-duplicate check asks for its few facts and their overfetch only: each
        # row fetched is a candidate whose access rules were asked.
        fetches = [OVERFETCH * want if close else _fetch(want) for want in wants]
        ef = SIMILAR_EF_SEARCH if close else ef_search_for(self.estimated_vectors(conn))
        for fetch in sorted(set(fetches)):
            numbers = [n for n, f in enumerate(fetches) if f == fetch]
            _walk_settings(conn, fetch, ef)
            asked = values(column("n", Integer), column("q", VECTOR()), name="asked").data(
                [(n, np.asarray(queries[n], dtype=np.float32)) for n in numbers]
            )
            # A VALUES column's parameters arrive as text: the cast makes them vectors.
            distance = _VECTORS.c.embedding.op("<=>", return_type=Float())(
                _as_half(cast(asked.c.q, VECTOR()))
            )
            walk = _walk(filters, distance).limit(fetch).lateral("walk")
            rows: dict[int, list[tuple[int, float]]] = {n: [] for n in numbers}
            stmt = select(asked.c.n, walk.c.fact_id, walk.c.distance).select_from(
                asked.join(walk, true())
            )
            for n, fid, d in conn.execute(stmt):
                rows[n].append((int(fid), float(d)))
            for n in numbers:
                if len(rows[n]) < wants[n]:
                    found[n] = self.nearest(conn, filters, queries[n], wants[n])
                else:
                    found[n] = _nearest_first(rows[n], wants[n])
        return found


def _as_half(query: Any) -> Any:
    """The query vector (sent as a float32 vector) as the column's type: the HNSW
    index's operator class compares halfvec with halfvec."""
    return cast(query, HALFVEC())


def _fetch(want: int) -> int:
    """How many rows an HNSW walk asks for to hand back `want`."""
    return max(OVERFETCH * want, 40)


def ef_search_for(vectors: int) -> int:
    """A search's hnsw.ef_search in a memory of `vectors` (EF_SEARCH, widened past
    EF_SIZE). Read when a walk starts, so that a bench may replace it."""
    if vectors <= EF_SIZE:
        return EF_SEARCH
    return min(EF_SEARCH_MOST, round(EF_SEARCH * math.sqrt(vectors / EF_SIZE)))


def _walk_settings(conn: Connection, fetch: int, ef_search: int) -> None:
    """pgvector 0.8's iterative scan, wide enough for `fetch` rows (this transaction)."""
    conn.exec_driver_sql("SET LOCAL hnsw.iterative_scan = relaxed_order")
    ef = min(max(ef_search, fetch), EF_SEARCH_MOST)
    conn.exec_driver_sql(f"SET LOCAL hnsw.ef_search = {ef}")


def _walk(filters: list[Any], distance: Any) -> Any:
    """The HNSW walk, nearest first, keeping the candidates the filters keep.

    The filters are asked per candidate, as a scalar subquery over the fact's row (its
    primary key, then the ACL probes): PostgreSQL does not flatten that into a join. As
    a join, the planner underestimated the visible facts and chose to build all of them
    first and compare each candidate with each (10k facts: 27 ms, against a few ms
    walking the index)."""
    visible = (
        select(facts.c.id)
        .where(facts.c.id == _VECTORS.c.fact_id, *filters)
        .correlate(_VECTORS)
        .scalar_subquery()
    )
    return (
        select(_VECTORS.c.fact_id, distance.label("distance"))
        .where(visible.is_not(None))
        .order_by(distance)
    )


def _every_scored(conn: Connection, filters: list[Any], distance: Any, fetch: int) -> Any:
    """The nearest `fetch` of every fact the filters keep, each scored exactly: the
    walk's last resort, when its filters keep few facts.

    The kept facts' ids are found first, as one array, and their vectors read by key:
    a cost in proportion to the facts kept. As a join, the planner hashed the kept
    facts and read every vector past them, a cost in proportion to the memory (when a
    reader's part was scored this way: 5,000 facts among 105,000, 10,400 pages of
    facts_vec, 59 ms under EXPLAIN ANALYZE; by key 10-15 ms)."""
    scored = _scored_by_key(select(facts.c.id).where(*filters), distance)
    return conn.execute(
        select(scored.c.id, scored.c.distance).order_by(scored.c.distance).limit(fetch)
    ).all()


def _scored_by_key(ids: Any, distance: Any) -> Any:
    """(id, distance) of each fact the statement `ids` names that has a vector: the ids
    taken as one array and each vector read by key, a cost in proportion to the ids.
    A materialized CTE with no ORDER BY: the planner cannot take the HNSW index for it."""
    return (
        select(_VECTORS.c.fact_id.label("id"), distance.label("distance"))
        .where(_VECTORS.c.fact_id == func.any(func.array(ids.scalar_subquery())))
        .cte("scored")
        .prefix_with("MATERIALIZED")
    )


def _part_scored(
    conn: Connection, tokens: Sequence[str], filters: list[Any], distance: Any, fetch: int
) -> Any:
    """The nearest `fetch` facts the filters keep among those holding one of the scope
    `tokens`: every holder scored exactly (its vector read by key), then the filters
    asked of the nearest first, one fact at a time, until `fetch` pass, as the HNSW walk
    asks them. Asking the filters of every holder first (the read rules, not deleted,
    no successor: an index probe each) was half the statement's time (5,000 holders:
    ~6 of 11 ms, bench.reader_cost_bench).

    The filters are asked of the nearest PART_HEAD x `fetch` holders only (a top-N sort
    keeps those alone: 0.45 ms, where sorting all 5,000 took 1.8 of the statement's 7); a
    part where fewer pass there (facts hidden by a deny, deleted or superseded, nearest
    the query) is asked again with every holder in order: the same rows either way."""
    # Planned for its own scope each time (_CUSTOM_PLAN): with the generic plan for any
    # scope and head, `nearest` took 11.3 ms p50 against 7.5 (bench.reader_cost_bench's
    # shared memory, semantic, embedding kept).
    scored = _scored_by_key(select(facts.c.id).where(_in_scope(bindparam("scope"))), distance)
    nearest_first = (
        select(scored.c.id, scored.c.distance)
        .order_by(scored.c.distance, scored.c.id)
        .limit(bindparam("head", type_=Integer))  # NULL: every holder
        .subquery("nearest_first")
    )
    kept = (
        select(facts.c.id)
        .where(facts.c.id == nearest_first.c.id, *filters)
        .correlate(nearest_first)
        .scalar_subquery()
    )
    stmt = (
        select(nearest_first.c.id, nearest_first.c.distance).where(kept.is_not(None)).limit(fetch)
    )
    scope = _scope_query(tokens)
    _plans(conn, generic=False)
    rows = conn.execute(stmt, {"scope": scope, "head": PART_HEAD * fetch}).all()
    if len(rows) < fetch:
        rows = conn.execute(stmt, {"scope": scope, "head": None}).all()
    # Not in a `finally`, as after the keyword walks (PostgresKeywords.matches).
    conn.exec_driver_sql("RESET plan_cache_mode")
    return rows


def _nearest_first(rows: Iterable[Any], want: int) -> list[tuple[int, float]]:
    # relaxed_order: nearly sorted; the distances are exact, so sort by them.
    ranked = sorted(((int(i), float(d)) for i, d in rows), key=lambda p: (p[1], p[0]))
    return ranked[:want]


def create_vector_table(conn: Connection, width: int) -> None:
    """facts_vec at `width`, with its HNSW index for cosine distance (the migration's DDL)."""
    conn.exec_driver_sql(
        f"CREATE TABLE facts_vec (fact_id INTEGER PRIMARY KEY "
        f"REFERENCES facts (id) ON DELETE CASCADE, embedding halfvec({int(width)}) NOT NULL)"
    )
    create_hnsw_index(conn)


def create_hnsw_index(conn: Connection, links: int = HNSW_LINKS) -> None:
    """facts_vec's HNSW index for cosine distance, each vector linked to `links` others
    (pgvector's default is 16; ours, since migration 0016, HNSW_LINKS), ef_construction
    64."""
    conn.exec_driver_sql(
        f"CREATE INDEX IF NOT EXISTS {HNSW_INDEX} ON facts_vec "
        f"USING hnsw (embedding halfvec_cosine_ops) WITH (m = {int(links)})"
    )


def build_hnsw_index(conn: Connection, links: int = HNSW_LINKS) -> None:
    """create_hnsw_index over the vectors facts_vec holds (after a bulk load, or in a
    migration that builds the graph again), with the memory and time such a build needs,
    in the caller's transaction."""
    # The graph is built in memory when it fits maintenance_work_mem, and spills to
    # pages, many times slower, when it does not: give this build what the vectors need
    # (about their size and half again), within bounds.
    count, width = conn.exec_driver_sql(
        "SELECT count(*), coalesce(max(vector_dims(embedding)), 0) FROM facts_vec"
    ).one()
    wanted = int(count) * (6 * int(width) + 256) // 2**20 + 64
    memory = max(64, min(BUILD_MEMORY_MB, wanted))
    conn.exec_driver_sql(f"SET LOCAL maintenance_work_mem = '{memory}MB'")
    # Minutes for millions of vectors: past any request's statement timeout.
    conn.exec_driver_sql("SET LOCAL statement_timeout = 0")
    create_hnsw_index(conn, links)


class PostgresBackend:
    name = "postgresql"

    def __init__(self) -> None:
        self.keywords = PostgresKeywords()
        self.vectors = PostgresVectors()
        self.statements = Statements()

    def insert(self, table: Table) -> Any:
        return pg_insert(table)

    def ids_in(self, column: ColumnElement[Any], name: str) -> ColumnElement[bool]:
        return _ids_in(column, name)

    def ids_locked_in(self, column: ColumnElement[Any], name: str) -> ColumnElement[bool]:
        # An UPDATE locks rows in the order its plan reads them (the heap's, which each
        # update changes): 16 searches recalling overlapping facts at once deadlocked
        # (DeadlockDetected, a 500) about one in eight. Locking in id order first does not.
        locked = column.table.alias(f"{column.table.name}_locked")
        own = locked.c[column.key]
        in_order = select(own).where(self.ids_in(own, name)).order_by(own)
        return column.in_(in_order.with_for_update())

    def after_explicit_ids(self, conn: Connection, table: Table) -> None:
        key = next(iter(table.primary_key.columns)).name
        conn.execute(
            text(
                f"SELECT setval(pg_get_serial_sequence(:table, :key), "
                f"coalesce((SELECT max({key}) FROM {table.name}), 0) + 1, false)"
            ),
            {"table": table.name, "key": key},
        )

    def database_file(self, engine: Engine) -> Path | None:
        return None  # the memory is on the server

    def database_bytes(self, engine: Engine) -> int | None:
        with engine.connect() as conn:
            size = conn.execute(text("SELECT pg_database_size(current_database())")).scalar()
        return int(size) if size is not None else None

    def dump_command(self, engine: Engine, target: Path) -> tuple[list[str], dict[str, str]] | None:
        """pg_dump's custom format: consistent (one snapshot), compressed, and what
        pg_restore reads. The password goes in the environment, never on the command
        line, where other users' `ps` would show it."""
        pg_dump = shutil.which("pg_dump")
        if pg_dump is None:
            raise Unavailable(
                "this memory is in PostgreSQL and pg_dump is not on PATH: install the "
                "PostgreSQL client tools, or run on a machine that has them: "
                "pg_dump --format=custom --file=FILE 'postgresql://USER@HOST/DB' "
                "(restore with pg_restore --dbname=... FILE)"
            )
        url = engine.url
        env = {"PGPASSWORD": url.password} if url.password else {}
        libpq = url.set(drivername="postgresql", password=None)
        dsn = libpq.render_as_string(hide_password=False)
        return [pg_dump, "--format=custom", f"--file={target}", f"--dbname={dsn}"], env

    def lock_schema(self, conn: Connection) -> None:
        # A constant key, not a function of the schema: on an empty database there is
        # none yet. The second replica waits, then finds the schema at head.
        conn.execute(text(f"SELECT pg_advisory_xact_lock({SCHEMA_LOCK})"))

    def fold_log(self, engine: Engine) -> None:
        pass  # the server keeps its own log, and a backup is pg_dump's

    def lock_tree(self, conn: Connection) -> None:
        # The migration's function: one advisory lock, held to the end of the transaction.
        conn.execute(text("SELECT embornal_lock_tree()"))
