"""Shared fixtures: a memory migrated once per session and copied per test, a clock
that moves without sleeping, and contexts for any subject.

`backend` says which database the per-test memory is in: "sqlite" here. The service,
API and ACL suites override it with both backends (BACKENDS), so each of their tests
runs on a copied SQLite file and on a fresh PostgreSQL database (tests/postgres.py).
"""

from __future__ import annotations

import gc
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import Connection
from sqlalchemy.engine import URL

from app.db import migrate
from app.db.engine import make_engine
from app.dirs import Dirs
from app.embeddings.base import Vectors
from app.embeddings.catalog import ModelSpec, register_spec, unregister_spec
from app.embeddings.fake import FakeEmbedder
from app.runtime import Runtime, open_runtime
from app.services.context import Context
from app.settings import Settings
from app.usecases.memory import Memory
from tests.postgres import PostgresForTests
from tests.scratch import in_memory_parent

TEST_WIDTH = 64
DAY = 86_400.0


@pytest.hookimpl(tryfirst=True)  # before pytest's own tmp_path factory reads the option
def pytest_configure(config: pytest.Config) -> None:
    """tmp_path in a tmpfs when there is one (tests/scratch.py says why), in a directory
    of this run's own: a --basetemp given, or an xdist worker's (its controller's), stays."""
    if config.option.basetemp is not None or hasattr(config, "workerinput"):
        return
    parent = in_memory_parent()
    if parent is not None:
        config.option.basetemp = tempfile.mkdtemp(prefix="embornal-pytest-", dir=parent)
        config.add_cleanup(lambda: shutil.rmtree(config.option.basetemp, ignore_errors=True))


class FakeClock:
    """Time as UNIX seconds, moved by hand."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, days: float = 0.0, seconds: float = 0.0) -> None:
        self.now += days * DAY + seconds


class CountingEmbedder(FakeEmbedder):
    """The fake model, keeping the texts it is asked to embed (a cache hit or a reused
    vector shows as a text that is not there)."""

    def __init__(self, width: int, name: str = "fake") -> None:
        super().__init__(width, name)
        self.queries: list[str] = []
        self.documents: list[str] = []

    def embed_query(self, text: str) -> Vectors:
        self.queries.append(text)
        return super().embed_query(text)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        self.documents += list(texts)
        return super().embed_documents(texts)


BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(scope="module")
def backend() -> str:
    return "sqlite"


def both_backends(request: pytest.FixtureRequest) -> str:
    """A `backend` fixture body for suites that run on both (params=BACKENDS)."""
    return str(request.param)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test marked only_backend("sqlite") in a suite on both backends is not collected
    for the other one (deselected, not skipped: it has nothing to say there)."""
    kept, dropped = [], []
    for item in items:
        marker = item.get_closest_marker("only_backend")
        callspec = getattr(item, "callspec", None)
        param = callspec.params.get("backend") if callspec is not None else None
        if marker is not None and param is not None and param != marker.args[0]:
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = longest_modules_first(kept)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What the imports and the collection made (~270,000 objects) lives to the end of
    the run: frozen, each full garbage collection stops walking it again. On 149 tests
    of tests/api and tests/services in one process, the full collections took 4.8 s
    (17 of them), 2.1 s frozen (24)."""
    gc.collect()
    gc.freeze()


def _weight(module: list[pytest.Item]) -> int:
    """2: a module holding a test of many seconds (marked long); 1: one that starts
    processes (marked slow); 0: the rest."""
    marks = {m.name for item in module for m in item.iter_markers()}
    return 2 if "long" in marks else 1 if "slow" in marks else 0


def longest_modules_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The longest tests first: the modules holding a test marked long (the ACL's proofs,
    the benches' smoke runs: 10-30 s each), then those holding one marked slow
    (processes), then the rest, each module's tests together and in their order.
    xdist's worksteal hands a busy worker's queue out from its back, never its last two
    tests: with the benches' smoke runs at the end of the collection, one worker ran
    two of them alone for 31 s while the other sat idle."""
    modules: dict[Path, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.path, []).append(item)
    ordered = sorted(modules.values(), key=_weight, reverse=True)  # stable: in their order
    return [item for module in ordered for item in module]


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresForTests]:
    server = PostgresForTests(TEST_WIDTH)
    yield server
    server.stop()


def make_settings(home: Path, **sections: dict) -> Settings:
    embedding = {"model": "none", "width": TEST_WIDTH, "download": False}
    embedding.update(sections.pop("embedding", {}))
    # The test client's Host is "testserver": allowed beside the default names.
    sections.setdefault("http", {"allowed_hosts": ["testserver", "127.0.0.1", "localhost"]})
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
def fresh_memory(
    backend: str, request: pytest.FixtureRequest
) -> Iterator[Callable[[Path], Settings]]:
    """`fresh_memory(home)`: settings for a new memory (only what the migration wrote) in
    this test's backend: a copy of the migrated file, or a database made from the template."""
    made: list[URL] = []

    def make(home: Path) -> Settings:
        home.mkdir(parents=True, exist_ok=True)
        if backend == "postgresql":
            url = request.getfixturevalue("postgres").new_database()
            made.append(url)
            return make_settings(home, database={"url": url.render_as_string(False)})
        shutil.copy(request.getfixturevalue("migrated_template"), home / "memory.db")
        return make_settings(home)

    yield make
    for url in made:
        request.getfixturevalue("postgres").drop_database(url)


def same_memory(settings: Settings, **sections: dict) -> Settings:
    """Settings for the memory of `settings` (same place, same database) with other sections."""
    return make_settings(
        settings.dirs.data_dir, database=settings.database.model_dump(exclude_none=True), **sections
    )


@pytest.fixture
def settings(home: Path, fresh_memory: Callable[[Path], Settings]) -> Settings:
    return fresh_memory(home)


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
