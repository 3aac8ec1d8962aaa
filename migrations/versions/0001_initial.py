"""The whole memory: paths, facts, tags, indexes, policies and the /memory facts.

One history for both backends. Tables are made by Alembic alike; what SQLite and
PostgreSQL spell differently (triggers, the keyword and vector indexes) is made by
_sqlite_objects or _postgres_objects, chosen by the connection's dialect.

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.db.seed import DEFAULT_POLICIES, MEMORY_FACTS, SEED_OWNER

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DEFAULT_WIDTH = 768
# PostgreSQL: the advisory lock that orders changes to the tree (see _postgres_objects).
TREE_LOCK = 7_342_001


def upgrade() -> None:
    width = int(op.get_context().config.attributes.get("embedding_width", DEFAULT_WIDTH))
    now = time.time()

    op.create_table(
        "meta",
        sa.Column("key", sa.String(), primary_key=True),
        sa.Column("value", sa.String(), nullable=False),
    )
    op.create_table(
        "paths",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("parent_id", sa.Integer(), sa.ForeignKey("paths.id"), nullable=True),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("path", sa.String(), nullable=False, unique=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.CheckConstraint("(id = 1) = (parent_id IS NULL)", name="ck_paths_root"),
    )
    op.create_index("ix_paths_parent_id", "paths", ["parent_id", "name"], unique=True)
    op.create_table(
        "path_closure",
        sa.Column("ancestor_id", sa.Integer(), sa.ForeignKey("paths.id"), primary_key=True),
        sa.Column("descendant_id", sa.Integer(), sa.ForeignKey("paths.id"), primary_key=True),
        sa.Column("depth", sa.Integer(), nullable=False),
    )
    op.create_index("ix_path_closure_descendant", "path_closure", ["descendant_id", "depth"])
    op.create_table(
        "facts",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("path_id", sa.Integer(), sa.ForeignKey("paths.id"), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("owner", sa.String(), nullable=False),
        sa.Column("supersedes_id", sa.Integer(), sa.ForeignKey("facts.id"), nullable=True),
        sa.Column("deleted_at", sa.Float(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("last_recall_at", sa.Float(), nullable=True),
        sa.Column("recall_count", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("stability_days", sa.Float(), nullable=False, server_default="1.0"),
        sa.Column("embedding", sa.LargeBinary(), nullable=True),
        sa.CheckConstraint("stability_days > 0", name="ck_facts_stability"),
    )
    op.create_index("ix_facts_path_id", "facts", ["path_id", "id"])
    # A fact can be superseded once: the unique index is the rule.
    op.create_index("ix_facts_supersedes_id", "facts", ["supersedes_id"], unique=True)
    # The embedding queue (seed: "facts_pending_embedding_idx holds that queue").
    op.execute("CREATE INDEX facts_pending_embedding_idx ON facts (id) WHERE embedding IS NULL")
    # Clustered on (fact_id, key): the ACL fragment probes a fact's own tags for every
    # fact it scans, and without a rowid that probe needs no second lookup.
    op.create_table(
        "fact_tags",
        sa.Column("fact_id", sa.Integer(), sa.ForeignKey("facts.id"), primary_key=True),
        sa.Column("key", sa.String(), primary_key=True),
        sa.Column("value", sa.String(), nullable=False),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_fact_tags_key_value", "fact_tags", ["key", "value"])
    op.create_table(
        "path_tags",
        sa.Column("path_id", sa.Integer(), sa.ForeignKey("paths.id"), primary_key=True),
        sa.Column("key", sa.String(), primary_key=True),
        sa.Column("value", sa.String(), nullable=False),
    )
    op.create_index("ix_path_tags_key_value", "path_tags", ["key", "value"])
    op.create_table(
        "casbin_rule",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("ptype", sa.String(255)),
        sa.Column("v0", sa.String(255)),
        sa.Column("v1", sa.String(255)),
        sa.Column("v2", sa.String(255)),
        sa.Column("v3", sa.String(255)),
        sa.Column("v4", sa.String(255)),
        sa.Column("v5", sa.String(255)),
    )

    # Nearest path tag wins: for each node and key, the tag of the closest ancestor
    # (the node itself at depth 0). Kept as a table by triggers, because every read
    # with a tag rule asks it: computed on the fly it cost each query a scan of the
    # closure table. Paths are never moved, so a node's inheritance only changes
    # when a tag on it or above it does.
    op.create_table(
        "path_tag_effective",
        sa.Column("path_id", sa.Integer(), sa.ForeignKey("paths.id"), primary_key=True),
        sa.Column("key", sa.String(), primary_key=True),
        sa.Column("value", sa.String(), nullable=False),
        sa.Column("depth", sa.Integer(), nullable=False),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_path_tag_effective_key_value", "path_tag_effective", ["key", "value"])
    # Every embedding written, in order: in-memory vector indexes (one per server
    # process) read it to catch up with writes made by any process, the CLI included.
    op.create_table(
        "vector_log",
        sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("fact_id", sa.Integer(), nullable=False),
        sqlite_autoincrement=True,
    )
    if op.get_bind().dialect.name == "postgresql":
        _postgres_objects(width)
    else:
        _sqlite_objects(width)
    op.execute(
        """
        CREATE VIEW effective_path_tags AS
        SELECT path_id, key, value, depth FROM path_tag_effective
        """
    )
    # A tag on the fact beats every tag it inherits (seed: "Tags and access control").
    op.execute(
        """
        CREATE VIEW effective_fact_tags AS
        SELECT ft.fact_id AS fact_id, ft.key AS key, ft.value AS value, 'fact' AS source
        FROM fact_tags ft
        UNION ALL
        SELECT f.id, ept.key, ept.value, 'path'
        FROM facts f JOIN effective_path_tags ept ON ept.path_id = f.path_id
        WHERE NOT EXISTS (
          SELECT 1 FROM fact_tags own WHERE own.fact_id = f.id AND own.key = ept.key)
        """
    )

    meta = sa.table("meta", sa.column("key"), sa.column("value"))
    op.bulk_insert(
        meta,
        [
            {"key": "embedding_width", "value": str(width)},
            {"key": "policy_version", "value": "0"},
            # Bumped when every vector is rebuilt (reindex --rebuild): indexes reload whole.
            {"key": "vector_generation", "value": "0"},
        ],
    )
    paths = sa.table(
        "paths",
        sa.column("id"),
        sa.column("parent_id"),
        sa.column("name"),
        sa.column("path"),
        sa.column("created_at"),
    )
    op.bulk_insert(
        paths,
        [
            {"id": 1, "parent_id": None, "name": "", "path": "/", "created_at": now},
            {"id": 2, "parent_id": 1, "name": "memory", "path": "/memory", "created_at": now},
        ],
    )
    facts = sa.table(
        "facts",
        sa.column("id"),
        sa.column("path_id"),
        sa.column("content"),
        sa.column("owner"),
        sa.column("created_at"),
        sa.column("stability_days"),
        sa.column("recall_count"),
    )
    fact_tags = sa.table("fact_tags", sa.column("fact_id"), sa.column("key"), sa.column("value"))
    for number, content in enumerate(MEMORY_FACTS, start=1):
        op.bulk_insert(
            facts,
            [
                {
                    "id": number,
                    "path_id": 2,
                    "content": content,
                    "owner": SEED_OWNER,
                    "created_at": now,
                    "stability_days": 1.0,
                    "recall_count": 0,
                }
            ],
        )
        op.bulk_insert(
            fact_tags,
            [
                {"fact_id": number, "key": "owner", "value": SEED_OWNER},
                {"fact_id": number, "key": "visibility", "value": "public"},
            ],
        )

    rules = sa.table(
        "casbin_rule",
        sa.column("ptype"),
        sa.column("v0"),
        sa.column("v1"),
        sa.column("v2"),
        sa.column("v3"),
    )
    op.bulk_insert(
        rules,
        [{"ptype": p, "v0": a, "v1": b, "v2": c, "v3": d} for p, a, b, c, d in DEFAULT_POLICIES],
    )
    if op.get_bind().dialect.name == "postgresql":
        # The seed rows above carry their ids: the sequences must start after them.
        for table in ("paths", "facts"):
            op.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                f"(SELECT max(id) FROM {table}))"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _postgres_downgrade()
        return
    for event in ("insert", "update", "delete"):
        op.execute(f"DROP TRIGGER IF EXISTS casbin_rule_version_{event}")
    for trigger in (
        "path_tags_ad",
        "path_tags_au",
        "path_tags_ai",
        "paths_tags_inherit",
        "facts_vector_log",
        "facts_fts_ad",
        "facts_fts_ai",
        "fact_tags_immutable",
        "facts_immutable",
        "paths_closure_ai",
    ):
        op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    op.execute("DROP TABLE IF EXISTS facts_vec")
    op.execute("DROP TABLE IF EXISTS facts_fts")
    op.execute("DROP VIEW IF EXISTS effective_fact_tags")
    op.execute("DROP VIEW IF EXISTS effective_path_tags")
    op.drop_table("vector_log")
    op.drop_table("path_tag_effective")
    for name in ("casbin_rule", "path_tags", "fact_tags", "facts", "path_closure", "paths", "meta"):
        op.drop_table(name)


def _sqlite_objects(width: int) -> None:
    # The closure of a new node: its parent's ancestors one level further, and itself.
    op.execute(
        """
        CREATE TRIGGER paths_closure_ai AFTER INSERT ON paths BEGIN
          INSERT INTO path_closure (ancestor_id, descendant_id, depth)
            SELECT ancestor_id, NEW.id, depth + 1 FROM path_closure
            WHERE descendant_id = NEW.parent_id;
          INSERT INTO path_closure (ancestor_id, descendant_id, depth) VALUES (NEW.id, NEW.id, 0);
        END
        """
    )
    # A fact does not change (seed: "Facts"): only its recall state, deletion and embedding.
    op.execute(
        """
        CREATE TRIGGER facts_immutable BEFORE UPDATE OF
          id, path_id, content, owner, supersedes_id, created_at ON facts
        BEGIN SELECT RAISE(ABORT, 'a fact does not change; supersede it'); END
        """
    )
    op.execute(
        """
        CREATE TRIGGER fact_tags_immutable BEFORE UPDATE ON fact_tags
        BEGIN SELECT RAISE(ABORT, 'the tags of a fact do not change'); END
        """
    )

    op.execute(
        """
        CREATE TRIGGER paths_tags_inherit AFTER INSERT ON paths BEGIN
          INSERT INTO path_tag_effective (path_id, key, value, depth)
            SELECT NEW.id, key, value, depth + 1 FROM path_tag_effective
            WHERE path_id = NEW.parent_id;
        END
        """
    )
    # Recompute one key under one node: every descendant takes its nearest tag.
    recompute = """
          DELETE FROM path_tag_effective WHERE key = {row}.key AND path_id IN (
            SELECT descendant_id FROM path_closure WHERE ancestor_id = {row}.path_id);
          INSERT INTO path_tag_effective (path_id, key, value, depth)
            SELECT c.descendant_id, pt.key, pt.value, c.depth
            FROM path_closure c JOIN path_tags pt
              ON pt.path_id = c.ancestor_id AND pt.key = {row}.key
            WHERE c.descendant_id IN (
                SELECT descendant_id FROM path_closure WHERE ancestor_id = {row}.path_id)
              AND c.depth = (
                SELECT min(c2.depth) FROM path_closure c2 JOIN path_tags pt2
                  ON pt2.path_id = c2.ancestor_id AND pt2.key = {row}.key
                WHERE c2.descendant_id = c.descendant_id);
    """
    op.execute(
        f"CREATE TRIGGER path_tags_ai AFTER INSERT ON path_tags BEGIN"
        f"{recompute.format(row='NEW')}END"
    )
    op.execute(
        f"CREATE TRIGGER path_tags_au AFTER UPDATE ON path_tags BEGIN"
        f"{recompute.format(row='OLD')}{recompute.format(row='NEW')}END"
    )
    op.execute(
        f"CREATE TRIGGER path_tags_ad AFTER DELETE ON path_tags BEGIN"
        f"{recompute.format(row='OLD')}END"
    )
    # Keywords: external-content FTS5; the text stays in facts, triggers keep step.
    op.execute(
        """
        CREATE VIRTUAL TABLE facts_fts USING fts5(
          content, content='facts', content_rowid='id',
          tokenize='porter unicode61 remove_diacritics 2')
        """
    )
    op.execute(
        """
        CREATE TRIGGER facts_fts_ai AFTER INSERT ON facts BEGIN
          INSERT INTO facts_fts (rowid, content) VALUES (NEW.id, NEW.content);
        END
        """
    )
    op.execute(
        """
        CREATE TRIGGER facts_fts_ad AFTER DELETE ON facts BEGIN
          INSERT INTO facts_fts (facts_fts, rowid, content) VALUES ('delete', OLD.id, OLD.content);
        END
        """
    )
    # Meaning: vec0 with cosine distance (its default is L2).
    op.execute(
        f"CREATE VIRTUAL TABLE facts_vec USING vec0("
        f"fact_id INTEGER PRIMARY KEY, embedding float[{width}] distance_metric=cosine)"
    )

    op.execute(
        """
        CREATE TRIGGER facts_vector_log AFTER UPDATE OF embedding ON facts
        WHEN NEW.embedding IS NOT NULL
        BEGIN INSERT INTO vector_log (fact_id) VALUES (NEW.id); END
        """
    )

    # Every policy change, from any writer, bumps the version a running server polls.
    for event in ("INSERT", "UPDATE", "DELETE"):
        op.execute(
            f"""
            CREATE TRIGGER casbin_rule_version_{event.lower()} AFTER {event} ON casbin_rule
            BEGIN
              UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'policy_version';
            END
            """
        )


def _postgres_objects(width: int) -> None:
    """The same guarantees in PostgreSQL: PL/pgSQL triggers, tsvector + GIN, pgvector HNSW.

    Tree changes (a new node, a path tag) recompute path_tag_effective from what they
    can see; under MVCC two of them at once could each miss the other's rows, so every
    one takes one transaction-level advisory lock first (the app calls
    embornal_lock_tree() before its first write to the tree, so that no writer waits for
    it while holding rows another needs; the triggers take it again for any other
    writer). SQLite's single writer gives the same order for free.
    """
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.execute(
        f"""
        CREATE FUNCTION embornal_lock_tree() RETURNS void LANGUAGE sql AS
          'SELECT pg_advisory_xact_lock({TREE_LOCK})'
        """
    )
    # The closure of a new node, and the tags it inherits: its parent's, one level further.
    op.execute(
        """
        CREATE FUNCTION paths_ai() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          PERFORM embornal_lock_tree();
          INSERT INTO path_closure (ancestor_id, descendant_id, depth)
            SELECT ancestor_id, NEW.id, depth + 1 FROM path_closure
            WHERE descendant_id = NEW.parent_id;
          INSERT INTO path_closure (ancestor_id, descendant_id, depth) VALUES (NEW.id, NEW.id, 0);
          INSERT INTO path_tag_effective (path_id, key, value, depth)
            SELECT NEW.id, key, value, depth + 1 FROM path_tag_effective
            WHERE path_id = NEW.parent_id;
          RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER paths_ai AFTER INSERT ON paths FOR EACH ROW EXECUTE FUNCTION paths_ai()"
    )
    # A fact does not change (seed: "Facts"): only its recall state, deletion and embedding.
    # SQLSTATE 23000, as SQLite's RAISE(ABORT): the driver reports an IntegrityError.
    op.execute(
        """
        CREATE FUNCTION embornal_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          RAISE EXCEPTION '%', TG_ARGV[0] USING ERRCODE = 'integrity_constraint_violation';
        END $$
        """
    )
    op.execute(
        """
        CREATE TRIGGER facts_immutable BEFORE UPDATE OF
          id, path_id, content, owner, supersedes_id, created_at ON facts
        FOR EACH ROW EXECUTE FUNCTION embornal_refuse('a fact does not change; supersede it')
        """
    )
    op.execute(
        """
        CREATE TRIGGER fact_tags_immutable BEFORE UPDATE ON fact_tags
        FOR EACH ROW EXECUTE FUNCTION embornal_refuse('the tags of a fact do not change')
        """
    )
    # Recompute one key under one node: every descendant takes its nearest tag.
    op.execute(
        """
        CREATE FUNCTION path_tags_recompute(p_node integer, p_key varchar) RETURNS void
        LANGUAGE sql AS $$
          DELETE FROM path_tag_effective WHERE key = p_key AND path_id IN (
            SELECT descendant_id FROM path_closure WHERE ancestor_id = p_node);
          INSERT INTO path_tag_effective (path_id, key, value, depth)
            SELECT c.descendant_id, pt.key, pt.value, c.depth
            FROM path_closure c JOIN path_tags pt
              ON pt.path_id = c.ancestor_id AND pt.key = p_key
            WHERE c.descendant_id IN (
                SELECT descendant_id FROM path_closure WHERE ancestor_id = p_node)
              AND c.depth = (
                SELECT min(c2.depth) FROM path_closure c2 JOIN path_tags pt2
                  ON pt2.path_id = c2.ancestor_id AND pt2.key = p_key
                WHERE c2.descendant_id = c.descendant_id);
        $$
        """
    )
    op.execute(
        """
        CREATE FUNCTION path_tags_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          PERFORM embornal_lock_tree();
          IF TG_OP IN ('UPDATE', 'DELETE') THEN
            PERFORM path_tags_recompute(OLD.path_id, OLD.key);
          END IF;
          IF TG_OP IN ('INSERT', 'UPDATE') THEN
            PERFORM path_tags_recompute(NEW.path_id, NEW.key);
          END IF;
          RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER path_tags_changed AFTER INSERT OR UPDATE OR DELETE ON path_tags "
        "FOR EACH ROW EXECUTE FUNCTION path_tags_changed()"
    )

    # Keywords. The configuration: English stems (Snowball, as FTS5's porter tokenizer
    # stems) and no stop words. `english` would drop stop words from the index, so a
    # query of only such words would find nothing, while FTS5 indexes every word and the
    # search service decides which words matter; `simple` would not stem, so "running"
    # would miss "run" where SQLite finds it. Content is first cut into runs of letters
    # and digits, as FTS5's unicode61 cuts it: ticket ids like ABC-123 are the words
    # abc and 123 on both backends (PostgreSQL's parser reads "-123" as a number).
    op.execute(
        "CREATE TEXT SEARCH DICTIONARY embornal_stem (TEMPLATE = snowball, Language = english)"
    )
    op.execute("CREATE TEXT SEARCH CONFIGURATION embornal (COPY = simple)")
    op.execute(
        "ALTER TEXT SEARCH CONFIGURATION embornal ALTER MAPPING FOR "
        "asciiword, word, numword, asciihword, hword, numhword, "
        "hword_asciipart, hword_part, hword_numpart WITH embornal_stem"
    )
    # Generated, so it is written in the transaction that writes the fact, like FTS5's
    # trigger-kept rows; stored, so a search reads it instead of parsing every match.
    op.execute(
        "ALTER TABLE facts ADD COLUMN content_tsv tsvector GENERATED ALWAYS AS "
        "(to_tsvector('embornal'::regconfig, "
        "regexp_replace(content, '[^[:alnum:]]+', ' ', 'g'))) STORED"
    )
    op.execute("CREATE INDEX facts_content_tsv_idx ON facts USING gin (content_tsv)")

    # Meaning: pgvector, HNSW over cosine distance (vector_cosine_ops).
    op.execute(
        f"CREATE TABLE facts_vec (fact_id INTEGER PRIMARY KEY "
        f"REFERENCES facts (id) ON DELETE CASCADE, embedding vector({int(width)}) NOT NULL)"
    )
    op.execute("CREATE INDEX facts_vec_hnsw ON facts_vec USING hnsw (embedding vector_cosine_ops)")

    op.execute(
        """
        CREATE FUNCTION facts_vector_log() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN INSERT INTO vector_log (fact_id) VALUES (NEW.id); RETURN NULL; END $$
        """
    )
    op.execute(
        """
        CREATE TRIGGER facts_vector_log AFTER UPDATE OF embedding ON facts
        FOR EACH ROW WHEN (NEW.embedding IS NOT NULL) EXECUTE FUNCTION facts_vector_log()
        """
    )
    # Every policy change, from any writer, bumps the version a running server polls.
    op.execute(
        """
        CREATE FUNCTION casbin_rule_version() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          UPDATE meta SET value = (CAST(value AS integer) + 1)::text
          WHERE key = 'policy_version';
          RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER casbin_rule_version AFTER INSERT OR UPDATE OR DELETE ON casbin_rule "
        "FOR EACH ROW EXECUTE FUNCTION casbin_rule_version()"
    )


def _postgres_downgrade() -> None:
    for view in ("effective_fact_tags", "effective_path_tags"):
        op.execute(f"DROP VIEW IF EXISTS {view}")
    for name in (
        "facts_vec",
        "vector_log",
        "path_tag_effective",
        "casbin_rule",
        "path_tags",
        "fact_tags",
        "facts",
        "path_closure",
        "paths",
        "meta",
    ):
        op.execute(f"DROP TABLE IF EXISTS {name} CASCADE")
    for function in (
        "casbin_rule_version()",
        "facts_vector_log()",
        "path_tags_changed()",
        "path_tags_recompute(integer, varchar)",
        "embornal_refuse()",
        "paths_ai()",
        "embornal_lock_tree()",
    ):
        op.execute(f"DROP FUNCTION IF EXISTS {function}")
    op.execute("DROP TEXT SEARCH CONFIGURATION IF EXISTS embornal")
    op.execute("DROP TEXT SEARCH DICTIONARY IF EXISTS embornal_stem")
