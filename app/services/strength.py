"""Signal strength (seed: "Signal strength"). Computed from the clock, never stored."""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import ColumnElement, func

from app.db.dialects.functions import greatest
from app.db.tables import facts

SECONDS_PER_DAY = 86_400.0
# Calibrated in the seed: recalls on days 2, 8, 30 and 90 reach ~120 days.
RECALL_GAIN = 2.75
NEW_FACT_STABILITY_DAYS = 1.0
# The most decay a recall's exp() is given (see recall_values).
EXP_FLOOR = 700.0


def strength(elapsed_days: float, stability_days: float) -> float:
    """strength = exp(-elapsed_days / stability_days)."""
    return math.exp(-max(elapsed_days, 0.0) / stability_days)


def stability_after_recall(stability_days: float, current_strength: float) -> float:
    """A recall lifts stability, more when the fact was almost lost: the spacing effect."""
    return stability_days * (1 + RECALL_GAIN * (1 - current_strength))


def last_touch(row_last_recall_at: float | None, row_created_at: float) -> float:
    return row_last_recall_at if row_last_recall_at is not None else row_created_at


def decay_sql(now: float | ColumnElement[float]) -> ColumnElement[Any]:
    """elapsed_days / stability_days in SQL: ordering by it ascending is strongest first.
    `now` is a time, or a bound parameter for statements built once."""
    elapsed = greatest(now - func.coalesce(facts.c.last_recall_at, facts.c.created_at), 0.0)
    return elapsed / SECONDS_PER_DAY / facts.c.stability_days


def recall_values(now: float | ColumnElement[float]) -> dict[str, Any]:
    """The UPDATE ... SET of one recall, from the row's own current values.

    Written as one UPDATE so that two concurrent recalls serialize on the write
    lock and each one builds on the other: both count.
    """
    # PostgreSQL's exp() raises on underflow (below about -708) where SQLite's gives 0:
    # a fact unread for two years of its stability could never be recalled again. At
    # -700 the strength is ~1e-304, nothing to the sum below.
    current = func.exp(greatest(-decay_sql(now), -EXP_FLOOR))
    return {
        "stability_days": facts.c.stability_days * (1 + RECALL_GAIN * (1 - current)),
        "last_recall_at": now,
        "recall_count": facts.c.recall_count + 1,
    }
