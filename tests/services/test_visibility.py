"""The two spellings of "current" (not deleted, not superseded) select the same facts,
and `standing` agrees with the listings it stands in for."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import select

from app.db.tables import facts
from app.services import facts as fact_service
from app.services.visibility import current_for_scans, current_only
from app.usecases.memory import NewFact
from tests.conftest import Actor, FakeClock


def test_current_for_scans_selects_what_current_only_selects(
    actor: Callable[[str], Actor], clock: FakeClock
) -> None:
    mem = actor("default").memory
    made = [mem.store("default", NewFact(f"/v/n{i % 3}", f"fact {i}")) for i in range(12)]
    for old in made[:4]:  # superseded, once each
        mem.store("default", NewFact(old.path, f"after {old.id}", {}, supersedes_id=old.id))
    for gone in made[4:7]:
        mem.delete("default", gone.id)
    # A correction that is itself deleted: its old fact stays superseded.
    fixed = mem.store("default", NewFact("/v/n0", "wrong", {}, supersedes_id=made[7].id))
    mem.delete("default", fixed.id)
    clock.advance(days=3)
    mem.recall("default", made[8].id)
    with mem.transaction("default") as (conn, ctx):
        one = set(conn.execute(select(facts.c.id).where(current_only())).scalars())
        other = set(conn.execute(select(facts.c.id).where(current_for_scans())).scalars())
        assert one == other
        assert not {f.id for f in made[:8]} & one and {f.id for f in made[8:]} <= one
        assert fixed.id not in one

        standing = fact_service.standing(conn, ctx, limit=5)
        listed = fact_service.list_facts(conn, ctx, sort="strength", limit=5).facts
        assert [f.id for f in standing.strongest] == [f.id for f in listed]
        assert standing.count == fact_service.count_under(conn, ctx, "/")
        assert standing.count == len(one)
        strengths = [f.strength for f in standing.fading]
        assert (
            strengths == sorted(strengths) and standing.fading[-1].strength <= listed[-1].strength
        )
