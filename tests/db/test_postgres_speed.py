"""PostgreSQL's cures of issue 33: one copy of each vector, kept at half precision,
prepared statements that survive read transactions, keyword walks whose settings stay
in them, and HNSW built after a bulk load."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from sqlalchemy import Engine, select

from app.db import migrate
from app.db.dialects import backend as backend_of
from app.db.dialects.postgresql import HNSW_INDEX, HNSW_LINKS
from app.db.engine import make_engine, read_transaction, write_transaction
from app.db.tables import facts
from app.errors import Conflict
from app.runtime import Runtime
from app.services import facts as fact_service
from app.services import search as search_service
from app.services.facts import NewFact
from app.usecases.memory import Memory
from tests.conftest import TEST_WIDTH
from tests.postgres import PostgresForTests
from tests.statements import executed


@pytest.fixture(scope="module")
def backend() -> str:
    return "postgresql"


BY_ID = "SELECT id, embedding FROM facts WHERE id = ANY(%(i)s)"


def unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(TEST_WIDTH).astype("<f4")
    return v / np.linalg.norm(v)


def half(vector: np.ndarray) -> bytes:
    """The float32 bytes a vector is read back as once kept as IEEE halves (0011)."""
    return vector.astype("<f2").astype("<f4").tobytes()


@contextmanager
def empty_database(postgres: PostgresForTests) -> Iterator[Engine]:
    """An engine on a new database with nothing in it, dropped afterwards: where a
    migration test upgrades and downgrades by revision."""
    url = postgres.new_empty_database()
    engine = make_engine(url)
    try:
        yield engine
    finally:
        engine.dispose()
        postgres.drop_database(url)


def test_0009_leaves_one_copy_in_facts_vec_and_the_downgrade_writes_the_bytes_back(
    postgres: PostgresForTests,
) -> None:
    with empty_database(postgres) as engine:
        migrate.upgrade(engine, TEST_WIDTH, revision="0008")
        vectors = [unit(k) for k in range(12)]
        with engine.begin() as conn:
            ids = []
            for k, vector in enumerate(vectors):
                fid = conn.exec_driver_sql(
                    "INSERT INTO facts (path_id, content, owner, created_at, embedding) "
                    "VALUES (1, %(c)s, 'default', 0, %(e)s) RETURNING id",
                    {"c": f"fact {k}", "e": vector.tobytes() if k != 5 else None},
                ).scalar_one()
                ids.append(fid)
                if k not in (5, 7):  # 5 waits for a model; 7 lost its facts_vec row
                    conn.exec_driver_sql(
                        "INSERT INTO facts_vec (fact_id, embedding) VALUES (%(f)s, %(v)s)",
                        {"f": fid, "v": "[" + ",".join(map(str, vector.tolist())) + "]"},
                    )
        migrate.upgrade(engine, TEST_WIDTH)
        with read_transaction(engine) as conn:
            kind = conn.exec_driver_sql(
                "SELECT data_type FROM information_schema.columns "
                "WHERE table_name = 'facts' AND column_name = 'embedding'"
            ).scalar_one()
            assert kind == "boolean"
            flags = dict(
                conn.exec_driver_sql(
                    "SELECT id, embedding FROM facts WHERE id = ANY(%(i)s)", {"i": ids}
                )
                .tuples()
                .all()
            )
            # Fact 7 claimed a vector facts_vec did not hold: it waits for the model again.
            assert [flags[i] for i in ids] == [None if k in (5, 7) else True for k in range(12)]
            stored = backend_of(conn).vectors.stored()
            read = dict(conn.execute(select(facts.c.id, stored).where(facts.c.id.in_(ids))).all())
            for k, fid in enumerate(ids):
                if k in (5, 7):
                    assert read[fid] is None
                else:
                    assert read[fid] == half(vectors[k])  # kept as halves since 0011
            assert not conn.exec_driver_sql(
                "SELECT count(*) FROM pg_trigger WHERE tgname = 'facts_vector_log'"
            ).scalar()
        migrate.downgrade(engine, "0008")
        with read_transaction(engine) as conn:
            back = dict(
                conn.exec_driver_sql(
                    "SELECT id, embedding FROM facts WHERE id = ANY(%(i)s)", {"i": ids}
                )
                .tuples()
                .all()
            )
            assert [back[fid] for fid in ids] == [
                None if k in (5, 7) else half(vectors[k]) for k in range(12)
            ]
        migrate.upgrade(engine, TEST_WIDTH)  # and up again


def test_a_stored_vector_is_kept_once_and_read_back_at_half_precision(actor) -> None:
    vector = unit(3)
    with actor().tx() as (conn, ctx):
        fact = fact_service.store_fact(
            conn, ctx, NewFact("/v", "one vector"), vector=vector.tobytes()
        )
        flag = conn.execute(select(facts.c.embedding).where(facts.c.id == fact.id)).scalar_one()
        assert flag is True  # facts holds no copy: only that facts_vec has it
        stored = backend_of(conn).vectors.stored()
        blob = conn.execute(select(stored).where(facts.c.id == fact.id)).scalar_one()
        assert blob == half(vector)  # each float rounded to the nearest half, no more
        assert np.abs(np.frombuffer(blob, "<f4") - vector).max() < 1e-3


def column_and_graph(conn) -> tuple[str, str]:
    """facts_vec.embedding's type and the operator class its HNSW index is built with."""
    kind = conn.exec_driver_sql(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = 'facts_vec'::regclass AND attname = 'embedding'"
    ).scalar_one()
    opclass = conn.exec_driver_sql(
        "SELECT opc.opcname FROM pg_index i JOIN pg_opclass opc ON opc.oid = i.indclass[0] "
        f"WHERE i.indexrelid = '{HNSW_INDEX}'::regclass"
    ).scalar_one()
    return kind, opclass


