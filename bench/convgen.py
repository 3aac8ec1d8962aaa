"""A deterministic generator of long two-speaker conversations and the questions a
person asks about them later: the data of bench/quality.py (see bench/CONVGEN.md).

    python -m bench.convgen --dump            # writes bench/out/convgen-<split>.json
    python -m bench.convgen --stats           # counts per split

Each conversation is 15-30 dated sessions, ~250-350 turns, one fact per turn
("<Speaker>: <utterance>" at /conversations/<conv-id>/session-<n>). Speakers tell
event arcs (plan, event, follow-up) over several sessions among small talk and near
misses; the questions (single, multi, temporal, none) are built from the arcs, so
their evidence turns are known by construction. stdlib only, no network: the same
seed gives the same conversation in every process.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

from bench.convgen_topics import (
    CLOSINGS,
    GREETING_REPLIES,
    GREETINGS,
    NAMED,
    NAMES,
    REACTIONS,
    RELATIVES,
    REPLIES,
    SMALLTALK,
    SYMPATHY,
    TOPICS,
    Topic,
    worded,
)

# The splits. Tune on dev only; held is reported, never looked at while tuning.
SPLITS: dict[str, tuple[int, ...]] = {
    "dev": tuple(range(1, 7)),
    "held": tuple(range(101, 113)),
}
SMOKE_SEED = 9001  # one small conversation for `make test`
# Sessions and turns in a conversation, small talk filling it up to the turns: a small
# one has 5-6 sessions and 40-60 turns; a long one (`long`) about twice the turns of a
# usual one, the same number of arcs spread over more sessions and more small talk.
SESSIONS = (15, 30)
TURNS = (265, 335)
LONG_SESSIONS = (30, 40)
LONG_TURNS = (600, 700)
OUT = Path(__file__).parent / "out"
KINDS = ("single", "multi", "temporal", "none")
# The share of each kind among a conversation's questions.
SAD = frozenset({"health"})  # topics whose news gets sympathy, not congratulations
KIND_SHARE = {"single": 0.38, "multi": 0.2, "temporal": 0.27, "none": 0.15}
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


@dataclass
class Fact:
    id: str
    path: str
    content: str
    created_at: str  # ISO 8601, UTC
    speaker: str
    session: int


@dataclass
class Question:
    id: str
    kind: str
    text: str
    relevant: list[str]
    asked_at: str
    overlap: int = 0  # content words shared with the evidence (names, the named thing aside)
    names_thing: bool = False  # the question names what it asks about (the half marathon)


@dataclass
class Candidate:
    text: str
    relevant: list[str]
    overlap: int
    names_thing: bool


@dataclass
class Conversation:
    id: str
    seed: int
    speakers: list[str]
    sessions: list[str]  # each session's start, ISO 8601
    facts: list[Fact]
    questions: list[Question]


@dataclass
class Arc:
    topic: Topic
    owner: int  # 0 or 1
    value: str
    detail: str
    plan: int | None  # session indexes
    event: int
    follow: int | None
    turns: dict[str, str] = field(default_factory=dict)  # stage -> fact id


# --- words -----------------------------------------------------------------------------

STOP = frozenset(
    [
        "a",
        "about",
        "after",
        "again",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "been",
        "before",
        "being",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "done",
        "during",
        "each",
        "for",
        "from",
        "get",
        "gets",
        "getting",
        "got",
        "go",
        "goes",
        "going",
        "gone",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "hers",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "just",
        "like",
        "made",
        "make",
        "me",
        "more",
        "most",
        "my",
        "new",
        "no",
        "not",
        "now",
        "of",
        "off",
        "on",
        "one",
        "or",
        "our",
        "out",
        "over",
        "own",
        "really",
        "she",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "too",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "first",
        "last",
        "next",
        "week",
        "weeks",
        "month",
        "months",
        "year",
        "years",
        "day",
        "days",
        "time",
    ]
)
# "a" before a vowel sound, as the values are filled in ("a e-bike", not "a used car")
ARTICLE = re.compile(r"\b([Aa]) ([aeio]|u[nl])")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")


def stem(word: str) -> str:
    w = word.lower().removesuffix("'s")
    for suffix in ("ing", "ed", "es", "er", "ly"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            return w[: -len(suffix)]
    if w.endswith("s") and not w.endswith("ss") and len(w) > 3:
        return w[:-1]
    return w


def content_words(text: str, names: set[str]) -> set[str]:
    """The stems of a text's content words: no stop words, no names, no proper nouns
    (a word capitalised inside a sentence), which a person asking may well say."""
    out = set()
    for n, match in enumerate(_WORD.finditer(text)):
        word = match.group()
        if word in names or word.lower() in STOP:
            continue
        before = text[: match.start()].rstrip()
        inside = n > 0 and before and before[-1] not in ".!?:"
        if word[0].isupper() and inside:
            continue
        out.add(stem(word))
    return out


# --- time ------------------------------------------------------------------------------


def parse(iso: str) -> datetime:
    return datetime.fromisoformat(iso)


def month_window(d: datetime) -> tuple[datetime, datetime]:
    start = d.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = (start + timedelta(days=32)).replace(day=1)
    return start, end


def season(d: datetime) -> tuple[str, datetime, datetime]:
    """The meteorological season (northern hemisphere) holding d, with its window."""
    m = d.month
    if m in (12, 1, 2):
        year = d.year if m == 12 else d.year - 1
        start = datetime(year, 12, 1, tzinfo=UTC)
        return (
            f"the winter of {year}-{str(year + 1)[2:]}",
            start,
            datetime(year + 1, 3, 1, tzinfo=UTC),
        )
    name, first = {3: ("spring", 3), 6: ("summer", 6), 9: ("autumn", 9)}[m - (m - 3) % 3]
    start = datetime(d.year, first, 1, tzinfo=UTC)
    return f"the {name} of {d.year}", start, datetime(d.year, first + 3, 1, tzinfo=UTC)


def time_expressions(d: datetime, asked: datetime) -> list[tuple[str, datetime, datetime]]:
    """Ways to name when d was, each with the window it means, seen from `asked`."""
    out = []
    start, end = month_window(d)
    out.append((f" in {MONTHS[d.month - 1]} {d.year}", start, end))
    if d.year == asked.year:
        out.append((f" in {MONTHS[d.month - 1]}", start, end))
        out.append((" earlier this year", datetime(d.year, 1, 1, tzinfo=UTC), asked))
    last_start, last_end = month_window(month_window(asked)[0] - timedelta(days=1))
    if last_start <= d < last_end:
        out.append((" last month", last_start, last_end))
    if d.year == asked.year - 1:
        out.append(
            (
                " last year",
                datetime(d.year, 1, 1, tzinfo=UTC),
                datetime(asked.year, 1, 1, tzinfo=UTC),
            )
        )
    name, s_start, s_end = season(d)
    out.append((f" in {name}", s_start, s_end))
    half = "early" if d.day <= 10 else "late" if d.day >= 20 else None
    if half:
        lo = start if half == "early" else start + timedelta(days=19)
        hi = start + timedelta(days=10) if half == "early" else end
        out.append((f" in {half} {MONTHS[d.month - 1]} {d.year}", lo, hi))
    return out


# --- generation ------------------------------------------------------------------------


class Gen:
    def __init__(
        self, seed: int, *, small: bool = False, long: bool = False, worded: bool = False
    ) -> None:
        self.seed = seed
        self.rng = random.Random(f"embornal-convgen-{seed}")
        self.small = small
        self.long = long
        self.worded = worded
        self.id = f"conv-{seed:04d}"

    @property
    def sizes(self) -> tuple[tuple[int, int], tuple[int, int]]:
        return (LONG_SESSIONS, LONG_TURNS) if self.long else (SESSIONS, TURNS)

    def pick(self, options):  # type: ignore[no-untyped-def]
        return self.rng.choice(options)

    def build(self) -> Conversation:
        rng = self.rng
        (a, pa), (b, pb) = rng.sample(NAMES, 2)
        self.names = [a, b]
        self.pron = [pa, pb]
        n_sessions = rng.randint(5, 6) if self.small else rng.randint(*self.sizes[0])
        start = datetime(2025, 1, 6, tzinfo=UTC) + timedelta(days=rng.randint(0, 200))
        sessions = []
        at = start
        for _ in range(n_sessions):
            at = at.replace(hour=rng.randint(8, 20), minute=rng.choice((0, 10, 15, 30, 45)))
            sessions.append(at)
            at = at + timedelta(days=rng.randint(3, 21))
        self.sessions = sessions
        self.asked = sessions[-1] + timedelta(days=rng.randint(1, 14), hours=rng.randint(0, 8))
        self.arcs = self.plan_arcs(n_sessions)
        facts = self.write_turns()
        questions = self.questions(facts)
        return Conversation(
            id=self.id,
            seed=self.seed,
            speakers=self.names,
            sessions=[s.isoformat() for s in sessions],
            facts=facts,
            questions=questions,
        )

    # Arcs: which speaker tells what, in which sessions.
    def plan_arcs(self, n: int) -> list[Arc]:
        rng = self.rng
        topics = [worded(t) for t in TOPICS] if self.worded else TOPICS[:]
        rng.shuffle(topics)
        if self.small:
            shared, only = topics[:1], [topics[1:3], topics[3:5]]
        else:
            k_shared = rng.randint(3, 5)
            k_only = rng.randint(5, 7)
            shared = topics[:k_shared]
            rest = topics[k_shared:]
            only = [rest[:k_only], rest[k_only : 2 * k_only]]
        arcs: list[Arc] = []
        used: dict[str, set[str]] = {}
        for owner in (0, 1):
            for topic in shared + only[owner]:
                copies = rng.choice((2, 2, 3)) if topic.repeatable and not self.small else 1
                for _ in range(copies):
                    taken = used.setdefault(topic.key, set())
                    value = rng.choice([v for v in topic.values if v not in taken])
                    taken.add(value)
                    arcs.append(self.schedule(topic, owner, value, n, arcs))
        return arcs

    def schedule(self, topic: Topic, owner: int, value: str, n: int, arcs: list[Arc]) -> Arc:
        rng = self.rng
        # Two events of one speaker and topic fall in different sessions (and months
        # apart when there is room), so a time expression can tell them apart.
        busy = {x.event for x in arcs if x.owner == owner and x.topic.key == topic.key}
        choices = [s for s in range(1, n - 1) if all(abs(s - e) >= 2 for e in busy)]
        event = rng.choice(choices or list(range(1, n - 1)) or [0])
        plan = None
        if rng.random() < 0.7 and event > 0:
            plan = max(0, event - rng.randint(1, 3))
        follow = event + rng.randint(1, 4)
        return Arc(
            topic=topic,
            owner=owner,
            value=value,
            detail=rng.choice(topic.details),
            plan=plan,
            event=event,
            follow=follow if follow < n else None,
        )

    def fill(self, template: str, arc: Arc | None, speaker: int) -> str:
        rng = self.rng
        values: dict[str, str] = {"o": self.names[1 - speaker], "rel": rng.choice(RELATIVES)}
        if arc is not None:
            others = [v for v in arc.topic.values if v != arc.value]
            values.update(v=arc.value, d=arc.detail, v2=rng.choice(others))
        text = ARTICLE.sub(r"\1n \2", template.format(**values))
        return text[0].upper() + text[1:]

    def write_turns(self) -> list[Fact]:
        rng = self.rng
        per_session: list[list[tuple[Arc, str]]] = [[] for _ in self.sessions]
        for arc in self.arcs:
            if arc.plan is not None:
                per_session[arc.plan].append((arc, "plan"))
            per_session[arc.event].append((arc, "event"))
            if arc.follow is not None:
                per_session[arc.follow].append((arc, "follow"))
        Block = list[tuple[int, str, tuple[Arc, str] | None]]
        sessions_blocks: list[list[Block]] = []
        counts = Counter((arc.owner, arc.topic.key) for arc in self.arcs)
        for items in per_session:
            rng.shuffle(items)
            blocks: list[Block] = []
            for arc, stage in items:
                who = arc.owner
                templates = getattr(arc.topic, stage)
                if stage == "follow" and counts[(arc.owner, arc.topic.key)] > 1:
                    # Which of the speaker's races (trips, books...) the detail is about.
                    templates = NAMED.get(arc.topic.key, {}).get("follow", templates)
                template = rng.choice(templates)
                block: Block = [(who, self.fill(template, arc, who), (arc, stage))]
                if rng.random() < 0.85:
                    # The other speaker reacts, half the time in the topic's own words.
                    generic = SYMPATHY if arc.topic.key in SAD else REACTIONS
                    replies = REPLIES[arc.topic.key] if rng.random() < 0.5 else generic
                    block.append((1 - who, rng.choice(replies), None))
                if rng.random() < 0.3:
                    aside = self.fill(rng.choice(arc.topic.aside), arc, who)
                    block.append((who, aside, None))
                    if rng.random() < 0.5:
                        block.append((1 - who, rng.choice(REACTIONS), None))  # to the aside
                blocks.append(block)
            sessions_blocks.append(blocks)
        # Small talk fills the conversation up to its target length (4 turns a session
        # are greetings and goodbyes).
        core = sum(4 + sum(len(b) for b in blocks) for blocks in sessions_blocks)
        target = rng.randint(40, 60) if self.small else rng.randint(*self.sizes[1])
        said: list[set[int]] = [set() for _ in sessions_blocks]
        for _ in range(max(0, (target - core) // 2)):
            s = rng.randrange(len(sessions_blocks))
            fresh = [n for n in range(len(SMALLTALK)) if n not in said[s]]
            if not fresh:
                continue
            n = rng.choice(fresh)
            said[s].add(n)
            asker = rng.randrange(2)
            ask, answer = SMALLTALK[n]
            sessions_blocks[s].append([(asker, ask, None), (1 - asker, answer, None)])
        facts: list[Fact] = []
        for s, blocks in enumerate(sessions_blocks):
            at = self.sessions[s]
            turns: Block = []
            opener = rng.randrange(2)
            hour = at.hour
            daytime = "Morning" if hour < 12 else "Good afternoon" if hour < 17 else "Evening"
            greeting = rng.choice((*GREETINGS, daytime + " {o}!"))
            turns.append((opener, self.fill(greeting, None, opener), None))
            turns.append((1 - opener, rng.choice(GREETING_REPLIES), None))
            rng.shuffle(blocks)
            for block in blocks:
                turns.extend(block)
            closer = rng.randrange(2)
            bye, reply = rng.choice(CLOSINGS)
            turns.append((closer, bye, None))
            turns.append((1 - closer, reply, None))
            for who, text, stage in turns:
                fid = f"{self.id}-t{len(facts):03d}"
                facts.append(
                    Fact(
                        id=fid,
                        path=f"/conversations/{self.id}/session-{s + 1}",
                        content=f"{self.names[who]}: {text}",
                        created_at=at.isoformat(),
                        speaker=self.names[who],
                        session=s + 1,
                    )
                )
                if stage is not None:
                    stage[0].turns[stage[1]] = fid
                at = at + timedelta(minutes=rng.randint(1, 4))
        self.facts = {f.id: f for f in facts}
        return facts

    # --- questions ---------------------------------------------------------------------

    def qfill(
        self, template: str, owner: int, arc: Arc | None = None, *, cap: bool = True, **more: str
    ) -> str:
        name = self.names[owner]
        values = {
            "S": name,
            "Ss": f"{name}'s",
            "Pp": {"she": "her", "he": "his"}[self.pron[owner]],
            "A": self.names[0],
            "B": self.names[1],
            "time": "",
        }
        if arc is not None:
            values["v"] = arc.value
        values.update(more)
        text = template.format(**values)
        return text[0].upper() + text[1:] if cap else text

    def pronouns(self, owner: int) -> dict[str, str]:
        """{S} and {Ss} as pronouns, for a second mention of the speaker."""
        pron = self.pron[owner]
        return {"S": pron, "Ss": {"she": "her", "he": "his"}[pron]}

    def overlap(self, text: str, evidence: list[str], named: str = "") -> int:
        """Content words the question shares with its evidence turns, leaving out
        names and the words of the thing the question names on purpose (`named`)."""
        names = set(self.names)
        asked = content_words(text, names) - content_words(named, names)
        said: set[str] = set()
        for fid in evidence:
            said |= content_words(self.facts[fid].content.split(": ", 1)[1], names)
        return len(asked & said)

    def phrasings(self, templates: tuple[str, ...], topic: Topic, stage: str) -> tuple[str, ...]:
        """The templates to phrase a `when` or `detail` question (or an anchor) with:
        half the time those that name the thing (NAMED), else the paraphrases. A
        proper-noun topic (a city, a title) is always named, as a person would."""
        named = NAMED.get(topic.key, {}).get(stage, ())
        # Asked in the turns' words, a question names the thing where it can.
        if named and (self.rng.random() < 0.5 or self.worded):
            return named
        return templates

    def at(self, arc: Arc, stage: str = "event") -> datetime:
        return parse(self.facts[arc.turns[stage]].created_at)

    def candidates(self) -> dict[str, list[Candidate]]:
        rng = self.rng
        out: dict[str, list[Candidate]] = {k: [] for k in KINDS}
        arcs = self.arcs
        by_owner_topic: dict[tuple[int, str], list[Arc]] = {}
        for arc in arcs:
            by_owner_topic.setdefault((arc.owner, arc.topic.key), []).append(arc)

        def add(kind: str, texts: list[str], evidence: list[str], arc: Arc | None = None) -> None:
            """Keep, among the phrasings, one sharing the fewest content words with the
            evidence (none, most of the time): a person asking later rarely repeats
            the words that were said. A phrasing that names the arc's thing says so."""
            value = arc.value if arc is not None else ""
            scored = []
            for text in texts:
                named = bool(value) and value in text
                scored.append((self.overlap(text, evidence, value if named else ""), named, text))
            # Asked in the turns' words: the phrasing that shares the most.
            best = (max if self.worded else min)(s for s, _, _ in scored)
            shared, named, text = rng.choice([c for c in scored if c[0] == best])
            out[kind].append(Candidate(text, evidence, shared, named))

        for arc in arcs:
            t = arc.topic
            same = by_owner_topic[(arc.owner, t.key)]
            ev = arc.turns["event"]
            q = partial(self.qfill, owner=arc.owner, arc=arc)
            # single: what happened (only when the speaker had one of this topic)
            if len(same) == 1:
                add("single", [q(x) for x in t.q_what], [ev], arc)
            # single: the detail told in the follow-up (the thing named if ambiguous)
            if "follow" in arc.turns:
                pool = self.phrasings(t.q_detail, t, "detail")
                if len(same) > 1 and not t.proper:
                    pool = NAMED.get(t.key, {}).get("detail", ())
                if pool:
                    add("single", [q(x) for x in pool], [arc.turns["follow"]], arc)
            # temporal: when it happened
            pool = self.phrasings(t.q_when, t, "when")
            if len(same) > 1 and not t.proper:
                pool = NAMED.get(t.key, {}).get("when", ())
            if pool:
                add("temporal", [q(x) for x in pool], [ev], arc)
            # temporal: what happened within a named time (one that only it fits)
            when = self.at(arc)
            others = [self.at(x) for x in same if x is not arc]
            exprs = [
                e
                for e in time_expressions(when, self.asked)
                if not any(e[1] <= o < e[2] for o in others)
            ]
            if exprs:
                expr = rng.choice(exprs)[0]
                add("temporal", [q(x, time=expr) for x in t.q_what], [ev], arc)
            # temporal: what the speaker did in the weeks before / after this event
            self.before_after(arc, add)
        for (owner, key), same in by_owner_topic.items():
            topic = same[0].topic
            if len(same) >= 2 and topic.q_list:
                add(
                    "multi",
                    [self.qfill(x, owner) for x in topic.q_list],
                    [x.turns["event"] for x in same],
                )
            partner = by_owner_topic.get((1 - owner, key))
            if owner == 0 and partner and len(same) == 1 and len(partner) == 1:
                add(
                    "multi",
                    [self.qfill(x, owner) for x in topic.q_both],
                    [same[0].turns["event"], partner[0].turns["event"]],
                )
        # multi: two arcs of one speaker in one question
        singles = [x for x in arcs if len(by_owner_topic[(x.owner, x.topic.key)]) == 1]
        rng.shuffle(singles)
        for first, second in zip(singles[::2], singles[1::2], strict=False):
            if first.owner != second.owner:
                continue
            texts = []
            for q1 in first.topic.q_what:
                for q2 in second.topic.q_what:
                    one = self.qfill(q1, first.owner, first).rstrip("?")
                    two = self.qfill(
                        q2, second.owner, second, cap=False, **self.pronouns(second.owner)
                    )
                    texts.append(f"{one}, and {two[0].lower()}{two[1:]}")
            add("multi", texts, [first.turns["event"], second.turns["event"]])
        # none: a topic only the other speaker had (asked in the paraphrase, or naming
        # the other speaker's thing); a month in which the speaker had no such event
        for key in sorted({x.topic.key for x in arcs}):  # sorted: set order varies by process
            for owner in (0, 1):
                if (owner, key) in by_owner_topic:
                    continue
                source = by_owner_topic[(1 - owner, key)][0]
                topic = source.topic
                pool = topic.q_what
                if rng.random() < 0.5:
                    named = NAMED.get(key, {}).get("when", ())
                    pool = named or (topic.q_when if topic.proper else topic.q_what)
                texts = [self.qfill(x, owner, source) for x in pool]
                out["none"].append(Candidate(rng.choice(texts), [], 0, "{v}" in pool[0]))
        for same in by_owner_topic.values():
            owner, topic = same[0].owner, same[0].topic
            taken = [self.at(x) for x in same]
            months = sorted({(s.year, s.month) for s in self.sessions})
            free = [
                (y, m) for y, m in months if not any((d.year, d.month) == (y, m) for d in taken)
            ]
            if free:
                y, m = rng.choice(free)
                expr = f" in {MONTHS[m - 1]} {y}"
                texts = [self.qfill(x, owner, same[0], time=expr) for x in topic.q_what]
                out["none"].append(Candidate(rng.choice(texts), [], 0, False))
        return out

    def before_after(self, anchor: Arc, add: Callable[..., None]) -> None:
        """'What did S do in the two weeks before <anchor>?': the speaker's events in
        that window (when there are one or two, none in the anchor's own session)."""
        rng = self.rng
        when = self.at(anchor)
        span_days, span = rng.choice(((14, "two weeks"), (21, "three weeks"), (31, "month")))
        direction = rng.choice(("before", "after"))
        if direction == "before":
            lo, hi = when - timedelta(days=span_days), when
        else:
            lo, hi = when, when + timedelta(days=span_days)
        inside = [
            x
            for x in self.arcs
            if x.owner == anchor.owner
            and x is not anchor
            and x.event != anchor.event
            and lo <= self.at(x) <= hi
        ]
        if not 1 <= len(inside) <= 2:
            return
        owner = anchor.owner
        template = rng.choice(self.phrasings(anchor.topic.anchor, anchor.topic, "anchor"))
        first = self.qfill(template, owner, anchor, cap=False)  # names the speaker
        second = self.qfill(template, owner, anchor, cap=False, **self.pronouns(owner))
        S, P = self.names[owner], self.pron[owner]
        texts = [
            f"What did {S} get up to in the {span} {direction} {second}?",
            f"What else happened to {S} in the {span} {direction} {second}?",
            f"In the {span} {direction} {first}, what did {P} do?",
        ]
        add("temporal", texts, [x.turns["event"] for x in inside], anchor)

    def questions(self, facts: list[Fact]) -> list[Question]:
        rng = self.rng
        pool = self.candidates()
        total = rng.randint(6, 8) if self.small else rng.randint(44, 50)
        wants = {k: int(KIND_SHARE[k] * total) for k in KINDS}
        for k in sorted(KINDS, key=lambda k: KIND_SHARE[k] * total % 1, reverse=True):
            if sum(wants.values()) < total:
                wants[k] += 1
        chosen: list[tuple[str, Candidate]] = []
        seen: set[str] = set()
        for kind in KINDS:
            items = pool[kind][:]
            rng.shuffle(items)
            taken = 0
            for item in items:
                # No two questions with the same text.
                if taken >= max(1, wants[kind]) or item.text in seen:
                    continue
                seen.add(item.text)
                chosen.append((kind, item))
                taken += 1
        asked = self.asked.isoformat()
        return [
            Question(
                id=f"{self.id}-q{n:02d}",
                kind=kind,
                text=c.text,
                relevant=c.relevant,
                asked_at=asked,
                overlap=c.overlap,
                names_thing=c.names_thing,
            )
            for n, (kind, c) in enumerate(chosen)
        ]


