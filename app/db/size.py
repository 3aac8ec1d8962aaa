"""How much room the memory takes: the SQLite file with its WAL, or the PostgreSQL database."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, text


def database_bytes(engine: Engine) -> int | None:
    """Bytes on disk, or None when it cannot be told (an in-memory database)."""
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            size = conn.execute(text("SELECT pg_database_size(current_database())")).scalar()
        return int(size) if size is not None else None
    name = engine.url.database
    if not name or name == ":memory:":
        return None
    base = Path(name)
    total = 0
    for suffix in ("", "-wal"):
        part = base.with_name(base.name + suffix)
        if part.is_file():
            total += part.stat().st_size
    return total