def test_0011_keeps_vectors_as_halves_and_the_downgrade_widens_them(
    postgres: PostgresForTests,
) -> None:
    with empty_database(postgres) as engine:
        migrate.upgrade(engine, TEST_WIDTH, revision="0010")
        vectors = [unit(k) for k in range(6)]
        with engine.begin() as conn:
            ids = []
            for k, vector in enumerate(vectors):
                fid = conn.exec_driver_sql(
                    "INSERT INTO facts (path_id, content, owner, created_at, embedding) "
                    "VALUES (1, %(c)s, 'default', 0, true) RETURNING id",
                    {"c": f"fact {k}"},
                ).scalar_one()
                ids.append(fid)
                conn.exec_driver_sql(
                    "INSERT INTO facts_vec (fact_id, embedding) VALUES (%(f)s, %(v)s)",
                    {"f": fid, "v": "[" + ",".join(map(str, vector.tolist())) + "]"},
                )
        migrate.upgrade(engine, TEST_WIDTH)
        with read_transaction(engine) as conn:
            assert column_and_graph(conn) == (f"halfvec({TEST_WIDTH})", "halfvec_cosine_ops")
            stored = backend_of(conn).vectors.stored()
            read = dict(conn.execute(select(facts.c.id, stored).where(facts.c.id.in_(ids))).all())
            assert [read[fid] for fid in ids] == [half(v) for v in vectors]
            # The graph answers: each vector's nearest fact is its own.
            nearest = backend_of(conn).vectors.nearest
            assert [nearest(conn, [], v, 1)[0][0] for v in vectors] == ids
        migrate.downgrade(engine, "0010")
        with read_transaction(engine) as conn:
            assert column_and_graph(conn) == (f"vector({TEST_WIDTH})", "vector_cosine_ops")
            widened = conn.exec_driver_sql(
                "SELECT fact_id, vector_send(embedding) FROM facts_vec WHERE fact_id = ANY(%(i)s)",
                {"i": ids},
            ).all()
            back = {
                f: np.frombuffer(sent, ">f4", offset=4).astype("<f4").tobytes()
                for f, sent in widened
            }
            assert [back[fid] for fid in ids] == [half(v) for v in vectors]


def graph_links(conn) -> str | None:
    """The HNSW index's m as its options say (None: pgvector's default, 16)."""
    options = conn.exec_driver_sql(
        f"SELECT reloptions FROM pg_class WHERE oid = '{HNSW_INDEX}'::regclass"
    ).scalar_one()
    return next((o.partition("=")[2] for o in options or [] if o.startswith("m=")), None)


def test_0016_builds_a_sparser_graph_and_the_model_switch_and_bulk_load_keep_it(
    postgres: PostgresForTests,
) -> None:
    """Migration 0016 builds the graph at m 8; a new facts_vec (another model's width)
    and a graph rebuilt after a bulk load are made the same way; the downgrade goes back
    to pgvector's default."""
    with empty_database(postgres) as engine:
        migrate.upgrade(engine, TEST_WIDTH, revision="0015")
        with read_transaction(engine) as conn:
            assert graph_links(conn) is None
        migrate.upgrade(engine, TEST_WIDTH)
        with read_transaction(engine) as conn:
            assert graph_links(conn) == str(HNSW_LINKS) == "8"
        with write_transaction(engine) as conn:
            vectors = backend_of(conn).vectors
            vectors.recreate(conn, TEST_WIDTH + 8)
            assert graph_links(conn) == "8"
            assert vectors.pause_index(conn)
            vectors.build_index(conn)
            assert graph_links(conn) == "8"
            vectors.recreate(conn, TEST_WIDTH)
        migrate.downgrade(engine, "0015")
        with read_transaction(engine) as conn:
            assert graph_links(conn) == "16"


def fact_tag_indexes(conn) -> dict[str, str]:
    rows = conn.exec_driver_sql(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'fact_tags'"
    )
    return {name: definition for name, definition in rows}


