"""`similar` with the real offline model: a paraphrase is named, a related fact is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.runtime import open_runtime
from app.services.facts import NewFact
from app.usecases.memory import Memory
from tests.conftest import make_settings

pytestmark = pytest.mark.slow  # loads the real model (make test-fast leaves it out)

STORED = [
    "The staging database is backed up every night at two in the morning.",
    "Alice prefers tea over coffee during long meetings.",
    "The VPN certificate expires at the end of March.",
]


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory):
    home: Path = tmp_path_factory.mktemp("similar")
    settings = make_settings(home, embedding={"model": "minilm-l6", "width": 384})
    rt = open_runtime(settings, load_model=True)
    assert rt.embedder is not None, rt.model_problem
    stored = Memory(rt).store_batch("default", [NewFact("/team", text) for text in STORED])
    yield Memory(rt), {fact.content: fact.id for fact in stored}
    rt.close()


@pytest.mark.parametrize(
    ("text", "twin"),
    [
        ("Every night at 2am the staging DB gets backed up.", STORED[0]),
        ("In long meetings Alice would rather drink tea than coffee.", STORED[1]),
        ("Our VPN cert runs out at the end of March.", STORED[2]),
    ],
)
def test_a_paraphrase_is_similar(memory, text: str, twin: str) -> None:
    mem, ids = memory
    got = mem.store("default", NewFact("/elsewhere", text), on_duplicate="allow")
    assert got.similar_checked is True
    assert [s.id for s in got.similar][:1] == [ids[twin]], got.similar
    mem.delete("default", got.id)  # each case meets the stored facts alone


@pytest.mark.parametrize(
    "text",
    [
        "The staging database runs on a smaller server than production.",
        "Alice has worked on the billing team for six years.",
        "The VPN is needed to reach the build servers from home.",
    ],
)
def test_a_fact_on_the_same_topic_is_not(memory, text: str) -> None:
    mem, _ids = memory
    got = mem.store("default", NewFact("/elsewhere", text))
    assert got.similar_checked is True and got.similar == [], got.similar
    mem.delete("default", got.id)
