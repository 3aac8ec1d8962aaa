"""Shared fixtures: a memory migrated once per session and copied per test, a clock
that moves without sleeping, and contexts for any subject."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import Connection

from app.db import migrate
from app.db.engine import make_engine
from app.dirs import Dirs
from app.embeddings.catalog import ModelSpec, register_spec, unregister_spec
from app.runtime import Runtime, open_runtime
from app.services.context import Context
from app.settings import Settings
from app.usecases.memory import Memory

TEST_WIDTH = 64
DAY = 86_400.0


class FakeClock:
    """Time as UNIX seconds, moved by hand."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, days: float = 0.0, seconds: float = 0.0) -> None:
        self.now += days * DAY + seconds


def make_settings(home: Path, **sections: dict) -> Settings:
    embedding = {"model": "none", "width": TEST_WIDTH, "download": False}
    embedding.update(sections.pop("embedding", {}))
    return Settings(dirs=Dirs(home, home, home), embedding=embedding, **sections)


@pytest.fixture(scope="session")
def migrated_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "memory.db"
    engine = make_engine(path)
    migrate.upgrade(engine, TEST_WIDTH)
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    engine.dispose()
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def settings(home: Path, migrated_template: Path) -> Settings:
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(migrated_template, home / "memory.db")
    return make_settings(home)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rt(settings: Settings) -> Iterator[Runtime]:
    runtime = open_runtime(settings)
    yield runtime
    runtime.close()


class Actor:
    """Runs service calls as one subject, each in its own write transaction, and the
    use cases (`actor.memory`) on the same clock."""

    def __init__(self, runtime: Runtime, subject: str, clock: FakeClock) -> None:
        self.runtime, self.subject, self.clock = runtime, subject, clock
        self.memory = Memory(runtime, clock=clock)

    @contextmanager
    def tx(self) -> Iterator[tuple[Connection, Context]]:
        with self.memory.transaction(self.subject, write=True) as (conn, ctx):
            yield conn, ctx


@pytest.fixture
def actor(rt: Runtime, clock: FakeClock):
    def make(subject: str = "default") -> Actor:
        return Actor(rt, subject, clock)

    return make


TINY = "tiny-32"
TINY_WIDTH = 32


@pytest.fixture
def tiny_model(home: Path) -> Iterator[ModelSpec]:
    """A tiny generated ONNX model in the catalog as `tiny-32`, its files in `home`."""
    from tests.onnx_factory import make_tiny_model_dir, tiny_spec

    spec = tiny_spec(TINY, TINY_WIDTH)
    register_spec(spec)
    make_tiny_model_dir(home / TINY, TINY_WIDTH)
    yield spec
    unregister_spec(TINY)