def test_0017_the_tag_index_hands_out_fact_ids_without_the_table(
    postgres: PostgresForTests,
) -> None:
    """Migration 0017 puts the fact id in the (key, value) index of fact tags, so that the
    facts a rule's tag names are read from the index alone (no bitmap over the table,
    which the walks' small work_mem made lossy); the downgrade goes back to 0016's."""
    ids_of_a_tag = "EXPLAIN SELECT fact_id FROM fact_tags WHERE key = 'secret' AND value = 'yes'"
    with empty_database(postgres) as engine:
        migrate.upgrade(engine, TEST_WIDTH, revision="0016")
        with read_transaction(engine) as conn:
            assert set(fact_tag_indexes(conn)) == {"pk_fact_tags", "ix_fact_tags_key_value"}
        migrate.upgrade(engine, TEST_WIDTH)
        with write_transaction(engine) as conn:
            indexes = fact_tag_indexes(conn)
            assert set(indexes) == {"pk_fact_tags", "ix_fact_tags_key_value_fact"}
            assert indexes["ix_fact_tags_key_value_fact"].endswith("(key, value) INCLUDE (fact_id)")
            conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
            conn.exec_driver_sql("SET LOCAL enable_bitmapscan = off")
            plan = "\n".join(row[0] for row in conn.exec_driver_sql(ids_of_a_tag))
            assert "Index Only Scan using ix_fact_tags_key_value_fact" in plan, plan
        migrate.downgrade(engine, "0016")
        with read_transaction(engine) as conn:
            assert set(fact_tag_indexes(conn)) == {"pk_fact_tags", "ix_fact_tags_key_value"}


def test_prepared_statements_survive_read_transactions(rt: Runtime) -> None:
    """psycopg forgets what it prepared on a ROLLBACK: read transactions end with COMMIT,
    so a statement run often on a connection is prepared once and kept."""
    statement = select(facts.c.id).where(facts.c.id > 0).limit(1)
    for _ in range(8):
        with read_transaction(rt.engine) as conn:
            conn.execute(statement).all()
    with read_transaction(rt.engine) as conn:
        prepared = conn.exec_driver_sql(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%%LIMIT%%'"
        ).scalar()
    assert prepared >= 1


def test_keyword_walk_settings_end_with_the_walk(rt: Runtime, actor) -> None:
    with actor().tx() as (conn, ctx):
        fact_service.store_fact(conn, ctx, NewFact("/k", "a kettle on the stove"))
    with Memory(rt).transaction() as (conn, ctx):
        before = (
            conn.exec_driver_sql("SHOW work_mem").scalar(),
            conn.exec_driver_sql("SHOW plan_cache_mode").scalar(),
        )
        query = search_service.Query("kettle", "keyword", 10)
        half = search_service.keyword_half(conn, ctx, query)
        assert half.lengths  # found it
        after = (
            conn.exec_driver_sql("SHOW work_mem").scalar(),
            conn.exec_driver_sql("SHOW plan_cache_mode").scalar(),
        )
    assert after == before


def hnsw_exists(rt: Runtime) -> bool:
    with read_transaction(rt.engine) as conn:
        return conn.exec_driver_sql(f"SELECT to_regclass('{HNSW_INDEX}')").scalar() is not None


def test_a_bulk_load_builds_the_index_after_it_and_a_failed_one_keeps_it(
    rt: Runtime, actor
) -> None:
    with actor().tx() as (conn, ctx):
        assert backend_of(conn).vectors.pause_index(conn) is True
        assert backend_of(conn).vectors.pause_index(conn) is False  # nothing left to stop
        fact_service.store_facts(
            conn,
            ctx,
            [NewFact("/bulk", f"fact {k}") for k in range(30)],
            vectors=[unit(k).tobytes() for k in range(30)],
        )
        backend_of(conn).vectors.build_index(conn)
    assert hnsw_exists(rt)
    with pytest.raises(RuntimeError), actor().tx() as (conn, _ctx):
        backend_of(conn).vectors.pause_index(conn)
        raise RuntimeError("the load failed")
    assert hnsw_exists(rt)  # the drop went with the transaction
    with Memory(rt).transaction() as (conn, ctx):
        query = search_service.Query("", "semantic", 5, unit(4))
        order = search_service.rank(conn, ctx, query, rt.vector_index).order
    assert order[0][1] == pytest.approx(1.0, abs=1e-5)


def test_two_facts_of_one_batch_superseding_the_same_fact_are_one_conflict(actor) -> None:
    me = actor()
    with me.tx() as (conn, ctx):
        old = fact_service.store_fact(conn, ctx, NewFact("/s", "old"))
    twice = [NewFact("/s", f"new {k}", supersedes_id=old.id) for k in range(2)]
    with (
        pytest.raises(Conflict, match=f"fact {old.id} is already superseded"),
        me.tx() as (
            conn,
            ctx,
        ),
    ):
        fact_service.store_facts(conn, ctx, twice)
    with me.tx() as (conn, _ctx):
        count = conn.execute(select(facts.c.id).where(facts.c.supersedes_id == old.id)).all()
    assert count == []


def test_the_walk_widens_with_the_memory(rt: Runtime, actor, monkeypatch) -> None:
    from app.db.dialects import postgresql

    assert postgresql.ef_search_for(1_000) == postgresql.EF_SEARCH == 400
    assert postgresql.ef_search_for(100_000) == 400
    assert postgresql.ef_search_for(400_000) == 800  # 400 x sqrt(4)
    assert postgresql.ef_search_for(10_000_000) == postgresql.EF_SEARCH_MOST == 1000
    with actor().tx() as (conn, ctx):
        fact_service.store_facts(
            conn,
            ctx,
            [NewFact("/ef", f"fact {k}") for k in range(8)],
            vectors=[unit(k).tobytes() for k in range(8)],
        )

    def walked_with() -> int:
        with Memory(rt).transaction() as (conn, ctx):
            query = search_service.Query("", "semantic", 5, unit(2))
            search_service.rank(conn, ctx, query, rt.vector_index)
            return int(conn.exec_driver_sql("SHOW hnsw.ef_search").scalar_one())

    assert walked_with() == 400
    # The memory's size read when the walk starts: as if each vector stood for 100k.
    monkeypatch.setattr(postgresql, "EF_SIZE", 1)
    with read_transaction(rt.engine) as conn:
        vectors = backend_of(conn).vectors.estimated_vectors(conn)
    assert vectors >= 8
    assert walked_with() == min(1000, round(400 * vectors**0.5))


