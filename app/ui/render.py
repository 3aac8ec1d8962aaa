"""Turning facts into HTML pieces: content with links, times, and the strength curve.

Everything a fact holds is attacker-written. Text is escaped by markupsafe; a link
is made only for a `[[/path]]` whose folded path the reader sees (the fact's own
`links`, as the API returns them), so its href is one of our paths, never text
from the fact.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

from markupsafe import Markup, escape

from app.usecases.memory import Entry, Fact

# As app.services.facts.LINK: what the memory itself reads as a link.
LINK = re.compile(r"\[\[(/[^\]\s]*)\]\]")
# A folded, valid path: what may go into an href (SPEC: path segments).
SAFE_PATH = re.compile(r"^/(?:[a-z0-9][a-z0-9._-]{0,63}(?:/[a-z0-9][a-z0-9._-]{0,63}){0,31})?$")
SECONDS_PER_DAY = 86_400.0


def path_href(path: str) -> str:
    """/ui/paths/... for a valid folded path (ValueError for anything else)."""
    if not SAFE_PATH.match(path):
        raise ValueError("not a folded path")
    return "/ui/paths" + quote(path, safe="/")


def content_html(fact: Fact) -> Markup:
    """The fact's content, escaped, with `[[/path]]` as links to visible nodes."""
    visible = {link.path for link in fact.links if link.exists}
    out: list[str] = []
    last = 0
    for match in LINK.finditer(fact.content):
        out.append(escape(fact.content[last : match.start()]))
        folded = match.group(1).lower().rstrip("/") or "/"
        if folded in visible and SAFE_PATH.match(folded):
            out.append(
                Markup('<a class="link" href="{}">{}</a>').format(path_href(folded), match.group(0))
            )
        else:
            out.append(escape(match.group(0)))
        last = match.end()
    out.append(escape(fact.content[last:]))
    return Markup("").join(out)


def when(value: datetime | float | None) -> str:
    if value is None:
        return "never"
    if isinstance(value, int | float):
        value = datetime.fromtimestamp(value, UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def ago(seconds: float) -> str:
    """A duration in the largest unit that reads well: 3 min, 5 h, 12 d."""
    seconds = abs(seconds)
    if seconds < 3600:
        return f"{max(1, round(seconds / 60))} min"
    if seconds < 2 * SECONDS_PER_DAY:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / SECONDS_PER_DAY:.0f} d"


def size(n: int | None) -> str:
    if n is None:
        return "—"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


@dataclass(frozen=True, slots=True)
class Mark:
    x: float
    y: float  # of its label: labels of marks close together are stacked
    label: str


@dataclass(frozen=True, slots=True)
class Crossing:
    level: float
    x: float
    y: float
    at: float  # UNIX seconds
    label: str
    anchor: str  # text-anchor of the label: "end" near the right edge


@dataclass(frozen=True, slots=True)
class Curve:
    """An SVG plot of strength over time, as coordinates for the template."""

    width: int
    height: int
    left: int
    top: int
    plot_w: int
    plot_h: int
    past: str  # polyline points: last touch to now (solid)
    ahead: str  # now to the end of the plot (dashed)
    now_x: float
    now_y: float
    now_anchor: str
    marks: list[Mark]  # stored, last recall
    crossings: list[Crossing]  # 0.5 and 0.1
    grid: list[tuple[float, str]]  # y and label
    ticks: list[tuple[float, str]]  # x and date label
    summary: str  # the curve in words (for screen readers and the page)


def strength_at(t: float, last_touch: float, stability_days: float) -> float:
    return math.exp(-max(t - last_touch, 0.0) / SECONDS_PER_DAY / stability_days)


