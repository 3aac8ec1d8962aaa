"""Alembic environment: always runs on the connection app.db.migrate hands it."""

from __future__ import annotations

from alembic import context

from app.db.tables import metadata

# FTS5 and vec0 keep shadow tables that autogenerate must not try to drop.
SHADOW_SUFFIXES = ("_data", "_idx", "_content", "_docsize", "_config", "_chunks", "_rowids")
VIRTUAL = ("facts_fts", "facts_vec")


def include_name(name: str | None, type_: str, _parents: dict[str, str | None]) -> bool:
    if type_ == "table" and name is not None and name.startswith(VIRTUAL):
        return False
    return not (type_ == "table" and name is not None and name.endswith(SHADOW_SUFFIXES))


connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through `embornal migrate`, which supplies the engine")

context.configure(
    connection=connection,
    target_metadata=metadata,
    include_name=include_name,
    render_as_batch=True,
)
with context.begin_transaction():
    context.run_migrations()
