"""The quality bench's data (bench/convgen.py) and its figures (bench/quality.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
from datetime import datetime
from pathlib import Path

import pytest

from app.embeddings.fake import FakeEmbedder
from app.services import ranking
from bench import convgen, datasets, quality
from bench.datasets import Ask

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def held() -> list[convgen.Conversation]:
    return convgen.split("held")


def test_the_same_seed_gives_the_same_conversation() -> None:
    one, two = convgen.conversation(3), convgen.conversation(3)
    assert json.dumps(asdict(one)) == json.dumps(asdict(two))
    assert json.dumps(asdict(one)) != json.dumps(asdict(convgen.conversation(4)))


@pytest.mark.slow  # starts processes
def test_every_process_generates_the_same_data() -> None:
    # str hashes (and so set order) differ between processes unless seeded alike.
    code = (
        "import hashlib, json, dataclasses; from bench import convgen; "
        "print(hashlib.sha256(json.dumps([dataclasses.asdict(c) for c in "
        "convgen.split('dev')]).encode()).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(digests) == 1


def test_the_splits_do_not_share_a_seed() -> None:
    assert not set(convgen.SPLITS["dev"]) & set(convgen.SPLITS["held"])


def test_the_held_part_is_as_large_as_the_issue_asks(held: list[convgen.Conversation]) -> None:
    assert sum(len(c.questions) for c in held) >= 500
    assert sum(len(c.facts) for c in held) >= 3000
    kinds = {q.kind for c in held for q in c.questions}
    assert kinds == set(convgen.KINDS)


def test_each_conversation_has_the_shape_of_a_long_chat(held: list[convgen.Conversation]) -> None:
    for conv in held:
        assert 15 <= len(conv.sessions) <= 30
        assert 250 <= len(conv.facts) <= 360, (conv.id, len(conv.facts))
        assert 40 <= len(conv.questions) <= 50, (conv.id, len(conv.questions))
        assert {f.speaker for f in conv.facts} == set(conv.speakers)
        times = [datetime.fromisoformat(f.created_at) for f in conv.facts]
        assert times == sorted(times)
        for fact in conv.facts:
            assert fact.path == f"/conversations/{conv.id}/session-{fact.session}"
            assert fact.content.startswith(f"{fact.speaker}: ")
    assert len({s for c in held for s in c.speakers}) >= 15


def test_questions_point_at_turns_and_are_asked_afterwards(
    held: list[convgen.Conversation],
) -> None:
    for conv in held:
        ids = {f.id for f in conv.facts}
        last = datetime.fromisoformat(conv.facts[-1].created_at)
        for q in conv.questions:
            assert set(q.relevant) <= ids
            assert (q.kind == "none") == (not q.relevant), q
            if q.kind == "multi":
                assert len(q.relevant) >= 2, q
            assert datetime.fromisoformat(q.asked_at) > last
        assert len({q.text for q in conv.questions}) == len(conv.questions)


def test_a_long_conversation_is_twice_as_long_under_the_same_rules() -> None:
    usual, long = convgen.conversation(1), convgen.conversation(1, long=True)
    assert convgen.LONG_SESSIONS[0] <= len(long.sessions) <= convgen.LONG_SESSIONS[1]
    assert len(long.facts) >= 1.8 * len(usual.facts), (len(long.facts), len(usual.facts))
    assert 40 <= len(long.questions) <= 50
    ids = {f.id for f in long.facts}
    last = datetime.fromisoformat(long.facts[-1].created_at)
    for q in long.questions:
        assert set(q.relevant) <= ids and (q.kind == "none") == (not q.relevant)
        assert datetime.fromisoformat(q.asked_at) > last


def test_questions_mostly_avoid_the_words_of_their_evidence(
    held: list[convgen.Conversation],
) -> None:
    answered = [q for c in held for q in c.questions if q.relevant]
    assert sum(q.overlap == 0 for q in answered) / len(answered) >= 0.85


def test_a_worded_conversation_is_the_same_one_asked_in_the_words_said() -> None:
    usual, worded = convgen.conversation(1), convgen.conversation(1, worded=True)
    assert [asdict(f) for f in worded.facts] == [asdict(f) for f in usual.facts]
    answered = [q for q in worded.questions if q.relevant]
    ids = {f.id for f in worded.facts}
    assert all(set(q.relevant) <= ids for q in answered)
    # Paraphrased, ~95% of questions share no word with their evidence; worded, far fewer.
    assert sum(q.overlap > 0 for q in answered) / len(answered) >= 0.25
    assert sum(q.overlap > 0 for q in usual.questions if q.relevant) / len(answered) <= 0.1


def test_a_worded_question_says_its_answer_only_when_it_names_its_thing() -> None:
    for seed in convgen.SPLITS["dev"]:
        gen = convgen.Gen(seed, worded=True)
        conv = gen.build()
        told = {arc.turns["event"]: arc.value.lower() for arc in gen.arcs}
        asked = [q for q in conv.questions if q.relevant and not q.names_thing]
        assert asked
        for q in asked:
            for fid in q.relevant:
                assert told.get(fid, "\x00") not in q.text.lower(), q.text


def test_content_words_leave_out_names_and_stop_words() -> None:
    words = convgen.content_words("What instrument did Maria take up in Lisbon?", {"Maria"})
    assert words == {"instrument", "take"}


def test_evaluate_counts_recall_and_reciprocal_rank() -> None:
    qs = [
        Ask("a", "single", "?", ["x"], "2026-01-01T00:00:00+00:00"),
        Ask("b", "multi", "?", ["x", "y"], "2026-01-01T00:00:00+00:00"),
        Ask("c", "none", "?", [], "2026-01-01T00:00:00+00:00"),
    ]
    rankings = {"a": ["p", "q", "x"], "b": ["y", *"pqrstuvw", "x"], "c": []}
    m = quality.evaluate(rankings, qs)
    assert list(m.recall5) == [1.0, 0.5, 0.0]
    assert list(m.recall10) == [1.0, 1.0, 0.0]
    assert list(m.rr10) == [pytest.approx(1 / 3), 1.0, 0.0]
    assert list(m.empty) == [0.0, 0.0, 1.0]
    mean, low, high = quality.bootstrap(m.recall5[quality.select(m, None)])
    assert mean == 0.75 and 0.5 <= low <= mean <= high <= 1.0
    assert list(quality.select(m, "-")) == [2]


def test_each_fact_is_stored_at_its_own_time(tmp_path: Path) -> None:
    corpus = datasets.load("chats", "smoke")[0]
    handle = quality.build_memory(corpus, FakeEmbedder(384), tmp_path)
    try:
        for fact in corpus.facts[:: len(corpus.facts) // 5]:
            stored = handle.memory.get("default", handle.ids[fact.id], peek=True)
            assert stored.created_at == datetime.fromisoformat(fact.created_at)
            assert stored.path == fact.path and stored.content == fact.content
        found = quality.search_mode("keyword")(handle, corpus.questions[0])
        assert set(found) <= {f.id for f in corpus.facts}
    finally:
        handle.runtime.close()


def test_a_notes_memory_is_stored_with_its_supersedes_and_deletes(tmp_path: Path) -> None:
    """The notes shape's currency is the memory's own: a superseded or deleted fact is
    out of every search, its successor in, and a question's answers are all current."""
    corpus = datasets.load("notes", "smoke")[0]
    handle = quality.build_memory(corpus, FakeEmbedder(384), tmp_path)
    try:
        superseded = {f.supersedes for f in corpus.facts if f.supersedes}
        deleted = {f.id for f in corpus.facts if f.deleted_at}
        assert superseded and deleted
        for fid in superseded | deleted:
            fact = handle.memory.get("default", handle.ids[fid], peek=True, include_deleted=True)
            assert fact.superseded or fact.deleted_at is not None
        for q in corpus.questions:
            assert not set(q.relevant) & (superseded | deleted), q
    finally:
        handle.runtime.close()


