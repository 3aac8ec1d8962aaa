"""The memory's files are its owner's alone: directories 0700, memory.db and its
-wal/-shm 0600, a looser existing database tightened at start (SPEC "Files")."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.auth.tokens import TokenVerifier
from app.dirs import Dirs
from app.errors import ConfigError
from app.runtime import open_runtime
from app.settings import Settings
from app.usecases.memory import Memory
from tests.conftest import TEST_WIDTH

COMPANIONS = ("memory.db-wal", "memory.db-shm")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    """The common 022, under which SQLite made memory.db 0644 before this was fixed."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def settings_in(tmp_path: Path) -> Settings:
    dirs = Dirs(tmp_path / "config", tmp_path / "data", tmp_path / "cache")
    return Settings(dirs=dirs, embedding={"model": "none", "width": TEST_WIDTH})


def test_a_fresh_memory_is_private(tmp_path: Path) -> None:
    settings = settings_in(tmp_path)
    rt = open_runtime(settings)
    TokenVerifier(settings)  # creates the signing key in the config directory
    try:
        with Memory(rt).transaction(write=True) as (conn, _ctx):
            conn.exec_driver_sql("INSERT INTO meta (key, value) VALUES ('probe', 'x')")
        data = settings.dirs.data_dir
        assert mode(data) == 0o700
        assert mode(settings.dirs.config_dir) == 0o700
        assert mode(settings.secret_path) == 0o600
        assert mode(data / "memory.db") == 0o600
        # Open connections keep the WAL files: SQLite gives them the database's mode.
        for name in COMPANIONS:
            assert mode(data / name) == 0o600, name
    finally:
        rt.close()


def test_a_loose_database_is_tightened_at_start(tmp_path: Path, caplog) -> None:
    settings = settings_in(tmp_path)
    open_runtime(settings).close()
    data = settings.dirs.data_dir
    # As an older build left it: everything world-readable, WAL files left by a crash.
    (data / "memory.db").chmod(0o644)
    for name in COMPANIONS:
        (data / name).touch()
        (data / name).chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="app.db.engine"):
        rt = open_runtime(settings)
    try:
        for name in ("memory.db", *COMPANIONS):
            assert mode(data / name) == 0o600, name
        lines = [r for r in caplog.records if r.name == "app.db.engine"]
        assert len(lines) == 1
        assert "memory.db (was 0644)" in lines[0].getMessage()
    finally:
        rt.close()
    # Once tight, the next start says nothing.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="app.db.engine"):
        open_runtime(settings).close()
    assert not [r for r in caplog.records if r.name == "app.db.engine"]


def test_a_database_path_in_an_existing_directory_leaves_the_directory(tmp_path: Path) -> None:
    """A directory the owner chose (database.path) keeps its mode; the file is private."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    settings = settings_in(tmp_path).model_copy(update={"database": {"path": shared / "memory.db"}})
    settings = Settings(
        dirs=settings.dirs,
        embedding={"model": "none", "width": TEST_WIDTH},
        database={"path": shared / "memory.db"},
    )
    open_runtime(settings).close()
    assert mode(shared) == 0o755
    assert mode(shared / "memory.db") == 0o600


def test_a_database_path_that_names_no_database_is_refused_untouched(tmp_path: Path) -> None:
    """database.path set to /tmp made /tmp 0700; set to a text file, made it 0600 and
    then failed inside SQLite with a traceback. Each is refused in one line, unchanged."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    notes = tmp_path / "notes.txt"
    notes.write_text("not a memory, but long enough for a header")
    notes.chmod(0o644)
    for path, problem in ((shared, "is a directory"), (notes, "is not a SQLite database")):
        settings = Settings(
            dirs=settings_in(tmp_path).dirs,
            embedding={"model": "none", "width": TEST_WIDTH},
            database={"path": path},
        )
        with pytest.raises(ConfigError) as refused:
            open_runtime(settings)
        assert refused.value.detail.startswith(f"database.path: {path} {problem}")
    assert mode(shared) == 0o1777 and list(shared.iterdir()) == []
    assert mode(notes) == 0o644 and notes.read_text().startswith("not a memory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "shared"]
