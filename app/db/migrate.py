"""Bring memory.db to the head revision, and refuse a vector width that disagrees.

Every command opens the memory through `upgrade`, so its cost is every command's:
a memory already at head is recognised with one SELECT and no Alembic import
(~0.3 s of a CLI command's start, bench/cli_startup.py). That rests on the
revision files' naming rule, `<revision>_<slug>.py` with numbered revisions in
one line, which tests/db/test_migrations.py holds against Alembic's own head.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, inspect, select, text

import migrations
from app.db.dialects import backend
from app.db.engine import write_transaction
from app.db.tables import meta
from app.errors import StartupError

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(migrations.__file__).parent
_REVISION_FILE = re.compile(r"^(\d{4})_\w+\.py$")


def alembic_config(connection: Connection | None = None, width: int | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    if width is not None:
        config.attributes["embedding_width"] = width
    return config


def head_revision() -> str | None:
    """The newest revision, by the naming rule of the revision files (no Alembic)."""
    names = (entry.name for entry in (MIGRATIONS_DIR / "versions").iterdir())
    numbers = [match.group(1) for match in map(_REVISION_FILE.match, names) if match]
    return max(numbers, default=None)


def alembic_head_revision() -> str | None:
    """The head as Alembic reads it from the scripts: the truth head_revision follows."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(conn: Connection) -> str | None:
    """The revision the memory is at; None for a memory no migration has run on."""
    # inspect() is per dialect (sqlite_master on SQLite, the catalog on PostgreSQL).
    if not inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def upgrade(engine: Engine, width: int, revision: str = "head") -> str | None:
    """Run the migrations up to `revision`; a new memory's vec0 table gets `width`.
    Returns the revision the memory was at (None: a new memory)."""
    with engine.connect() as conn:
        before = current_revision(conn)
    if revision == "head" and before == head_revision():
        return before
    from alembic import command

    with write_transaction(engine) as conn:
        backend(conn).lock_schema(conn)
        command.upgrade(alembic_config(conn, width), revision)
    return before


def downgrade(engine: Engine, revision: str = "base") -> None:
    from alembic import command

    with write_transaction(engine) as conn:
        command.downgrade(alembic_config(conn), revision)


def stored_width(conn: Connection) -> int | None:
    value = conn.execute(select(meta.c.value).where(meta.c.key == "embedding_width")).scalar()
    return int(value) if value is not None else None


MODEL_KEY = "embedding_model"


# Read in every search that embeds (Runtime.model_is_current): built once.
_STORED_MODEL = select(meta.c.value).where(meta.c.key == MODEL_KEY)


def stored_model(conn: Connection) -> str | None:
    """The model the memory's vectors come from, as the last process that loaded or
    switched one recorded it (None before any did)."""
    return conn.execute(_STORED_MODEL).scalar()


def record_model(conn: Connection, name: str) -> None:
    """Record the model in meta, in the caller's write transaction: running servers
    read it on their next request and load the same model (Runtime.follow_model).

    An upsert, not UPDATE-then-INSERT: servers started at once on one fresh
    PostgreSQL each saw no row, and the second INSERT broke the primary key."""
    stmt = backend(conn).insert(meta).values(key=MODEL_KEY, value=name)
    conn.execute(stmt.on_conflict_do_update(index_elements=["key"], set_={"value": name}))


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
