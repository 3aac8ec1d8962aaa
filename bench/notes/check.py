#!/usr/bin/env python3
"""Validate the hand-written notes-memory evaluation files in this folder.

Usage: python3 check.py [file.json ...]   (default: every *.json next to this script)

Exit status 0 when every file passes; errors are printed per file.
Standard library only.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

KINDS = ("paraphrase", "keyword", "current", "temporal", "multi", "none")
# Target share of each kind and the band we accept around it (min, max) per file.
KIND_BANDS = {
    "paraphrase": (0.22, 0.38),
    "keyword": (0.14, 0.26),
    "current": (0.09, 0.21),
    "temporal": (0.09, 0.21),
    "multi": (0.05, 0.13),
    "none": (0.08, 0.17),
}
TOP_KEYS = {"person", "about", "asked_at", "facts", "questions"}
FACT_KEYS = {"id", "path", "content", "created_at", "supersedes", "deleted_at", "tags"}
FACT_REQUIRED = {"id", "path", "content", "created_at"}
QUESTION_KEYS = {"id", "text", "kind", "relevant"}

PERSON_RE = re.compile(r"^[a-z][a-z0-9]*$")
PATH_RE = re.compile(r"^(/[a-z0-9][a-z0-9._-]*){1,4}$")
TAG_RE = re.compile(r"^[a-z0-9._-]+$")
DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")

MONTHS = {
    m: i + 1
    for i, m in enumerate(
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ]
    )
}

# Function words and generic question words; they never count as shared content words.
STOP = set(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "from",
        "by",
        "with",
        "about",
        "as",
        "into",
        "onto",
        "over",
        "under",
        "off",
        "out",
        "up",
        "down",
        "after",
        "before",
        "between",
        "during",
        "while",
        "since",
        "until",
        "per",
        "via",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "do",
        "does",
        "did",
        "done",
        "doing",
        "have",
        "has",
        "had",
        "having",
        "i",
        "me",
        "my",
        "mine",
        "myself",
        "we",
        "us",
        "our",
        "ours",
        "you",
        "your",
        "yours",
        "he",
        "him",
        "his",
        "she",
        "her",
        "they",
        "them",
        "their",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "there",
        "here",
        "if",
        "then",
        "than",
        "so",
        "not",
        "no",
        "yes",
        "can",
        "could",
        "should",
        "would",
        "will",
        "shall",
        "might",
        "must",
        "any",
        "anything",
        "some",
        "each",
        "every",
        "again",
        "still",
        "now",
        "just",
        "only",
        "also",
        "too",
        "very",
        "even",
        "ever",
        "yet",
        "get",
        "gets",
        "got",
        "go",
        "goes",
        "going",
        "went",
        "s",
        "t",
        "d",
        "ll",
        "m",
        "re",
        "ve",
        "im",
        "ive",
        "dont",
        "isnt",
        "wasnt",
        "didnt",
        "thing",
        "things",
        "stuff",
        "much",
        "many",
        "more",
        "most",
        "lot",
        "really",
        "like",
        "let",
        "use",
        "used",
        "using",
        "whats",
        "whos",
        "hows",
        "wheres",
        "whens",
        "thats",
        "theres",
    ]
)


def tokens(text: str) -> list[str]:
    """Lowercase word tokens (unicode letters and digits), crude plural stripping."""
    out = []
    for tok in re.findall(r"[^\W_]+", text.lower()):
        if len(tok) > 3 and tok.endswith("s") and not tok.endswith("ss"):
            tok = tok[:-1]
        out.append(tok)
    return out


def content_words(text: str) -> set[str]:
    return {t for t in tokens(text) if t not in STOP and len(t) >= 2}


def parse_date(value: object, where: str, errors: list[str]) -> datetime | None:
    if not isinstance(value, str) or not DATE_RE.match(value):
        errors.append(f"{where}: date {value!r} is not ISO 8601 YYYY-MM-DDTHH:MM:SSZ")
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        errors.append(f"{where}: date {value!r} is not a real date")
        return None


def month_span(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def temporal_span(text: str, asked: datetime) -> tuple[str, datetime, datetime] | None:
    """The time span a temporal question names, when it names one we can compute."""
    low = text.lower()
    if "last month" in low:
        y, m = (asked.year, asked.month - 1) if asked.month > 1 else (asked.year - 1, 12)
        return ("last month", *month_span(y, m))
    if "this month" in low:
        return ("this month", *month_span(asked.year, asked.month))
    if "last week" in low:
        monday = (asked - timedelta(days=asked.weekday())).replace(hour=0, minute=0, second=0)
        return ("last week", monday - timedelta(days=7), monday)
    named = [MONTHS[t] for t in re.findall(r"[a-z]+", low) if t in MONTHS]
    if len(set(named)) == 1:
        m = named[0]
        y = asked.year if m <= asked.month else asked.year - 1
        return (f"month {m:02d}", *month_span(y, m))
    return None


def check_file(path: Path) -> tuple[list[str], list[str], dict]:
    errors: list[str] = []
    warnings: list[str] = []
    stats: dict = {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        return [f"cannot parse: {exc}"], warnings, stats

    if not isinstance(data, dict) or set(data) != TOP_KEYS:
        errors.append(f"top-level keys must be exactly {sorted(TOP_KEYS)}")
        return errors, warnings, stats
    person = data["person"]
    if not isinstance(person, str) or not PERSON_RE.match(person):
        errors.append(f"person {person!r} must be lowercase ascii")
    if path.stem != person:
        errors.append(f"file name {path.name} does not match person {person!r}")
    if not isinstance(data["about"], str) or not data["about"].strip() or "\n" in data["about"]:
        errors.append("about must be one non-empty line")
    asked = parse_date(data["asked_at"], "asked_at", errors)
    facts = data["facts"]
    questions = data["questions"]
    if not isinstance(facts, list) or not isinstance(questions, list):
        errors.append("facts and questions must be lists")
        return errors, warnings, stats

    # ---- facts -------------------------------------------------------------
    by_id: dict[str, dict] = {}
    created: dict[str, datetime] = {}
    order: list[str] = []
    for i, f in enumerate(facts):
        where = f"fact #{i + 1}"
        if not isinstance(f, dict):
            errors.append(f"{where}: not an object")
            continue
        extra = set(f) - FACT_KEYS
        missing = FACT_REQUIRED - set(f)
        if extra or missing:
            errors.append(f"{where}: unexpected keys {sorted(extra)} / missing {sorted(missing)}")
            continue
        fid = f["id"]
        where = f"fact {fid}"
        if not isinstance(fid, str) or not re.fullmatch(rf"{re.escape(str(person))}-\d{{3}}", fid):
            errors.append(f"{where}: id must be '{person}-NNN'")
        if fid in by_id:
            errors.append(f"{where}: duplicate id")
        by_id[fid] = f
        order.append(fid)
        if not isinstance(f["path"], str) or not PATH_RE.match(f["path"]):
            errors.append(f"{where}: bad path {f['path']!r}")
        content = f["content"]
        if not isinstance(content, str):
            errors.append(f"{where}: content must be a string")
        else:
            n = len(content.split())
            if not 5 <= n <= 40:
                errors.append(f"{where}: content has {n} words (5-40)")
            if re.search(r"\buser (said|says|told|mentioned)\b", content, re.I):
                errors.append(f"{where}: content reads like a transcript")
        c = parse_date(f["created_at"], where, errors)
        if c:
            created[fid] = c
            if asked and c >= asked:
                errors.append(f"{where}: created_at is not before asked_at")
        if "deleted_at" in f:
            d = parse_date(f["deleted_at"], where + " deleted_at", errors)
            if d and c and not c < d:
                errors.append(f"{where}: deleted_at must be after created_at")
            if d and asked and not d < asked:
                errors.append(f"{where}: deleted_at must be before asked_at")
        if "tags" in f:
            tags = f["tags"]
            if not isinstance(tags, dict) or not tags:
                errors.append(f"{where}: tags must be a non-empty object")
            else:
                for k, v in tags.items():
                    if not (
                        isinstance(k, str)
                        and TAG_RE.match(k)
                        and isinstance(v, str)
                        and TAG_RE.match(v)
                    ):
                        errors.append(f"{where}: bad tag {k!r}={v!r}")
                    if k == "owner":
                        errors.append(f"{where}: tag key 'owner' is reserved")

    # ids and dates in order (roughly: we ask for non-decreasing dates along ids)
    if order != sorted(order):
        errors.append("fact ids are not in ascending order in the list")
    dated = [created[i] for i in sorted(order) if i in created]
    backwards = sum(1 for a, b in itertools.pairwise(dated) if b < a)
    if backwards:
        warnings.append(f"{backwards} fact(s) dated earlier than the fact before them")
    if asked and dated:
        span_start = (asked - min(dated)).days
        if not 118 <= span_start <= 246:
            errors.append(f"earliest fact is {span_start} days before asked_at (want 4-8 months)")

    # supersedes and deletes
    superseded_by: dict[str, str] = {}
    for fid, f in by_id.items():
        target = f.get("supersedes")
        if target is None:
            continue
        if target not in by_id:
            errors.append(f"fact {fid}: supersedes unknown {target!r}")
            continue
        if target == fid:
            errors.append(f"fact {fid}: supersedes itself")
        if target in superseded_by:
            errors.append(f"fact {target} is superseded twice ({superseded_by[target]}, {fid})")
        superseded_by[target] = fid
        if fid in created and target in created and not created[target] < created[fid]:
            errors.append(f"fact {fid}: supersedes a fact that is not older ({target})")
        if "deleted_at" in f:
            errors.append(f"fact {fid}: a superseding fact should not be deleted")
        if "deleted_at" in by_id[target]:
            errors.append(f"fact {target}: a superseded fact should not also be deleted")
    deleted = {fid for fid, f in by_id.items() if "deleted_at" in f}
    current = {fid for fid in by_id if fid not in deleted and fid not in superseded_by}
    n_sup = len(superseded_by)
    if not 55 <= len(facts) <= 65:
        errors.append(f"{len(facts)} facts (want 55-65)")
    if not 4 <= n_sup <= 8:
        errors.append(f"{n_sup} supersedes (want 4-8)")
    if not 2 <= len(deleted) <= 4:
        errors.append(f"{len(deleted)} deleted facts (want 2-4)")

    paths = Counter(f["path"] for f in by_id.values() if isinstance(f.get("path"), str))
    singles = sum(1 for c in paths.values() if c == 1)
    if singles > len(paths) // 3:
        warnings.append(f"{singles} of {len(paths)} paths hold a single fact")

    # ---- questions ---------------------------------------------------------
    kinds: Counter = Counter()
    seen_q: set[str] = set()
    answered: set[str] = set()
    for i, q in enumerate(questions):
        where = f"question #{i + 1}"
        if not isinstance(q, dict) or set(q) != QUESTION_KEYS:
            errors.append(f"{where}: keys must be exactly {sorted(QUESTION_KEYS)}")
            continue
        qid, text, kind, rel = q["id"], q["text"], q["kind"], q["relevant"]
        where = f"question {qid}"
        if not isinstance(qid, str) or not re.fullmatch(rf"{re.escape(str(person))}-q\d{{2}}", qid):
            errors.append(f"{where}: id must be '{person}-qNN'")
        if qid in seen_q:
            errors.append(f"{where}: duplicate id")
        seen_q.add(qid)
        if kind not in KINDS:
            errors.append(f"{where}: unknown kind {kind!r}")
            continue
        kinds[kind] += 1
        if not isinstance(text, str) or not text.strip():
            errors.append(f"{where}: empty text")
            continue
        if not isinstance(rel, list) or len(set(rel)) != len(rel):
            errors.append(f"{where}: relevant must be a list of distinct ids")
            continue
        for r in rel:
            if r not in by_id:
                errors.append(f"{where}: relevant {r!r} does not exist")
            elif r in deleted:
                errors.append(f"{where}: relevant {r} is deleted")
            elif r in superseded_by:
                errors.append(f"{where}: relevant {r} is superseded by {superseded_by[r]}")
        answered.update(rel)
        rel_ok = [r for r in rel if r in current]

        if kind == "none" and rel:
            errors.append(f"{where}: a 'none' question must have no relevant facts")
        if kind != "none" and not rel:
            errors.append(f"{where}: a '{kind}' question needs relevant facts")
        if kind == "multi" and len(rel) < 2:
            errors.append(f"{where}: a 'multi' question needs 2+ relevant facts")
        if kind == "current" and not any("supersedes" in by_id[r] for r in rel_ok):
            errors.append(
                f"{where}: a 'current' question must point at the head of a supersede chain"
            )

        # never a copy of a fact
        qwords = set(tokens(text))
        for fid, f in by_id.items():
            fwords = set(tokens(f["content"]))
            norm_q = " ".join(tokens(text))
            if norm_q and norm_q in " ".join(tokens(f["content"])) and len(qwords) > 4:
                errors.append(f"{where}: text is a copy of part of fact {fid}")
            union = qwords | fwords
            if union and len(qwords & fwords) / len(union) > 0.6:
                errors.append(f"{where}: text is nearly the sentence of fact {fid}")

        qcw = content_words(text)
        if kind == "paraphrase":
            for r in rel_ok:
                shared = qcw & content_words(by_id[r]["content"])
                if len(shared) > 1:
                    errors.append(
                        f"{where}: paraphrase shares {sorted(shared)} with {r} (max 1 content word)"
                    )
        if kind == "keyword":
            if not any(qcw & content_words(by_id[r]["content"]) for r in rel_ok):
                errors.append(f"{where}: keyword question shares no key word with its facts")
            if len(text.split()) > 6:
                warnings.append(f"{where}: keyword query is long ({len(text.split())} words)")
        if kind == "temporal" and asked:
            span = temporal_span(text, asked)
            if span is None:
                warnings.append(f"{where}: temporal span not machine-checkable, verified by hand")
            else:
                label, start, end = span
                for r in rel_ok:
                    if r in created and not start <= created[r] < end:
                        errors.append(
                            f"{where}: {r} created {created[r]:%Y-%m-%d}, outside {label}"
                        )

    nq = len(questions)
    if not 40 <= nq <= 50:
        errors.append(f"{nq} questions (want 40-50)")
    for kind, (lo, hi) in KIND_BANDS.items():
        share = kinds[kind] / nq if nq else 0
        if not lo <= share <= hi:
            errors.append(f"kind {kind}: {kinds[kind]}/{nq} = {share:.0%} (want {lo:.0%}-{hi:.0%})")

    stats = {
        "facts": len(facts),
        "supersedes": n_sup,
        "deleted": len(deleted),
        "current_facts": len(current),
        "paths": len(paths),
        "questions": nq,
        "kinds": {k: kinds[k] for k in KINDS},
        "facts_used": len(answered),
    }
    return errors, warnings, stats


def main(argv: list[str]) -> int:
    here = Path(__file__).resolve().parent
    files = [Path(a) for a in argv] or sorted(here.glob("*.json"))
    if not files:
        print("no files")
        return 1
    total_kinds: Counter = Counter()
    totals: Counter = Counter()
    failed = 0
    for path in files:
        errors, warnings, stats = check_file(path)
        status = "FAIL" if errors else "ok"
        if stats:
            k = stats["kinds"]
            print(
                f"{path.name:<14} {status:<4} facts={stats['facts']} "
                f"supersedes={stats['supersedes']} "
                f"deleted={stats['deleted']} paths={stats['paths']} questions={stats['questions']} "
                + " ".join(f"{name}={k[name]}" for name in KINDS)
            )
            total_kinds.update(k)
            totals.update({x: stats[x] for x in ("facts", "supersedes", "deleted", "questions")})
        else:
            print(f"{path.name:<14} {status}")
        for e in errors:
            print(f"    ERROR {e}")
        for w in warnings:
            print(f"    warn  {w}")
        failed += bool(errors)
    print(
        f"{'TOTAL':<14}      facts={totals['facts']} supersedes={totals['supersedes']} "
        f"deleted={totals['deleted']} questions={totals['questions']} "
        + " ".join(f"{name}={total_kinds[name]}" for name in KINDS)
    )
    print("all files pass" if not failed else f"{failed} file(s) fail")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
