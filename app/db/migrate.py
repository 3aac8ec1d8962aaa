"""Bring memory.db to the head revision, and refuse a vector width that disagrees."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, select

import migrations
from app.db.dialects import backend
from app.db.engine import write_transaction
from app.db.tables import meta
from app.errors import StartupError

MIGRATIONS_DIR = Path(migrations.__file__).parent


def alembic_config(connection: Connection | None = None, width: int | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    if width is not None:
        config.attributes["embedding_width"] = width
    return config


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(conn: Connection) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine, width: int, revision: str = "head") -> None:
    """Run the migrations up to `revision`; a new memory's vec0 table gets `width`."""
    with write_transaction(engine) as conn:
        backend(conn).lock_schema(conn)
        command.upgrade(alembic_config(conn, width), revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    with write_transaction(engine) as conn:
        command.downgrade(alembic_config(conn), revision)


def stored_width(conn: Connection) -> int | None:
    value = conn.execute(select(meta.c.value).where(meta.c.key == "embedding_width")).scalar()
    return int(value) if value is not None else None


def check_width(conn: Connection, config_width: int, model_width: int | None = None) -> None:
    """Stop when config, meta and the model disagree (seed: "the memory stops")."""
    in_meta = stored_width(conn)
    seen = {config_width, in_meta} | ({model_width} if model_width is not None else set())
    if len(seen) > 1:
        model = f", the model gives {model_width}" if model_width is not None else ""
        raise StartupError(
            f"embedding width disagreement: config says {config_width}, "
            f"the memory (meta) holds {in_meta}{model}. "
            "To move the memory to a new width on purpose, run "
            "`embornal memory reindex --rebuild`."
        )