def curve(fact: Fact, now: float, *, width: int = 880, height: int = 240) -> Curve:
    """Strength from the fact's last touch (its store, or its latest recall) on: the
    decay so far, and ahead until it falls under 0.1.

    The memory keeps the time of the latest recall only (recall_count counts the
    others): before it, the curve is not known and is not drawn.
    """
    created = fact.created_at.timestamp()
    last = fact.last_recall_at.timestamp() if fact.last_recall_at else created
    stability = fact.stability_days
    cross = {lvl: last + stability * SECONDS_PER_DAY * math.log(1 / lvl) for lvl in (0.5, 0.1)}
    start = created
    end = max(now, cross[0.1]) + 0.08 * (max(now, cross[0.1]) - start or SECONDS_PER_DAY)
    left, top, right, bottom = 44, 14, 16, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    span = end - start or 1.0

    def x_of(t: float) -> float:
        return round(left + (t - start) / span * plot_w, 1)

    def y_of(s: float) -> float:
        return round(top + (1 - s) * plot_h, 1)

    def points(t0: float, t1: float, n: int = 60) -> str:
        if t1 <= t0:
            return ""
        step = (t1 - t0) / n
        pts = []
        for i in range(n + 1):
            t = t0 + i * step
            pts.append(f"{x_of(t)},{y_of(strength_at(t, last, stability))}")
        return " ".join(pts)

    marks = [Mark(x_of(created), top + 12, "stored")]
    if fact.last_recall_at is not None:
        x = x_of(last)
        stacked = x - marks[0].x < 70
        marks.append(Mark(x, top + (26 if stacked else 12), f"recall {fact.recall_count}"))
    right_side = left + plot_w * 0.62
    crossings = [
        Crossing(
            lvl,
            x_of(at),
            y_of(lvl),
            at,
            f"under {lvl:g} {'on' if at > now else 'since'} {when(at)}",
            "end" if x_of(at) > right_side else "start",
        )
        for lvl, at in cross.items()
    ]
    # Dates alone repeat on a plot of a few days: then the hour too.
    long_span = span > 6 * SECONDS_PER_DAY
    ticks = [
        (x_of(t), when(t)[:10] if long_span else when(t)[5:16])
        for t in (start + span * i / 4 for i in range(5))
    ]
    grid = [(y_of(v), f"{v:g}") for v in (1.0, 0.5, 0.1, 0.0)]
    now_s = strength_at(now, last, stability)
    fall = cross[0.1]
    summary = (
        f"Strength {now_s:.2f} now; stability {stability:.1f} days; "
        f"{fact.recall_count} recall{'s' if fact.recall_count != 1 else ''}"
        f"{', the latest ' + when(last) if fact.last_recall_at else ''}; "
        f"under 0.5 {'since' if cross[0.5] <= now else 'on'} {when(cross[0.5])}, "
        f"under 0.1 {'since' if fall <= now else 'on'} {when(fall)}."
    )
    return Curve(
        width,
        height,
        left,
        top,
        plot_w,
        plot_h,
        past=points(last, min(now, end)),
        ahead=points(max(now, last), end),
        now_x=x_of(now),
        now_y=y_of(now_s),
        now_anchor="end" if x_of(now) > right_side else "start",
        marks=marks,
        crossings=crossings,
        grid=grid,
        ticks=ticks,
        summary=summary,
    )


VIA_NAMES = {"rest": "REST", "mcp": "MCP", "cli": "the CLI", "ui": "the console"}


def via_name(via: str) -> str:
    """The front end an activity entry came through, as a person says it."""
    return VIA_NAMES.get(via, via)


_CHANGE_WORDS = {
    "store": "stored",
    "supersede": "stored",
    "delete": "deleted",
}


def _fact_link(fid: int | None, css: str = "") -> Markup:
    classes = Markup(' class="{}"').format(css) if css else Markup("")
    return Markup('<a{} href="/ui/facts/{}">#{}</a>').format(classes, fid, fid)


def change_line(entry: Entry, fact_id: int) -> Markup:
    """What an entry did to the fact a page shows: stored, superseded, deleted."""
    action = entry.action
    if action == "supersede" and entry.supersedes_id == fact_id:
        return Markup("superseded by ") + _fact_link(entry.fact_id)
    if action == "supersede":
        return Markup("stored, superseding ") + _fact_link(entry.supersedes_id)
    return Markup(escape(_CHANGE_WORDS.get(action, action.replace("_", " "))))


def entry_what(entry: Entry) -> Markup:
    """What an activity entry changed, as one line of escaped HTML: the action, then the
    fact (linked), the fact it replaced, the path (linked), tag, policy line, jti, note."""
    parts: list[Markup] = [Markup("<strong>{}</strong>").format(entry.action.replace("_", " "))]
    if entry.fact_id is not None:
        parts.append(_fact_link(entry.fact_id, "fact-link"))
    if entry.supersedes_id is not None:
        parts.append(
            Markup('<span class="meta">replacing</span> ') + _fact_link(entry.supersedes_id)
        )
    path = entry.path
    if path is not None:
        where = (
            Markup('<a class="path" href="{}">{}</a>').format(path_href(path), path)
            if SAFE_PATH.match(path)
            else Markup('<span class="path">{}</span>').format(path)
        )
        parts.append(Markup('<span class="meta">at</span> ') + where)
    for value, css, label in (
        (entry.tag, "tag", Markup("")),
        (entry.policy, "", Markup("")),
        (entry.jti, "", Markup('<span class="meta">token</span> ')),
    ):
        if value is not None:
            parts.append(label + Markup('<code class="{}">{}</code>').format(css, value))
    if entry.note is not None:
        parts.append(Markup('<span class="meta">{}</span>').format(entry.note))
    return Markup(" ").join(parts)