def test_a_word_held_by_few_or_by_many_is_found_alike(rt: Runtime, actor, monkeypatch) -> None:
    """PostgresKeywords.matches asks the rules of a rare word's holders, asks the index for
    a common word's holders among the newest blocks of ids (walking on below them when
    they hold too few), and walks a word it knows nothing of newest first: the three ways
    give the same holders, hidden, deleted and superseded facts among them."""
    from app.db.dialects import postgresql
    from tests.services.test_search import grant

    grant(
        rt,
        "p, writer, path:/*, write, allow",
        "p, writer, path:/*, read, allow",
        "p, writer, path:/*, delete, allow",
        "p, reader, path:/open/*, read, allow",
        "p, reader, tag:team=x, read, allow",
        "p, reader, path:/open/shut/*, read, deny",
        # A reader of all but two parts: its rules name the whole tree, so no scope
        # tokens narrow its walks, and the three ways are its to take.
        "p, wide, path:/*, read, allow",
        "p, wide, path:/closed/*, read, deny",
        "p, wide, path:/open/shut/*, read, deny",
    )
    writer = actor("writer")
    places = ["/open", "/open/shut", "/closed", "/open/deep"]

    def batch(first: int) -> list[NewFact]:
        return [
            NewFact(
                p,
                f"harbor {'kelp ' if k % 4 == 0 else ''}note {k}",
                tags={"team": "x"} if k % 5 == 0 else None,
            )
            for k in range(first, first + 30)
            for p in places
        ]

    with writer.tx() as (conn, ctx):
        stored = fact_service.store_facts(conn, ctx, batch(0))
        # The second batch three blocks of ids further on: a walk by blocks of the newest
        # finds some of a word's holders there and goes on below for the rest.
        conn.exec_driver_sql(
            "SELECT setval(pg_get_serial_sequence('facts', 'id'), %(at)s)",
            {"at": 3 * postgresql.BLOCK_IDS + 500},
        )
        fact_service.store_facts(conn, ctx, batch(30))
        fact_service.delete_fact(conn, ctx, stored[0].id)
        fact_service.store_facts(
            conn, ctx, [NewFact("/open", "harbor kelp note again", supersedes_id=stored[4].id)]
        )

    keywords = backend_of_rt(rt).keywords

    def holders(
        few: int, common: dict[str, float] | None, subject: str = "wide"
    ) -> dict[str, frozenset[int]]:
        """The keyword half's matches with these stems taken as common, each held by this
        share of the facts (None: no statistics, every word walked), and words of at most
        `few` holders read whole."""
        monkeypatch.setattr(postgresql, "FEW_HOLDERS", few)
        monkeypatch.setattr(keywords, "_common_stems", lambda _conn: (common, 0))
        with Memory(rt).transaction(subject) as (conn, ctx):
            query = search_service.Query("harbor kelp note", "keyword", 5)
            return dict(search_service.keyword_half(conn, ctx, query).matches)

    walked = holders(10_000, None)  # every word walked newest first
    asked = holders(10_000, {})  # every word's holders read whole
    with (
        executed(rt.engine, "to_tsvector('simple'::regconfig, 'b'") as by_blocks,
        executed(rt.engine, "below0") as below,
    ):
        blocked = holders(10_000, {"harbor": 1.0, "kelp": 1.0, "note": 1.0})
    assert by_blocks, "the common words were not read by blocks"
    assert below, "no word's walk went on below its blocks"
    # kelp (61 holders) read whole; harbor by blocks; note, too rare for blocks, walked.
    mixed = holders(80, {"harbor": 1.0, "note": 0.001})
    assert walked == asked == blocked == mixed
    assert walked["harbor"] and walked["kelp"] and walked["note"]
    # A reader whose scope tokens narrow the memory walks its own part, whatever is known.
    narrow = holders(10_000, None, "reader")
    assert narrow == holders(10_000, {"harbor": 1.0, "note": 1.0}, "reader")
    assert narrow["harbor"] and narrow["harbor"] != walked["harbor"]
    # Capped at the window, newest first, whichever way.
    monkeypatch.setattr(search_service, "MATCH_WINDOW", 7)
    capped = holders(10_000, None)
    assert capped == holders(10_000, {}) == holders(10_000, {"harbor": 1.0, "note": 1.0})
    assert len(capped["harbor"]) == 7

    # The planner's statistics: after ANALYZE a word no fact holds is a rare one, and a
    # stem every fact holds is not, and is read by blocks: one holds its 100.
    monkeypatch.undo()
    with write_transaction(rt.engine) as conn:
        conn.exec_driver_sql("ANALYZE facts")
    keywords._statistics.clear()
    with read_transaction(rt.engine) as conn:
        assert keywords._kinds(conn, ["harbor", "zyzzyvaqq"], 100) == ([1], 100, {0: 1})


