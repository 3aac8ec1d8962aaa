"""One model story (issue 31, SPEC "Running it"): which model a memory embeds with when
config.yaml names none, decided in Runtime.load_model for every entry point.

The default model's hub is a loopback server (nothing reaches a hub); tiny generated
models stand in for the default and for the offline model, through the real loader.
Each memory is new (unmigrated), so its first start migrates at the default width, as
a fresh clone's does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.db.engine import read_transaction, write_transaction
from app.db.migrate import record_model, stored_model, stored_width
from app.dirs import Dirs
from app.embeddings.catalog import CATALOG, ModelSpec
from app.embeddings.fake import FakeEmbedder
from app.runtime import Runtime, open_runtime
from app.services import embedding as embedding_service
from app.settings import EmbeddingSettings, Settings
from app.usecases.memory import Memory, NewFact, SearchRequest
from tests.conftest import TINY, TINY_WIDTH
from tests.embeddings._support import FileServer, serve
from tests.onnx_factory import minilm_tokenizer_path, tiny_model_bytes, tiny_spec

DEFAULT = EmbeddingSettings().model
DEFAULT_WIDTH = EmbeddingSettings().width


@pytest.fixture
def hub() -> Iterator[FileServer]:
    """The default model's hub, on loopback; it has no file until a test adds some."""
    with serve() as server:
        yield server


@pytest.fixture
def new_memory(backend: str, request: pytest.FixtureRequest, home: Path) -> Iterator[dict]:
    """The `database` section of a memory nothing has opened yet."""
    if backend == "sqlite":
        home.mkdir(parents=True, exist_ok=True)
        yield {}
        return
    postgres = request.getfixturevalue("postgres")
    url = postgres.new_empty_database()
    yield {"url": url.render_as_string(False)}
    postgres.drop_database(url)


@pytest.fixture
def offline(tiny_model: ModelSpec, monkeypatch: pytest.MonkeyPatch) -> ModelSpec:
    """The tiny model (its files in the weights dir) as the one that installs offline."""
    monkeypatch.setattr("app.runtime.OFFLINE_MODEL", tiny_model.name)
    return tiny_model


def unnamed(home: Path, database: dict, hub: FileServer, **embedding: Any) -> Settings:
    """Settings that name no model and no width: the memory decides."""
    values = {"hub_url": hub.url, "pypi_url": hub.url, "download": True} | embedding
    return Settings(dirs=Dirs(home, home, home), database=database, embedding=values)


def memory_state(rt: Runtime) -> tuple[str | None, int | None, bool]:
    with read_transaction(rt.engine) as conn:
        return stored_model(conn), stored_width(conn), embedding_service.any_embedded(conn)


def test_where_the_default_cannot_be_fetched_a_new_memory_takes_the_offline_model(
    home: Path, new_memory: dict, hub: FileServer, offline: ModelSpec
) -> None:
    rt = open_runtime(unnamed(home, new_memory, hub), load_model=True, download=True)
    try:
        # It tried the default's hub (a 404 here), then moved to the offline model.
        tried = hub.requests[0][0]
        assert tried.startswith(f"/BAAI/{DEFAULT}/resolve/") and tried.endswith("/model.onnx")
        assert rt.fell_back and rt.model.name == TINY and rt.embedder is not None
        assert rt.settings.embedding.width == TINY_WIDTH
        assert memory_state(rt) == (TINY, TINY_WIDTH, False)
        note = rt.model_note or ""
        assert note.startswith(f"{DEFAULT} cannot be fetched (cannot download model.onnx")
        assert "404" in note and note.endswith(f"embornal model use {DEFAULT}")
        # Semantic search, with no second command.
        memory = Memory(rt)
        stored = memory.store("default", NewFact("/home", "the kettle is blue", {}, None))
        assert stored.embedded
        found = memory.search("default", SearchRequest(q="kettle", mode="semantic", limit=3))
        assert stored.id in [r.fact.id for r in found.results]
    finally:
        rt.close()

    # The next start stays on it, a model loaded or not, and says which and how to move.
    again = open_runtime(unnamed(home, new_memory, hub))
    assert (again.settings.embedding.model, again.settings.embedding.width) == (TINY, TINY_WIDTH)
    again.close()
    served = open_runtime(unnamed(home, new_memory, hub), load_model=True, download=True)
    try:
        assert served.model.name == TINY and not served.fell_back
        assert served.model_note == (
            f"embedding with {TINY}, the model of this memory's vectors; to move to the "
            f"default, {DEFAULT}: embornal model use {DEFAULT}"
        )
    finally:
        served.close()


def test_with_downloads_off_nothing_is_fetched_and_the_choice_is_the_same(
    home: Path, new_memory: dict, hub: FileServer, offline: ModelSpec
) -> None:
    """The image: embedding.download is false, its weights dir read-only."""
    settings = unnamed(home, new_memory, hub, download=False)
    rt = open_runtime(settings, load_model=True, download=settings.embedding.download)
    try:
        assert hub.requests == []
        assert rt.fell_back and memory_state(rt) == (TINY, TINY_WIDTH, False)
        assert "embedding.download is false" in (rt.model_note or "")
    finally:
        rt.close()


