"""Every fact carries its scope tokens, and the keyword index holds them beside its words.

facts.scope holds the tokens of app.acl.scope.fact_scope: one per node above the fact
and its own, one per own tag (owner included). Both are immutable, so the tokens are
written once, with the fact. The keyword index holds them as a second column (SQLite:
FTS5's `scope`; PostgreSQL: scope_tsv and its GIN index), so that a search for a
reader who sees a small part of the memory intersects its words with the reader's
tokens in the index, instead of walking every fact that holds them and dropping the
hidden ones (issue 33: a reader's cost bounded by what it can see).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from alembic import op
from sqlalchemy import text

from app.acl.scope import fact_scope

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 5_000
_TOKENIZE = "tokenize='porter unicode61 remove_diacritics 2'"


def _fill_scopes() -> None:
    """Write each existing fact's tokens, a batch of facts at a time."""
    conn = op.get_bind()
    last = 0
    while True:
        rows = conn.execute(
            text(
                "SELECT facts.id, paths.path FROM facts JOIN paths ON paths.id = facts.path_id "
                "WHERE facts.id > :last ORDER BY facts.id LIMIT :batch"
            ),
            {"last": last, "batch": BATCH},
        ).all()
        if not rows:
            return
        first, last = rows[0][0], rows[-1][0]
        tags: dict[int, dict[str, str]] = defaultdict(dict)
        for fact_id, key, value in conn.execute(
            text(
                "SELECT fact_id, key, value FROM fact_tags WHERE fact_id BETWEEN :first AND :last"
            ),
            {"first": first, "last": last},
        ):
            tags[fact_id][key] = value
        conn.execute(
            text("UPDATE facts SET scope = :scope WHERE id = :id"),
            [{"id": fid, "scope": fact_scope(path, tags[fid])} for fid, path in rows],
        )


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.execute("ALTER TABLE facts ADD COLUMN scope TEXT NOT NULL DEFAULT ''")
    _fill_scopes()
    if postgres:
        op.execute(
            "ALTER TABLE facts ADD COLUMN scope_tsv tsvector GENERATED ALWAYS AS "
            "(to_tsvector('simple'::regconfig, scope)) STORED"
        )
        op.execute("CREATE INDEX facts_scope_tsv_idx ON facts USING gin (scope_tsv)")
        return
    op.execute("DROP TRIGGER IF EXISTS facts_fts_ai")
    op.execute("DROP TRIGGER IF EXISTS facts_fts_ad")
    op.execute("DROP TABLE IF EXISTS facts_fts")
    _create_fts(("content", "scope"))


def _create_fts(columns: tuple[str, ...]) -> None:
    """The external-content FTS5 table over `columns` of facts, filled, and its triggers."""
    names = ", ".join(columns)
    new = ", ".join(f"NEW.{c}" for c in columns)
    old = ", ".join(f"OLD.{c}" for c in columns)
    op.execute(
        f"CREATE VIRTUAL TABLE facts_fts USING fts5({names}, content='facts', "
        f"content_rowid='id', {_TOKENIZE})"
    )
    op.execute("INSERT INTO facts_fts (facts_fts) VALUES ('rebuild')")
    op.execute(
        f"CREATE TRIGGER facts_fts_ai AFTER INSERT ON facts BEGIN "
        f"INSERT INTO facts_fts (rowid, {names}) VALUES (NEW.id, {new}); END"
    )
    op.execute(
        f"CREATE TRIGGER facts_fts_ad AFTER DELETE ON facts BEGIN "
        f"INSERT INTO facts_fts (facts_fts, rowid, {names}) VALUES ('delete', OLD.id, {old}); "
        f"END"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS facts_scope_tsv_idx")
        op.execute("ALTER TABLE facts DROP COLUMN scope_tsv")
        op.execute("ALTER TABLE facts DROP COLUMN scope")
        return
    op.execute("DROP TRIGGER IF EXISTS facts_fts_ai")
    op.execute("DROP TRIGGER IF EXISTS facts_fts_ad")
    op.execute("DROP TABLE IF EXISTS facts_fts")
    op.execute("ALTER TABLE facts DROP COLUMN scope")
    _create_fts(("content",))