def test_the_ways_chosen_beforehand_are_planned_once(rt: Runtime, actor, monkeypatch) -> None:
    """A common word's blocks and a rare word's holders' rules run on one plan for any
    words once psycopg has prepared their statements (a generic plan); a walk, and the
    count of a word's holders, are planned for their words every time. The session's
    setting ends with the walks, and the holders are the same with plans made either way."""
    from app.db.dialects import postgresql
    from tests.services.test_search import grant

    grant(rt, "p, wide, path:/*, read, allow", "p, wide, path:/closed/*, read, deny")
    with actor().tx() as (conn, ctx):
        stored = fact_service.store_facts(
            conn,
            ctx,
            [
                NewFact(p, f"harbor note {'kelp ' if k % 4 == 0 else ''}{k}")
                for k in range(40)
                for p in ("/open", "/closed")
            ],
        )
    seen = {f.id for f in stored if f.path == "/open"}
    keywords = backend_of_rt(rt).keywords
    # harbor by blocks (every fact holds it), kelp (20 holders) read whole, note walked (a
    # share of 1e-6 wants more blocks than there are).
    monkeypatch.setattr(keywords, "_common_stems", lambda _conn: ({"harbor": 1.0, "note": 1e-6}, 0))
    query = search_service.Query("harbor kelp note", "keyword", 5)
    kinds = {
        "blocks": "strpos(statement, 'regconfig, ''b''') > 0",
        "rules of the ids": "strpos(statement, 'ANY ($1') > 0",
        "walk": "strpos(statement, 'ORDER BY facts.id DESC') > 0 "
        "AND strpos(statement, 'regconfig, ''b''') = 0",
        "holders": "strpos(statement, 'AS term, h0.id') > 0",
    }

    def plans(conn) -> dict[str, tuple[int, int]]:
        return {
            kind: tuple(
                conn.exec_driver_sql(
                    "SELECT sum(generic_plans), sum(custom_plans) FROM pg_prepared_statements "
                    f"WHERE {where}"
                ).one()
            )
            for kind, where in kinds.items()
        }

    with actor("wide").tx() as (conn, ctx):  # one connection: where psycopg prepares
        found = []
        for _ in range(8):
            found.append(dict(search_service.keyword_half(conn, ctx, query).matches))
            assert conn.exec_driver_sql("SHOW plan_cache_mode").scalar_one() == "auto"
        made = plans(conn)
    assert made["blocks"][0] >= 3 and made["rules of the ids"][0] >= 3, made
    assert made["walk"][0] == 0 and made["walk"][1] >= 3, made
    assert made["holders"][0] == 0 and made["holders"][1] >= 3, made
    kelp = {f.id for f in stored if f.path == "/open" and "kelp" in f.content}
    assert all(f == {"harbor": seen, "kelp": kelp, "note": seen} for f in found)
    # Planned for their words every time instead: the same holders.
    monkeypatch.setattr(postgresql, "_GENERIC_PLAN", postgresql._CUSTOM_PLAN)
    with Memory(rt).transaction("wide") as (conn, ctx):
        assert dict(search_service.keyword_half(conn, ctx, query).matches) == found[0]


def backend_of_rt(rt: Runtime):
    with read_transaction(rt.engine) as conn:
        return backend_of(conn)


KEYWORD_INDEXES = ["facts_words_scope_idx", "facts_content_tsv_idx", "facts_scope_tsv_idx"]


def gin_options(conn) -> dict[str, list[str] | None]:
    rows = conn.exec_driver_sql(
        "SELECT relname, reloptions FROM pg_class WHERE relname = ANY(%(names)s)",
        {"names": KEYWORD_INDEXES},
    ).all()
    return dict(rows)


def test_the_keyword_indexes_keep_a_short_pending_list(rt: Runtime, actor) -> None:
    """Every scan of a GIN index reads its whole pending list (migration 0012): stores
    merge it past 64 kB, not PostgreSQL's 4 MB, so a search never reads more than 8
    pages of it. 300 facts of 30 words each leave ~270 kB of entries, about 34 pages
    under the default. The words and the scope tokens share one index (0014), whose
    downgrade makes the two of 0012 again; 0012's gives the default back."""
    rng = np.random.default_rng(7)
    words = [f"w{n:05d}x" for n in range(20_000)]
    with actor().tx() as (conn, ctx):
        fact_service.store_facts(
            conn, ctx, [NewFact("/gin", " ".join(rng.choice(words, 30))) for _ in range(300)]
        )
    with write_transaction(rt.engine) as conn:
        pending = conn.exec_driver_sql(
            "SELECT gin_clean_pending_list('facts_words_scope_idx'::regclass)"
        ).scalar_one()
        assert pending <= 64 * 1024 // 8192
        assert gin_options(conn) == {"facts_words_scope_idx": ["gin_pending_list_limit=64"]}
    migrate.downgrade(rt.engine, "0013")
    with read_transaction(rt.engine) as conn:
        assert gin_options(conn) == {
            "facts_content_tsv_idx": ["gin_pending_list_limit=64"],
            "facts_scope_tsv_idx": ["gin_pending_list_limit=64"],
        }
    migrate.downgrade(rt.engine, "0011")
    with read_transaction(rt.engine) as conn:
        assert gin_options(conn) == {"facts_content_tsv_idx": None, "facts_scope_tsv_idx": None}