def test_a_command_that_fetches_nothing_leaves_the_choice_to_one_that_does(
    home: Path, new_memory: dict, hub: FileServer, offline: ModelSpec
) -> None:
    """`memory store` before the first `serve`: the fact waits; nothing is decided."""
    rt = open_runtime(unnamed(home, new_memory, hub), load_model=True, download=False)
    try:
        assert hub.requests == [] and rt.embedder is None and not rt.fell_back
        assert "this command downloads nothing" in (rt.model_problem or "")
        assert memory_state(rt) == (None, DEFAULT_WIDTH, False)
    finally:
        rt.close()


def test_a_memory_with_embedded_facts_never_moves_on_its_own(
    home: Path, new_memory: dict, hub: FileServer, offline: ModelSpec
) -> None:
    first = open_runtime(unnamed(home, new_memory, hub))
    first.embedder = FakeEmbedder(DEFAULT_WIDTH, name=DEFAULT)  # the default, once fetched
    Memory(first).store("default", NewFact("/a", "embedded with the default", {}, None))
    with write_transaction(first.engine) as conn:
        record_model(conn, DEFAULT)
    first.close()

    rt = open_runtime(unnamed(home, new_memory, hub), load_model=True, download=True)
    try:
        # Keyword search, facts queued; the front end names the command that switches.
        assert rt.embedder is None and not rt.fell_back and rt.model_note is None
        assert "cannot download" in (rt.model_problem or "")
        assert memory_state(rt) == (DEFAULT, DEFAULT_WIDTH, True)
    finally:
        rt.close()


def test_a_named_model_is_loaded_as_named_or_not_at_all(
    home: Path, new_memory: dict, hub: FileServer, offline: ModelSpec
) -> None:
    named = unnamed(home, new_memory, hub, model=DEFAULT, width=DEFAULT_WIDTH)
    rt = open_runtime(named, load_model=True, download=True)
    try:
        assert hub.requests and rt.embedder is None and not rt.fell_back
        assert memory_state(rt) == (None, DEFAULT_WIDTH, False)
    finally:
        rt.close()


def test_without_the_offline_model_either_the_reason_names_both(
    home: Path, new_memory: dict, hub: FileServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    absent = tiny_spec("tiny-absent", 8)
    monkeypatch.setitem(CATALOG, absent.name, absent)
    monkeypatch.setattr("app.runtime.OFFLINE_MODEL", absent.name)
    rt = open_runtime(unnamed(home, new_memory, hub), load_model=True, download=True)
    try:
        problem = rt.model_problem or ""
        assert problem.startswith("cannot download model.onnx")
        assert "the offline model tiny-absent is not installed either" in problem
        assert memory_state(rt) == (None, DEFAULT_WIDTH, False)
    finally:
        rt.close()


def test_the_default_is_fetched_where_it_can_be(
    home: Path, new_memory: dict, hub: FileServer, offline: ModelSpec, monkeypatch
) -> None:
    # A stand-in for the default at its width, its files on the loopback hub.
    stand_in = tiny_spec(DEFAULT, DEFAULT_WIDTH)
    monkeypatch.setitem(CATALOG, DEFAULT, stand_in)
    hub.routes["/tiny/model.onnx"] = tiny_model_bytes(DEFAULT_WIDTH)
    hub.routes["/tiny/tokenizer.json"] = minilm_tokenizer_path().read_bytes()
    rt = open_runtime(unnamed(home, new_memory, hub), load_model=True, download=True)
    try:
        assert rt.model.name == DEFAULT and rt.embedder is not None
        assert not rt.fell_back and rt.model_note is None
        assert memory_state(rt) == (DEFAULT, DEFAULT_WIDTH, False)
    finally:
        rt.close()


def test_two_starts_at_once_decide_once(
    home: Path, new_memory: dict, hub: FileServer, offline: ModelSpec, monkeypatch
) -> None:
    """Replicas starting on one new database: the second to take the write lock follows
    the first's choice and keeps the vectors it wrote meanwhile."""
    settings = unnamed(home, new_memory, hub)
    load_named = Runtime._load_named
    other: list[str] = []

    def meanwhile(self: Runtime, name: str, *args: Any, **kwargs: Any) -> Any:
        if name == TINY and not other:
            other.append("started")  # its own load passes straight through
            # The other replica decides, and embeds a fact, between our look and our write.
            first = open_runtime(settings, load_model=True, download=True)
            Memory(first).store("default", NewFact("/a", "first", {}, None))
            assert first.fell_back
            first.close()
        return load_named(self, name, *args, **kwargs)

    monkeypatch.setattr(Runtime, "_load_named", meanwhile)
    rt = open_runtime(settings, load_model=True, download=True)
    try:
        assert other and rt.model.name == TINY and not rt.fell_back
        assert rt.settings.embedding.width == TINY_WIDTH
        assert memory_state(rt) == (TINY, TINY_WIDTH, True)  # its vector kept
    finally:
        rt.close()
