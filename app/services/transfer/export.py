"""Export: the whole memory as format records, from the caller's one read snapshot."""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import Connection, null, select

from app.db import migrate
from app.db.dialects import backend
from app.db.tables import fact_tags, facts, path_tags, paths
from app.errors import Forbidden
from app.services import policies as policy_service
from app.services.context import Context
from app.services.transfer.format import (
    EndRecord,
    FactRecord,
    Header,
    PathRecord,
    PolicyRecord,
)

Record = Header | PathRecord | FactRecord | PolicyRecord | EndRecord


def require_admin(ctx: Context) -> None:
    if not ctx.access.is_admin:
        raise Forbidden("export and import move the whole memory: they need the admin role")


def export_memory(
    conn: Connection, ctx: Context, *, with_embeddings: bool = False
) -> Iterator[Record]:
    """The whole memory as export records, streamed, ending with the end record.

    Everything: facts of every owner, deleted and superseded ones, every policy.
    Run it inside one read transaction so that the file is one consistent snapshot.
    """
    require_admin(ctx)
    return _export(conn, ctx, with_embeddings)


def _export(conn: Connection, ctx: Context, with_embeddings: bool) -> Iterator[Record]:
    # The records come from the database, already valid: constructed, not validated.
    width = migrate.stored_width(conn)
    yield Header.model_construct(type="embornal-export", version=1, embedding_width=width)

    node_tags: dict[str, dict[str, str]] = {}
    for path, key, value in conn.execute(
        select(paths.c.path, path_tags.c.key, path_tags.c.value)
        .join(paths, paths.c.id == path_tags.c.path_id)
        .order_by(paths.c.path, path_tags.c.key)
    ):
        node_tags.setdefault(path, {})[key] = value
    path_count = 0
    # Sorted by path, a parent comes before its children (a prefix sorts first).
    for path, created_at in conn.execute(
        select(paths.c.path, paths.c.created_at).order_by(paths.c.path)
    ):
        path_count += 1
        yield PathRecord.model_construct(
            path=path, created_at=created_at, tags=node_tags.get(path, {})
        )

    # Facts and their tags are two cursors read side by side in fact id order, so an
    # export of any size holds one fact in memory at a time.
    tag_rows = iter(
        conn.execute(
            select(fact_tags.c.fact_id, fact_tags.c.key, fact_tags.c.value).order_by(
                fact_tags.c.fact_id, fact_tags.c.key
            )
        )
    )
    pending = next(tag_rows, None)
    fact_count = 0
    # The vector from where the backend keeps it (facts_vec on PostgreSQL), and only
    # when it is written out.
    vector = backend(conn).vectors.stored() if with_embeddings else null()
    columns = [c for c in facts.c if c.name != "embedding"]
    for row in conn.execute(
        select(*columns, vector.label("embedding"), paths.c.path)
        .join(paths, paths.c.id == facts.c.path_id)
        .order_by(facts.c.id)
    ):
        own: dict[str, str] = {}
        while pending is not None and pending.fact_id <= row.id:
            if pending.fact_id == row.id:
                own[pending.key] = pending.value
            pending = next(tag_rows, None)
        fact_count += 1
        yield FactRecord.model_construct(
            id=row.id,
            path=row.path,
            content=row.content,
            owner=row.owner,
            tags=own,
            supersedes_id=row.supersedes_id,
            deleted_at=row.deleted_at,
            created_at=row.created_at,
            last_recall_at=row.last_recall_at,
            recall_count=row.recall_count,
            stability_days=row.stability_days,
            embedding=row.embedding,
        )

    lines = policy_service.list_policies(conn, ctx)
    for line in lines:
        yield PolicyRecord.model_construct(line_text=str(line))
    yield EndRecord.model_construct(paths=path_count, facts=fact_count, policies=len(lines))