def conversation(
    seed: int, *, small: bool = False, long: bool = False, worded: bool = False
) -> Conversation:
    return Gen(seed, small=small, long=long, worded=worded).build()


def split(name: str, *, long: bool = False, worded: bool = False) -> list[Conversation]:
    """The conversations of a split; with `long`, the same seeds as long conversations
    (other conversations, the same speakers and topics drawn); with `worded`, the same
    conversations asked in the words that were said (see WORDED in CONVGEN.md)."""
    if name == "smoke":
        return [conversation(SMOKE_SEED, small=True, worded=worded)]
    return [conversation(seed, long=long, worded=worded) for seed in SPLITS[name]]


def label(name: str, *, long: bool = False, worded: bool = False) -> str:
    """A view's name: the split, then -long and -worded when asked."""
    return name + ("-long" if long else "") + ("-worded" if worded else "")


def stats(convs: list[Conversation]) -> dict[str, object]:
    questions = [q for c in convs for q in c.questions]
    return {
        "conversations": len(convs),
        "facts": sum(len(c.facts) for c in convs),
        "sessions": sum(len(c.sessions) for c in convs),
        "speakers": len({s for c in convs for s in c.speakers}),
        "questions": len(questions),
        "per_kind": {k: sum(q.kind == k for q in questions) for k in KINDS},
        "names_thing_share": round(
            sum(q.names_thing for q in questions) / max(1, len(questions)), 3
        ),
        "zero_overlap_share": round(
            sum(q.overlap == 0 for q in questions) / max(1, len(questions)), 3
        ),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dump", action="store_true", help="write bench/out/convgen-*.json")
    parser.add_argument("--split", choices=(*SPLITS, "smoke"), action="append")
    parser.add_argument("--long", action="store_true", help="the long conversations")
    parser.add_argument("--worded", action="store_true", help="questions in the turns' words")
    args = parser.parse_args(argv)
    for name in args.split or list(SPLITS):
        convs = split(name, long=args.long, worded=args.worded)
        view = label(name, long=args.long, worded=args.worded)
        print(view, json.dumps(stats(convs)))
        if args.dump:
            OUT.mkdir(exist_ok=True)
            target = OUT / f"convgen-{view}.json"
            target.write_text(json.dumps([asdict(c) for c in convs], indent=1), encoding="utf-8")
            print(f"wrote {target}")


if __name__ == "__main__":
    main()
