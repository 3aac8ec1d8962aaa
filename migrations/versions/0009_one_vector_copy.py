"""PostgreSQL keeps one copy of each vector: facts_vec's, which its HNSW index is built on.

Until now a PostgreSQL memory held each vector twice besides the index: as float32
bytes in facts.embedding (what hybrid read its candidates' vectors from, and what
export wrote) and in facts_vec.embedding (what HNSW indexes). facts_vec's copy stays,
because the index must be built on it: an HNSW index on `facts` itself would be
written again by every recall (a recall updates last_recall_at and stability_days,
columns of ix_facts_live, so PostgreSQL cannot update the row in place and inserts
into every index of the table, the graph included). facts.embedding becomes a
boolean: true when facts_vec holds the fact's vector, NULL while it waits for a
model. The embedding queue (facts_pending_embedding_idx, `embedding IS NULL AND
deleted_at IS NULL`) and every "has a vector" test read it as before; the vector
itself is read from facts_vec (app.db.dialects.postgresql).

The trigger that logged each embedding for in-memory vector indexes goes too: on
PostgreSQL the database searches vectors itself and nothing reads that log.

SQLite keeps its layout: facts.embedding the one full copy, facts_vec the codes.
The downgrade writes the float32 bytes back from facts_vec.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 5_000


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP TRIGGER IF EXISTS facts_vector_log ON facts")
    op.execute("DROP FUNCTION IF EXISTS facts_vector_log()")
    op.execute("DELETE FROM vector_log")
    # A fact whose bytes never reached facts_vec (none should exist: both were written
    # in one transaction) waits for the model again rather than claim a vector.
    op.execute(
        "UPDATE facts SET embedding = NULL WHERE embedding IS NOT NULL "
        "AND NOT EXISTS (SELECT 1 FROM facts_vec WHERE facts_vec.fact_id = facts.id)"
    )
    op.execute(
        "ALTER TABLE facts ALTER COLUMN embedding TYPE boolean "
        "USING (CASE WHEN embedding IS NULL THEN NULL ELSE true END)"
    )


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE facts ALTER COLUMN embedding TYPE bytea USING NULL")
    # vector_send: int16 dimensions, int16 unused, then float4 big-endian.
    after = 0
    while True:
        rows = conn.exec_driver_sql(
            "SELECT fact_id, vector_send(embedding) FROM facts_vec WHERE fact_id > %(after)s "
            "ORDER BY fact_id LIMIT %(n)s",
            {"after": after, "n": BATCH},
        ).all()
        if not rows:
            break
        conn.exec_driver_sql(
            "UPDATE facts SET embedding = %(blob)s WHERE id = %(id)s",
            [
                {"id": fid, "blob": np.frombuffer(sent, ">f4", offset=4).astype("<f4").tobytes()}
                for fid, sent in rows
            ],
        )
        after = rows[-1][0]
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
