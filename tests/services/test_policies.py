"""Policy lines (app.services.policies): added once, removed once, by an admin alone."""

from __future__ import annotations

import pytest

from app.errors import Conflict, Forbidden, InvalidInput, NotFound
from app.services import policies as policy_service

LINE = "p, alice, path:/work/*, read, allow"


def lines(actor) -> list[str]:
    with actor().tx() as (conn, ctx):
        return [str(line) for line in policy_service.list_policies(conn, ctx)]


def test_add_list_remove(actor) -> None:
    before = lines(actor)
    with actor().tx() as (conn, ctx):
        added = policy_service.add_policy(conn, ctx, "p,alice ,path:/work/*,  read, allow")
    assert str(added) == LINE  # stored as the seed writes it
    assert sorted(lines(actor)) == sorted([*before, LINE])
    with actor().tx() as (conn, ctx):
        with pytest.raises(Conflict, match="already present"):
            policy_service.add_policy(conn, ctx, LINE)
        assert str(policy_service.remove_policy(conn, ctx, LINE)) == LINE
        with pytest.raises(NotFound, match="no such policy"):
            policy_service.remove_policy(conn, ctx, LINE)
    assert lines(actor) == before


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("p, alice, file:/etc, read, allow", "policy object 'file:/etc' is not one of"),
        ("p, alice, path:/a, fly, allow", "policy action 'fly' is not one of"),
        ("p, alice, path:/a, read, maybe", "is not allow or deny"),
        ("q, alice, bob", "starts with p or g"),
        ("p, alice, tag:team=x, write, allow", "a tag rule cannot allow 'write'"),
    ],
)
def test_a_bad_line_is_refused_with_what_is_wrong(actor, line: str, message: str) -> None:
    with actor().tx() as (conn, ctx), pytest.raises(InvalidInput, match=message):
        policy_service.add_policy(conn, ctx, line)


def test_only_an_admin_manages_policies(actor) -> None:
    with actor("alice").tx() as (conn, ctx):
        for change in (policy_service.add_policy, policy_service.remove_policy):
            with pytest.raises(Forbidden, match="admin role"):
                change(conn, ctx, LINE)