def test_a_words_newest_blocks_are_asked_of_the_index_of_words(rt: Runtime, actor) -> None:
    """Migration 0018 indexes each fact's block of ids beside its words: a walk by blocks
    is a lookup of the word and the blocks in that one index (the statement writes the
    block as the index does), not a walk of the primary key; the downgrade drops it."""
    from app.db.dialects import postgresql

    # Three blocks of facts; one in 30 holds the word.
    facts_made = [
        NewFact("/blocks", f"{'harbor' if k % 30 == 0 else 'field'} crane {k}")
        for k in range(3 * postgresql.BLOCK_IDS)
    ]
    with actor().tx() as (conn, ctx):
        for start in range(0, len(facts_made), 1000):
            fact_service.store_facts(conn, ctx, facts_made[start : start + 1000])
    with write_transaction(rt.engine) as conn:
        conn.exec_driver_sql("ANALYZE facts")
        top = conn.exec_driver_sql("SELECT max(id) FROM facts").scalar_one() // 1024
    stmt = postgresql._newest_holders([], 1, postgresql._in_blocks)
    compiled = stmt.compile(dialect=rt.engine.dialect)
    blocks = f"b{top} | b{top - 1}"
    params = {**compiled.params, "term0": "harbor", "blocks0": blocks, "limit": 100}
    with read_transaction(rt.engine) as conn:
        found = conn.execute(stmt, params).all()
        newest = conn.exec_driver_sql(
            "SELECT id FROM facts WHERE content LIKE 'harbor %%' AND id >= %(low)s "
            "ORDER BY id DESC",
            {"low": (top - 1) * 1024},
        ).scalars()
        assert [fid for _, fid, _ in found] == list(newest)
    plan = plan_of(rt.engine, str(compiled), params)
    conditions = [n.get("Index Cond", "") for n in plan_nodes(plan) if "Index Name" in n]
    assert [n["Index Name"] for n in plan_nodes(plan) if "Index Name" in n] == [
        "facts_words_scope_idx"
    ]
    assert "'b'::text" in conditions[0] and "content_tsv" in conditions[0], conditions
    migrate.downgrade(rt.engine, "0017")
    with read_transaction(rt.engine) as conn:
        definition = conn.exec_driver_sql(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'facts_words_scope_idx'"
        ).scalar_one()
    assert definition.endswith("(content_tsv, scope_tsv) WITH (gin_pending_list_limit='64')")


def test_a_readers_word_walks_intersect_in_one_index(rt: Runtime, actor) -> None:
    """A reader whose scope tokens narrow the memory walks each word among the facts
    holding one of them: the word and the tokens are looked up in the one index of both
    columns (0014), never as two bitmaps intersected (the scope's bitmap holds the whole
    part, made again for each word)."""
    from app.acl import scope
    from app.db.dialects import postgresql

    with actor().tx() as (conn, ctx):
        fact_service.store_facts(
            conn, ctx, [NewFact(f"/part/s{k % 5}", f"harbor crane {k}") for k in range(400)]
        )
    with write_transaction(rt.engine) as conn:
        # Fifty times as many facts elsewhere holding the word, newer than the part's.
        conn.exec_driver_sql(
            "INSERT INTO facts (path_id, content, owner, created_at, recall_count, "
            "stability_days, scope) SELECT path_id, content || ' ' || n, 'other', "
            "created_at, 0, 1.0, 'elsewhere' FROM facts, generate_series(1, 50) AS n"
        )
        conn.exec_driver_sql("ANALYZE facts")
    keywords = postgresql.PostgresKeywords()
    stmt = keywords.matches_statement([], 1, scoped=True)
    params = keywords.match_params(["harbor"], 100, [scope.node_token("/part/s1")])
    with read_transaction(rt.engine) as conn:
        rows = conn.execute(stmt, params).all()
    compiled = stmt.compile(dialect=rt.engine.dialect)
    plan = plan_of(rt.engine, str(compiled), {**compiled.params, **params})
    assert len(rows) == 80
    indexes = {node["Index Name"] for node in plan_nodes(plan) if "Index Name" in node}
    assert indexes == {"facts_words_scope_idx"}, indexes


def test_the_planner_counts_a_tag_pairs_facts(rt: Runtime, actor) -> None:
    """A read rule on a fact's own tag asks for the facts holding the tag pair. Without
    statistics of key and value together (0015) the planner multiplied their shares as if
    unrelated, and took 40 facts holding `secret=yes` among 2,000 for one (a million's
    1% for 54 facts: it read the whole set in each walk of a search). The downgrade drops
    the statistics."""
    with actor().tx() as (conn, ctx):
        for start in (0, 1_000):
            fact_service.store_facts(
                conn,
                ctx,
                [
                    NewFact("/t", f"harbor crane {k}", {"topic": f"t{k % 40}"})
                    if k % 50
                    else NewFact("/t", f"harbor crane {k}", {"secret": "yes"})
                    for k in range(start, start + 1_000)
                ],
            )
    asked = "SELECT fact_id FROM fact_tags WHERE key = 'secret' AND value = 'yes'"

    def estimate() -> int:
        with rt.engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")
        return plan_of(rt.engine, asked, {})["Plan Rows"]

    assert 30 <= estimate() <= 50
    migrate.downgrade(rt.engine, "0014")
    assert estimate() <= 5


