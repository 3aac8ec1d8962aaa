"""The quality bench's development data, three shapes, each split into dev and held.

    python -m bench.datasets [--beam PATH]      # counts per shape and split

- `chats`: bench/convgen.py's generated two-speaker conversations, one fact per turn
  (and `chats-worded`, the same conversations asked in the words that were said).
- `beam`: BEAM's probing questions over its 100K-token conversations (github
  mohammadtavakoli78/BEAM, the paper "Beyond a Million Tokens"), one fact per turn,
  evidence by turn id. Its text is read where it was fetched (`--beam` or
  EMBORNAL_BEAM: a clone, or a bare git directory), never committed here: the
  repository carries no licence file, so we use it as published benchmark data and
  redistribute none of it. Chats 1-10 are dev, 11-20 held.
- `notes`: bench/notes/, written here by hand: eight people's notes memories (small
  standalone facts under a path tree, with supersedes and deletes) and the questions
  each asks weeks later; four people are dev, four held.

Every other public long-conversation benchmark is kept for checks from outside: none is
read here. Tune on dev only; held is reported, never looked at while deciding.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench import convgen

SHAPES = ("chats", "chats-worded", "beam", "notes")
NOTES = Path(__file__).parent / "notes"
# Decided before any question was read: the first four files in name order are dev.
NOTES_DEV_COUNT = 4
BEAM_SPLITS = {"dev": tuple(range(1, 11)), "held": tuple(range(11, 21)), "smoke": (1,)}
# BEAM's question kinds whose evidence is a few turns; a summary's evidence is the
# whole project (up to a dozen turns), which no page of ten answers.
BEAM_KINDS = (
    "information_extraction",
    "knowledge_update",
    "multi_session_reasoning",
    "temporal_reasoning",
    "event_ordering",
    "contradiction_resolution",
    "preference_following",
    "instruction_following",
)
CONTENT_CHARS = 4000  # the memory's default content limit


@dataclass
class Item:
    """A fact to store at `created_at`; superseding `supersedes`, deleted at `deleted_at`."""

    id: str
    path: str
    content: str
    created_at: str
    supersedes: str | None = None
    deleted_at: str | None = None
    tags: dict[str, str] = field(default_factory=dict)


@dataclass
class Ask:
    """A question asked at `asked_at`; `relevant` are the items that answer it (none: [])."""

    id: str
    kind: str
    text: str
    relevant: list[str]
    asked_at: str


@dataclass
class Corpus:
    """One memory: its facts and the questions asked of it."""

    id: str
    shape: str
    facts: list[Item]
    questions: list[Ask]


def no_answer(kind: str) -> bool:
    return kind in ("none", "abstention")


# --- chats (bench/convgen.py) ---------------------------------------------------------


def chats(split: str, *, worded: bool = False) -> list[Corpus]:
    shape = "chats-worded" if worded else "chats"
    out = []
    for conv in convgen.split(split, worded=worded):
        facts = [Item(f.id, f.path, f.content, f.created_at) for f in conv.facts]
        asks = [Ask(q.id, q.kind, q.text, list(q.relevant), q.asked_at) for q in conv.questions]
        out.append(Corpus(conv.id, shape, facts, asks))
    return out


# --- BEAM -------------------------------------------------------------------------------


def beam_root(given: str | None = None) -> Path | None:
    value = given or os.environ.get("EMBORNAL_BEAM")
    return Path(value) if value else None


def _reader(root: Path):  # type: ignore[no-untyped-def]
    if (root / "chats").is_dir():
        return lambda rel: (root / rel).read_text(encoding="utf-8")
    git = ["git", f"--git-dir={root}", "show"]
    return lambda rel: (
        subprocess.run([*git, f"HEAD:{rel}"], check=True, capture_output=True, text=True).stdout
    )


_MARK = re.compile(r"\s*->->\s*[\d,\s]+$")


def _anchor(text: str) -> datetime:
    return datetime.strptime(text, "%B-%d-%Y").replace(hour=9, tzinfo=UTC)


def _turn_ids(source: object) -> list[int]:
    """Turn ids in a question's source_chat_ids: a list, a dict of lists, nested."""
    if isinstance(source, dict):
        return [i for part in source.values() for i in _turn_ids(part)]
    if isinstance(source, list):
        return [i for part in source for i in _turn_ids(part)]
    return [int(source)] if isinstance(source, int | str) and str(source).isdigit() else []