@pytest.mark.parametrize("shape", ["notes", "chats"])
def test_semantic_search_finds_what_an_exact_cosine_over_every_fact_finds(
    shape: str, tmp_path: Path
) -> None:
    """Semantic search's own path (the index's approximation, the starter facts, the
    supersedes and deletes) loses nothing against the exact cosine of every current
    fact above the same floor: the same page, in the same order, for every question."""
    corpus = datasets.load(shape, "smoke")[0]
    handle = quality.build_memory(corpus, FakeEmbedder(384), tmp_path)
    try:
        floor = ranking.cosine_floor(handle.runtime.embedder.name)
        pages = 0
        for question in corpus.questions:
            handle.clock.at(question.asked_at)
            ours = quality.search_mode("semantic")(handle, question)
            assert ours == quality.exact_cosine(handle, question, floor=floor), question.id
            pages += bool(ours)
        assert pages >= len(corpus.questions) // 2  # pages to compare, not empty ones
    finally:
        handle.runtime.close()


def test_the_notes_files_pass_their_own_check() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "notes" / "check.py")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    assert "all files pass" in done.stdout


def test_the_notes_split_is_four_people_each_and_disjoint() -> None:
    dev, held = datasets.notes("dev"), datasets.notes("held")
    assert len(dev) == len(held) == 4
    assert not {c.id for c in dev} & {c.id for c in held}
    assert sum(len(c.questions) for c in held) >= 150
    assert {q.kind for c in held for q in c.questions} >= {"paraphrase", "keyword", "none"}


