"""The schema comes from migrations only; they go up, down and up again."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import inspect

from app.db import migrate
from app.db.engine import make_engine, read_transaction
from app.errors import StartupError
from app.runtime import open_runtime
from tests.conftest import make_settings

EXPECTED = {"paths", "path_closure", "facts", "fact_tags", "path_tags", "meta", "casbin_rule"}


def test_up_down_up(tmp_path: Path) -> None:
    engine = make_engine(tmp_path / "m.db")
    migrate.upgrade(engine, 32)
    with read_transaction(engine) as conn:
        assert set(inspect(conn).get_table_names()) >= EXPECTED
        assert migrate.current_revision(conn) == migrate.head_revision()
        assert migrate.stored_width(conn) == 32
        memory = conn.exec_driver_sql(
            "SELECT count(*) FROM facts f JOIN fact_tags t ON t.fact_id = f.id "
            "WHERE t.key = 'visibility' AND t.value = 'public' AND f.owner = 'default'"
        ).scalar()
        assert memory >= 5
    migrate.downgrade(engine)
    with read_transaction(engine) as conn:
        assert not EXPECTED & set(inspect(conn).get_table_names())
        assert (
            conn.exec_driver_sql(
                "SELECT count(*) FROM sqlite_master WHERE name LIKE 'facts_%'"
            ).scalar()
            == 0
        )
    migrate.upgrade(engine, 32)
    with read_transaction(engine) as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM facts").scalar() >= 5
        assert conn.exec_driver_sql("SELECT count(*) FROM casbin_rule").scalar() == 5
    engine.dispose()


def test_start_stops_when_config_and_meta_disagree(tmp_path: Path) -> None:
    open_runtime(make_settings(tmp_path, embedding={"width": 16})).close()
    with pytest.raises(StartupError) as caught:
        open_runtime(make_settings(tmp_path, embedding={"width": 24}))
    assert "24" in caught.value.detail and "16" in caught.value.detail


def test_each_database_gets_its_own_cursor_key(tmp_path: Path) -> None:
    """Cursors signed by one memory are worthless to another (migration 0003)."""
    keys = []
    for name in ("one.db", "two.db"):
        engine = make_engine(tmp_path / name)
        migrate.upgrade(engine, 32)
        with read_transaction(engine) as conn:
            keys.append(
                conn.exec_driver_sql("SELECT value FROM meta WHERE key = 'cursor_key'").scalar()
            )
        engine.dispose()
    assert all(len(bytes.fromhex(key)) == 32 for key in keys)
    assert keys[0] != keys[1]
