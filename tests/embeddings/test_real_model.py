"""The one end-to-end test with the real offline model (minilm-l6, from PyPI packages)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.runtime import open_runtime
from app.services.facts import NewFact
from app.usecases.memory import Memory, SearchRequest
from tests.conftest import make_settings

pytestmark = pytest.mark.slow  # loads the real model (make test-fast leaves it out)

FACTS = [
    "The staging database is backed up every night at two in the morning.",
    "Alice prefers tea over coffee during long meetings.",
    "The payment outage is tracked as ticket PAY-77341 in the issue tracker.",
    "Our office cat likes to sleep on the warm printer.",
    "Quarterly revenue grew five percent compared with last year.",
    "The deploy pipeline runs the integration tests before every release.",
    "Bob is allergic to peanuts, so order lunch without nuts.",
    "The VPN certificate expires at the end of March.",
]


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory):
    home: Path = tmp_path_factory.mktemp("real")
    settings = make_settings(home, embedding={"model": "minilm-l6", "width": 384})
    rt = open_runtime(settings, load_model=True)
    assert rt.embedder is not None, rt.model_problem
    stored = Memory(rt).store_batch("default", [NewFact("/team", text) for text in FACTS])
    assert all(fact.embedded for fact in stored)
    yield rt, {fact.content: fact.id for fact in stored}
    rt.close()


def search(rt, q: str, mode: str) -> list[int]:
    request = SearchRequest(q=q, mode=mode, limit=5, peek=True)  # type: ignore[arg-type]
    found = Memory(rt).search("default", request)
    return [r.fact.id for r in found.results]


def test_a_paraphrase_finds_its_fact_first(memory) -> None:
    rt, ids = memory
    top = search(rt, "which animal naps on the copier?", "semantic")
    assert top[0] == ids[FACTS[3]]
    top = search(rt, "when do we make copies of the test db", "semantic")
    assert top[0] == ids[FACTS[0]]


def test_a_rare_exact_token_finds_its_fact_by_keyword(memory) -> None:
    rt, ids = memory
    assert search(rt, "PAY-77341", "keyword")[0] == ids[FACTS[2]]


def test_hybrid_finds_both_kinds(memory) -> None:
    rt, ids = memory
    assert search(rt, "PAY-77341", "hybrid")[0] == ids[FACTS[2]]
    assert search(rt, "which animal naps on the copier?", "hybrid")[0] == ids[FACTS[3]]
    assert search(rt, "someone cannot eat nuts", "hybrid")[0] == ids[FACTS[6]]


def test_the_readme_port_example_returns_the_port_fact_alone(tmp_path: Path) -> None:
    """README "First steps": a new memory (its /memory starter facts included), one fact
    about the port, `q=which port`: the port fact, and no filler from /memory."""
    settings = make_settings(tmp_path, embedding={"model": "minilm-l6", "width": 384})
    rt = open_runtime(settings, load_model=True)
    try:
        memory = Memory(rt)
        memory.reindex()  # the starter facts too, as a server embeds them in the background
        port = memory.store(
            "default", NewFact("/projects/embornal", "The API listens on port 8420.")
        )
        assert memory.search("default", SearchRequest(q="memory", mode="keyword")).results
        found = memory.search("default", SearchRequest(q="which port", limit=5))
        assert found.mode == "hybrid"
        assert [r.fact.id for r in found.results] == [port.id]
    finally:
        rt.close()


def test_a_nonsense_query_returns_nothing_and_recalls_nothing(memory) -> None:
    rt, ids = memory
    before = {fid: Memory(rt).get("default", fid, peek=True).recall_count for fid in ids.values()}
    for mode in ("hybrid", "semantic", "keyword"):
        request = SearchRequest(q="qwxz blorp frindle", mode=mode, limit=10)  # type: ignore[arg-type]
        assert Memory(rt).search("default", request).results == []
    after = {fid: Memory(rt).get("default", fid, peek=True).recall_count for fid in ids.values()}
    assert after == before