def live_index(conn) -> str:
    return conn.exec_driver_sql(
        "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_facts_live'"
    ).scalar_one()


def test_a_recall_updates_the_fact_in_place(rt: Runtime, actor, clock) -> None:
    """A recall changes no indexed column and finds room on the fact's page (migration
    0013): PostgreSQL updates the row in place (HOT), writing no index. Searches recall
    a page of facts each, again and again: ten rounds a day apart over ten facts sharing
    a page, each moving their last recall and stability.
    The downgrade gives ix_facts_live its recall columns back."""
    with actor().tx() as (conn, ctx):
        stored = fact_service.store_facts(
            conn, ctx, [NewFact("/hot", f"fact {k}") for k in range(10)]
        )
    counts = (
        "SELECT pg_stat_get_xact_tuples_updated('facts'::regclass), "
        "pg_stat_get_xact_tuples_hot_updated('facts'::regclass)"
    )
    counted = np.zeros(2, dtype=int)
    for _ in range(10):
        clock.advance(days=1)
        with actor().tx() as (conn, ctx):
            # The backend's counts since it last reported them: take the difference.
            before = np.array(conn.exec_driver_sql(counts).one())
            assert len(fact_service.recall_visible(conn, ctx, [f.id for f in stored])) == 10
            counted += np.array(conn.exec_driver_sql(counts).one()) - before
    updated, in_place = counted
    assert updated == 100 and in_place >= 90
    with read_transaction(rt.engine) as conn:
        assert "(path_id, deleted_at, created_at)" in live_index(conn)
    migrate.downgrade(rt.engine, "0012")
    with read_transaction(rt.engine) as conn:
        assert "(path_id, deleted_at, created_at, last_recall_at, stability_days)" in live_index(
            conn
        )


def plan_of(engine, sql: str, params) -> dict:
    """The plan PostgreSQL makes for `sql` with `params` (EXPLAIN, FORMAT JSON)."""
    with engine.connect() as conn:
        cursor = conn.connection.dbapi_connection.cursor()
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        return cursor.fetchone()[0][0]["Plan"]


def plan_nodes(plan: dict) -> Iterator[dict]:
    """Every node of an EXPLAIN (FORMAT JSON) plan, the top one first."""
    yield plan
    for child in plan.get("Plans", []):
        yield from plan_nodes(child)


def scanned(plan: dict) -> set[tuple[str, str]]:
    """(node type, relation) of every node of a plan that reads one."""
    return {(n["Node Type"], n["Relation Name"]) for n in plan_nodes(plan) if "Relation Name" in n}


# The rules are asked of the nearest PART_HEAD x 40 holders first: 22 of them hidden
# leave enough at 4 (one statement); at 1 too few pass, and every holder is asked.
@pytest.mark.parametrize(("head", "made"), [(4, 1), (1, 2)])
def test_a_readers_small_part_is_scored_by_key(
    rt: Runtime, actor, monkeypatch: pytest.MonkeyPatch, head: int, made: int
) -> None:
    """A reader whose rules name a small part of the memory has that part scored whole:
    the facts holding its tokens scored by key (never the whole of facts_vec: a join
    had the planner hash the part and read every vector past it), then the rules asked
    of the nearest first. Hidden, deleted and superseded facts nearest the query are
    passed over: the page is the exact answer over what the reader may read, whether
    its nearest holders held enough readable ones or not."""
    from app.db.dialects import postgresql
    from tests.services.test_search import grant

    monkeypatch.setattr(postgresql, "PART_HEAD", head)

    grant(
        rt,
        "p, reader, path:/mine/*, read, allow",
        "p, reader, path:/mine/secret/*, read, deny",
    )
    with actor().tx() as (conn, ctx):
        mine = fact_service.store_facts(
            conn,
            ctx,
            [NewFact("/mine", f"mine {k}") for k in range(300)],
            vectors=[unit(k).tobytes() for k in range(300)],
        )
        # Nearer the query than anything the reader may read, and hidden from it.
        fact_service.store_facts(
            conn,
            ctx,
            [NewFact("/mine/secret", f"secret {k}") for k in range(20)],
            vectors=[unit(7).tobytes()] * 20,
        )
        fact_service.delete_fact(conn, ctx, mine[7].id)
        successor = fact_service.store_facts(
            conn,
            ctx,
            [NewFact("/mine", "mine 8, again", None, mine[8].id)],
            vectors=[unit(900).tobytes()],
        )
    with write_transaction(rt.engine) as conn:
        # Fifteen copies of every fact, as others' (in SQL: the store path is slower).
        conn.exec_driver_sql(
            "INSERT INTO facts (path_id, content, owner, created_at, recall_count, "
            "stability_days, embedding, scope) SELECT path_id, content || ' ' || n, 'other', "
            "created_at, 0, 1.0, embedding, 'elsewhere' FROM facts, generate_series(1, 15) AS n"
        )
        conn.exec_driver_sql(
            "INSERT INTO facts_vec (fact_id, embedding) SELECT id, "
            "(SELECT embedding FROM facts_vec LIMIT 1) FROM facts WHERE owner = 'other'"
        )
    with rt.engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")
    asked = unit(7) + 0.3 * unit(8)
    asked /= np.linalg.norm(asked)
    with executed(rt.engine, "<=>") as statements, actor("reader").tx() as (conn, ctx):
        query = search_service.Query("", "semantic", 10, asked)
        ranking = search_service.rank(conn, ctx, query, rt.vector_index)
    readable = {f.id: unit(k) for k, f in enumerate(mine) if k not in (7, 8)}
    readable[successor[0].id] = unit(900)
    halves = {fid: np.frombuffer(half(v), "<f4") for fid, v in readable.items()}
    query_half = np.frombuffer(half(asked), "<f4")
    cosine = {
        fid: float(v @ query_half / np.linalg.norm(v) / np.linalg.norm(query_half))
        for fid, v in halves.items()
    }
    exact = sorted(cosine, key=lambda fid: (-cosine[fid], fid))[:10]
    assert [fid for fid, _ in ranking.order] == exact
    assert len(statements) == made
    plan = plan_of(rt.engine, *statements[0])
    # By key: through its primary key (an index scan, or a bitmap of it), never whole.
    of_vectors = {kind for kind, relation in scanned(plan) if relation == "facts_vec"}
    assert of_vectors and of_vectors <= {"Index Scan", "Bitmap Heap Scan"}, of_vectors