def test_beam_is_read_where_it_was_fetched_and_never_without_it() -> None:
    with pytest.raises(SystemExit, match="--beam PATH"):
        datasets.load("beam", "dev", beam_path=None)


def test_beam_questions_point_at_the_turns_their_source_ids_name(tmp_path: Path) -> None:
    """A chat in BEAM's layout (read from a clone): one fact per turn, dated from its
    batch's anchor; knowledge updates answered by the update, nested ids flattened,
    abstentions with no answer, summaries left out."""
    chat = [
        {
            "batch_number": 1,
            "time_anchor": None,
            "turns": [
                [
                    {"role": "user", "id": 0, "time_anchor": "March-15-2024",
                     "content": "I plan a budget app ->-> 1,1"},
                    {"role": "assistant", "id": 1, "content": "Sure."},
                ],
                [
                    {"role": "user", "id": 2, "content": "The API answers in 250ms now."},
                    {"role": "assistant", "id": 3, "content": "Great."},
                ],
            ],
        }
    ]  # fmt: skip
    probing = {
        "knowledge_update": [
            {"question": "How fast is the API?",
             "source_chat_ids": {"original_info": [0], "updated_info": [2]}}
        ],
        "multi_session_reasoning": [{"question": "What app?", "source_chat_ids": [[0], [2]]}],
        "abstention": [{"question": "What is my cat called?", "source_chat_ids": None}],
        "summarization": [{"question": "Sum it up", "source_chat_ids": [0, 1, 2, 3]}],
    }  # fmt: skip
    folder = tmp_path / "chats" / "100K" / "1"
    (folder / "probing_questions").mkdir(parents=True)
    (folder / "chat.json").write_text(json.dumps(chat))
    (folder / "probing_questions" / "probing_questions.json").write_text(json.dumps(probing))
    datasets.BEAM_SPLITS["test"] = (1,)
    try:
        (corpus,) = datasets.load("beam", "test", beam_path=tmp_path)
    finally:
        del datasets.BEAM_SPLITS["test"]
    assert [f.content for f in corpus.facts][:2] == [
        "User: I plan a budget app",
        "Assistant: Sure.",
    ]
    assert corpus.facts[0].created_at.startswith("2024-03-15")
    asks = {q.kind: q for q in corpus.questions}
    assert asks["knowledge_update"].relevant == ["b1-t2"]
    assert asks["multi_session_reasoning"].relevant == ["b1-t0", "b1-t2"]
    assert asks["abstention"].relevant == []
    assert "summarization" not in asks
