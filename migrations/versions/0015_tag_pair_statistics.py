"""PostgreSQL counts how many facts hold each tag pair, not each key and each value.

A read rule on a fact's own tag (`tag:secret=yes`, allow or deny) asks, in every
statement that applies the reader's rules, for the facts holding that tag. The planner
estimated their number as the share of facts with the key times the share with the
value, as if the two were unrelated: a value is nearly always met with its own key, so
a tag pair held by 1% of the facts was estimated at 54 of ~10,000 at a million (5 of
~1,000 at 100k). Taking the set for small, it read it whole (a hashed subplan over
fact_tags' heap) in each walk of a search, where asking each candidate's own tags by
key costs less. Extended statistics (the most common key and value pairs, read by
ANALYZE) give it the right count and it probes per candidate. Pages do not change;
plans do. `bench.search_bench`'s million (50 policy lines, a tag deny among them), the
same searches with and without (in-process p50, their embeddings kept, two rounds):
keyword 96.2 -> 54.4 ms, hybrid 155.7 -> 107.9 ms. A covering (key, value, fact_id)
index, tried first, was no faster once the count was right, and larger.

The upgrade reads the statistics at once (ANALYZE of fact_tags: a sample, ~0.1 s at a
million facts); autovacuum keeps them. SQLite is untouched: fact_tags is a WITHOUT
ROWID table there, whose (key, value) index holds the fact ids, so the set is read from
the index alone.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STATISTICS = "fact_tags_key_value_pairs"


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"CREATE STATISTICS {STATISTICS} (mcv) ON key, value FROM fact_tags")
    op.execute("ANALYZE fact_tags")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"DROP STATISTICS IF EXISTS {STATISTICS}")
