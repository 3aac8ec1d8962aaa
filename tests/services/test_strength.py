"""The seed's calibration, through the service, with a clock that moves by hand."""

from __future__ import annotations

import math

import pytest

from app.services import facts
from app.services.strength import stability_after_recall, strength


def test_formula_matches_the_seed() -> None:
    assert strength(0, 1) == 1.0
    assert strength(1, 1) == pytest.approx(math.exp(-1))
    # A recall a minute after the last adds almost nothing ...
    assert stability_after_recall(10, strength(1 / 1440, 10)) == pytest.approx(10, rel=1e-3)
    # ... a recall of a fact nobody read for a month multiplies stability by ~3.75.
    assert stability_after_recall(1, strength(30, 1)) == pytest.approx(3.75, rel=1e-6)


def test_recalls_on_days_2_8_30_90_reach_about_120_days(actor, clock) -> None:
    reader = actor()
    with reader.tx() as (conn, ctx):
        fact_id = facts.store_fact(conn, ctx, facts.NewFact("/calibration", "a fact")).id
    start = clock.now
    for day in (2, 8, 30, 90):
        clock.now = start + day * 86_400
        with reader.tx() as (conn, ctx):
            fact = facts.get_fact(conn, ctx, fact_id)
    assert fact.recall_count == 4
    assert fact.stability_days == pytest.approx(120, abs=2)

    clock.now = start + 150 * 86_400  # two months after the last recall
    with reader.tx() as (conn, ctx):
        later = facts.get_fact(conn, ctx, fact_id, peek=True)
    assert later.strength == pytest.approx(0.60, abs=0.01)
    assert later.recall_count == 4  # peek is not a recall


def test_a_fact_unread_for_years_is_recalled_like_any_other(actor, clock) -> None:
    """Its strength is 0 to a float: the recall multiplies stability by 3.75 (PostgreSQL's
    exp() raised on the underflow, a 500 for every read and search that met the fact)."""
    reader = actor()
    with reader.tx() as (conn, ctx):
        fact_id = facts.store_fact(conn, ctx, facts.NewFact("/old", "an ancient fact")).id
    clock.advance(days=750)
    with reader.tx() as (conn, ctx):
        fact = facts.get_fact(conn, ctx, fact_id)
    assert fact.stability_days == pytest.approx(3.75, rel=1e-12)
    clock.advance(days=5000)
    with reader.tx() as (conn, ctx):
        fact = facts.get_fact(conn, ctx, fact_id)
    assert fact.stability_days == pytest.approx(3.75 * 3.75, rel=1e-12)
    assert fact.recall_count == 2


def test_strength_is_computed_at_read_time(actor, clock) -> None:
    reader = actor()
    with reader.tx() as (conn, ctx):
        fact_id = facts.store_fact(conn, ctx, facts.NewFact("/t", "x")).id
    clock.advance(days=1)
    with reader.tx() as (conn, ctx):
        fact = facts.get_fact(conn, ctx, fact_id, peek=True)
    assert fact.strength == pytest.approx(math.exp(-1))
    assert fact.last_recall_at is None