def test_a_readers_part_is_planned_for_its_own_scope_each_time(rt: Runtime, actor) -> None:
    """psycopg prepares a statement on its 5th run; PostgreSQL may then plan the part's
    statement once for any scope (a generic plan), which scored the part 1.5 times
    slower. Each run is planned for its scope, however often it runs, even where the
    session asks for generic plans (as the planner chooses them after a prepared
    statement's fifth run), and the setting ends with it."""
    from tests.services.test_search import grant

    grant(rt, "p, reader, path:/mine/*, read, allow")
    with actor().tx() as (conn, ctx):
        stored = fact_service.store_facts(
            conn,
            ctx,
            [NewFact("/mine", f"mine {k}") for k in range(10)]
            + [NewFact("/other", f"other {k}") for k in range(200)],
            vectors=[unit(k).tobytes() for k in range(210)],
        )
    mine = {f.id for f in stored[:10]}
    with actor("reader").tx() as (conn, ctx):  # one connection: where psycopg prepares
        for k in range(8):
            conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
            with executed(rt.engine, "MATERIALIZED") as statements:
                query = search_service.Query("", "semantic", 3, unit(k))
                ranking = search_service.rank(conn, ctx, query, rt.vector_index)
            assert statements and len(ranking.order) == 3
            assert {f for f, _ in ranking.order} <= mine
            assert conn.exec_driver_sql("SHOW plan_cache_mode").scalar_one() == "auto"
        plans = conn.exec_driver_sql(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE strpos(statement, 'MATERIALIZED') > 0"
        ).all()
    # Prepared from its 5th run on, and planned for its own scope every time since.
    assert plans and all(generic == 0 and custom >= 3 for generic, custom in plans), plans


def test_a_readers_part_is_counted_once_a_minute(rt: Runtime, actor, monkeypatch) -> None:
    """Whether a reader's part is small (search._small_part) is counted at most once per
    STATS_KEPT_S for the same tokens: a count answers any later question it settles
    (exact, or more than asked, with the facts stored since taken as members), and
    another question counts again."""
    from app.acl import scope
    from app.db.dialects import postgresql

    with actor().tx() as (conn, ctx):
        fact_service.store_facts(conn, ctx, [NewFact("/part", f"fact {k}") for k in range(10)])
    tokens = [scope.node_token("/part")]
    with executed(rt.engine, "count(") as counts:
        with read_transaction(rt.engine) as conn:
            keywords = backend_of(conn).keywords
            asked = [keywords.scope_count(conn, tokens, n) for n in (5, 3, 5, 20, 15, 40)]
            assert asked == [6, 4, 6, 10, 10, 10]
            assert len(counts) == 2  # at 5 (more than 5), then at 20 (exactly 10)
        # Facts stored since are members, or might be: 10 + 10 new may pass 15.
        with actor().tx() as (conn, ctx):
            fact_service.store_facts(conn, ctx, [NewFact("/part", f"new {k}") for k in range(10)])
        with read_transaction(rt.engine) as conn:
            assert keywords.scope_count(conn, tokens, 40) == 20  # 10 + 10 <= 40: kept
            assert len(counts) == 2
            assert keywords.scope_count(conn, tokens, 15) == 16  # counted again
            assert len(counts) == 3
            monkeypatch.setattr(postgresql, "STATS_KEPT_S", 0.0)
            assert keywords.scope_count(conn, tokens, 40) == 20
            assert len(counts) == 4