def _beam_chat(read, number: int) -> Corpus:  # type: ignore[no-untyped-def]
    chat = json.loads(read(f"chats/100K/{number}/chat.json"))
    probing = json.loads(read(f"chats/100K/{number}/probing_questions/probing_questions.json"))
    anchors = []
    for batch in chat:
        named = [t["time_anchor"] for s in batch["turns"] for t in s if t.get("time_anchor")]
        anchors.append(_anchor(named[0]) if named else None)
    facts: list[Item] = []
    for b, batch in enumerate(chat):
        start = anchors[b] or (anchors[b - 1] + timedelta(days=14))  # type: ignore[operator]
        nxt = anchors[b + 1] if b + 1 < len(anchors) and anchors[b + 1] else None
        span = (nxt - start) if nxt and nxt > start else timedelta(days=20)
        sessions = batch["turns"]
        for s, session in enumerate(sessions):
            day = start + span * s / max(len(sessions), 1)
            for t, turn in enumerate(session):
                text = _MARK.sub("", turn["content"]).strip()
                speaker = "User" if turn["role"] == "user" else "Assistant"
                content = f"{speaker}: {text}"[:CONTENT_CHARS]
                created = (day + timedelta(minutes=t)).isoformat()
                facts.append(Item(f"b{number}-t{turn['id']}", f"/beam/{number}/batch-{b + 1}",
                                  content, created))  # fmt: skip
    asked = max(datetime.fromisoformat(f.created_at) for f in facts) + timedelta(days=1)
    known = {f.id for f in facts}
    asks: list[Ask] = []
    for kind in (*BEAM_KINDS, "abstention"):
        for i, q in enumerate(probing.get(kind, [])):
            source = q.get("source_chat_ids")
            if kind == "knowledge_update" and isinstance(source, dict):
                source = source.get("updated_info", [])  # the current value answers it
            ids = _turn_ids(source)
            relevant = [f"b{number}-t{x}" for x in dict.fromkeys(ids)]
            relevant = [r for r in relevant if r in known]
            if kind != "abstention" and not relevant:
                continue
            asks.append(Ask(f"b{number}-{kind}-{i}", kind, q["question"], relevant,
                            asked.isoformat()))  # fmt: skip
    return Corpus(f"beam-{number}", "beam", facts, asks)


def beam(split: str, root: Path | None) -> list[Corpus]:
    if root is None:
        raise SystemExit(
            "BEAM's data is read where it was fetched: give --beam PATH or EMBORNAL_BEAM "
            "(a clone or git directory of github.com/mohammadtavakoli78/BEAM)"
        )
    read = _reader(root)
    return [_beam_chat(read, n) for n in BEAM_SPLITS[split]]


# --- notes (bench/notes/) -----------------------------------------------------------------


def notes(split: str) -> list[Corpus]:
    files = sorted(NOTES.glob("*.json"))
    if split == "smoke":
        files = files[:1]
    else:
        files = files[:NOTES_DEV_COUNT] if split == "dev" else files[NOTES_DEV_COUNT:]
    out = []
    for file in files:
        data = json.loads(file.read_text(encoding="utf-8"))
        facts = [
            Item(
                f["id"],
                f["path"],
                f["content"],
                f["created_at"],
                f.get("supersedes"),
                f.get("deleted_at"),
                f.get("tags", {}),
            )
            for f in data["facts"]
        ]
        asks = [
            Ask(q["id"], q["kind"], q["text"], list(q["relevant"]), data["asked_at"])
            for q in data["questions"]
        ]
        out.append(Corpus(data["person"], "notes", facts, asks))
    return out


def load(shape: str, split: str, *, beam_path: Path | None = None) -> list[Corpus]:
    """Every memory of one shape and split ("dev", "held", or "smoke": one small one)."""
    if shape in ("chats", "chats-worded"):
        return chats(split, worded=shape == "chats-worded")
    if shape == "beam":
        return beam(split, beam_path)
    if shape == "notes":
        return notes(split)
    raise ValueError(f"unknown shape {shape!r}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--beam", help="where BEAM was fetched (else EMBORNAL_BEAM)")
    args = parser.parse_args(argv)
    root = beam_root(args.beam)
    for shape in SHAPES:
        if shape == "beam" and root is None:
            print("beam: not fetched (--beam PATH)")
            continue
        for split in ("dev", "held"):
            corpora = load(shape, split, beam_path=root)
            kinds = Counter(q.kind for c in corpora for q in c.questions)
            facts = sum(len(c.facts) for c in corpora)
            print(f"{shape} {split}: {len(corpora)} memories, {facts} facts, "
                  f"{sum(kinds.values())} questions {dict(sorted(kinds.items()))}")  # fmt: skip


if __name__ == "__main__":
    main()
