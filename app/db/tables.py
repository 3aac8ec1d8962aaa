"""Core Table objects for the schema that the Alembic migrations create.

The migrations are the source of truth (they also create what Core cannot
express: FTS5 and vec0 virtual tables, triggers and views); these objects let
services build queries. Times are UNIX seconds (REAL) so that strength can be
ordered and filtered in SQL; the API shows them as RFC 3339 UTC.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    column,
    table,
    text,
)

from app.db.types import EmbeddingColumn

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_name)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

ROOT_PATH_ID = 1

meta = Table(
    "meta",
    metadata,
    Column("key", String, primary_key=True),
    Column("value", String, nullable=False),
)

paths = Table(
    "paths",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("parent_id", Integer, ForeignKey("paths.id"), nullable=True),
    Column("name", String, nullable=False),
    # The folded full path; paths are never renamed, so it never goes stale.
    Column("path", String, nullable=False, unique=True),
    Column("created_at", Float, nullable=False),
)

# Every (ancestor, descendant) pair, each node its own ancestor at depth 0.
# A trigger on paths keeps it; it makes subtree and nearest-tag queries flat joins.
path_closure = Table(
    "path_closure",
    metadata,
    Column("ancestor_id", Integer, ForeignKey("paths.id"), primary_key=True),
    Column("descendant_id", Integer, ForeignKey("paths.id"), primary_key=True),
    Column("depth", Integer, nullable=False),
)

# Fact ids come from clients: typed BIGINT in queries so that PostgreSQL compares an
# id beyond its INTEGER column's range (and finds nothing) instead of refusing it.
facts = Table(
    "facts",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column("path_id", Integer, ForeignKey("paths.id"), nullable=False),
    Column("content", Text, nullable=False),
    Column("owner", String, nullable=False),
    Column("supersedes_id", BigInteger, ForeignKey("facts.id"), nullable=True, unique=True),
    Column("deleted_at", Float, nullable=True),
    Column("created_at", Float, nullable=False),
    Column("last_recall_at", Float, nullable=True),
    Column("recall_count", Integer, nullable=False, default=0),
    Column("stability_days", Float, nullable=False, default=1.0),
    # NULL while waiting for a model; SQLite: the vector (float32 little-endian, its one
    # full copy); PostgreSQL: true, the vector being facts_vec's (EmbeddingColumn).
    Column("embedding", EmbeddingColumn, nullable=True),
    # Where the fact sits and whose it is, as words the keyword index holds beside its
    # own (app.acl.scope.fact_scope; migration 0010). Written once, with the fact.
    Column("scope", Text, nullable=False),
    # Listings `as_of` a moment seek to it (migration 0006).
    Index("ix_facts_created_at", "created_at", "id"),
)

fact_tags = Table(
    "fact_tags",
    metadata,
    Column("fact_id", Integer, ForeignKey("facts.id"), primary_key=True),
    Column("key", String, primary_key=True),
    Column("value", String, nullable=False),
)

path_tags = Table(
    "path_tags",
    metadata,
    Column("path_id", Integer, ForeignKey("paths.id"), primary_key=True),
    Column("key", String, primary_key=True),
    Column("value", String, nullable=False),
)

casbin_rule = Table(
    "casbin_rule",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("ptype", String(255)),
    Column("v0", String(255)),
    Column("v1", String(255)),
    Column("v2", String(255)),
    Column("v3", String(255)),
    Column("v4", String(255)),
    Column("v5", String(255)),
)

vector_log = Table(
    "vector_log",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("fact_id", Integer, nullable=False),
    sqlite_autoincrement=True,
)

# The vector index (migration 0004): each embedded fact's cell and sign-bit code,
# clustered by cell so that a start reads the codes in one sequential pass.
facts_vec = Table(
    "facts_vec",
    metadata,
    Column("list", Integer, primary_key=True),
    Column("fact_id", Integer, primary_key=True),
    Column("code", LargeBinary, nullable=False),
    Index("ux_facts_vec_fact_id", "fact_id", unique=True),
    sqlite_with_rowid=False,
)

# The unit centroid (float32) of each cell of facts_vec.
facts_vec_centroids = Table(
    "facts_vec_centroids",
    metadata,
    Column("list", Integer, primary_key=True, autoincrement=False),
    Column("centroid", LargeBinary, nullable=False),
)

# Tokens this memory signed (migration 0008): never the token itself. A row with no
# subject is a jti revoked by an admin that another issuer (an identity provider) made.
tokens = Table(
    "tokens",
    metadata,
    Column("jti", String, primary_key=True),
    Column("subject", String, nullable=True),
    Column("label", String, nullable=True),
    Column("issued_by", String, nullable=True),
    Column("issued_at", Float, nullable=True),
    Column("expires_at", Float, nullable=True),
    Column("revoked_at", Float, nullable=True),
    Column("revoked_by", String, nullable=True),
    Index("ix_tokens_subject", "subject", "issued_at"),
    Index("ix_tokens_expires_at", "expires_at"),
)

# Who changed what (migration 0008), written in the change's own transaction; never
# a fact's content. `via` is the front end: rest, mcp, cli or ui.
activity = Table(
    "activity",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("at", Float, nullable=False),
    Column("subject", String, nullable=False),
    Column("via", String, nullable=False),
    Column("action", String, nullable=False),
    Column("fact_id", BigInteger, nullable=True),
    Column("supersedes_id", BigInteger, nullable=True),
    Column("path", String, nullable=True),
    Column("tag", String, nullable=True),
    Column("policy", String, nullable=True),
    Column("jti", String, nullable=True),
    Column("note", String, nullable=True),
    Index("ix_activity_subject", "subject", "id"),
    Index("ix_activity_fact_id", "fact_id"),
    Index(
        "ix_activity_supersedes_id",
        "supersedes_id",
        sqlite_where=text("supersedes_id IS NOT NULL"),
        postgresql_where=text("supersedes_id IS NOT NULL"),
    ),
)

# One-time console sign-in codes (`embornal ui`), kept as SHA-256 digests.
signin_codes = Table(
    "signin_codes",
    metadata,
    Column("code_hash", String, primary_key=True),
    Column("subject", String, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Column("used_at", Float, nullable=True),
)

# Views and virtual tables, created by the migrations with op.execute.
effective_path_tags = table(
    "effective_path_tags", column("path_id"), column("key"), column("value"), column("depth")
)
effective_fact_tags = table(
    "effective_fact_tags", column("fact_id"), column("key"), column("value"), column("source")
)
facts_fts = table("facts_fts", column("rowid"), column("content"), column("scope"), column("rank"))
