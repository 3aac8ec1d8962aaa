"""The tree (app.services.paths): nodes made on demand, tags nearest-wins, what a reader sees."""

from __future__ import annotations

import pytest

from app.errors import Forbidden, InvalidInput, NotFound
from app.services import facts as fact_service
from app.services import paths as path_service
from app.services import policies as policy_service
from app.services.facts import NewFact
from app.services.paths import Child


def test_a_store_makes_the_missing_ancestors(actor) -> None:
    with actor().tx() as (conn, ctx):
        fact_service.store_fact(conn, ctx, NewFact("/a/b/c", "deep"))
        top = path_service.describe_path(conn, ctx, "/a")
        middle = path_service.describe_path(conn, ctx, "/A/B/")
    assert top.children == [Child("/a/b", 1)] and top.fact_count == 0
    assert middle.path == "/a/b" and middle.children == [Child("/a/b/c", 1)]
    assert middle.subtree_fact_count == 1


def test_path_tags_set_replace_inherit_and_remove(actor) -> None:
    with actor().tx() as (conn, ctx):
        path_service.set_path_tags(conn, ctx, "/a", {"env": "prod", "team": "x"})
        node = path_service.set_path_tags(conn, ctx, "/a/b", {"env": "dev"})
        assert node.tags == {"env": "dev"}
        assert node.effective_tags == {"env": "dev", "team": "x"}  # the nearest wins
        path_service.set_path_tags(conn, ctx, "/a", {"team": "y"})  # replaces one value
        assert path_service.describe_path(conn, ctx, "/a/b").effective_tags["team"] == "y"
        path_service.remove_path_tag(conn, ctx, "/a/b", "ENV")
        assert path_service.describe_path(conn, ctx, "/a/b").effective_tags["env"] == "prod"
        with pytest.raises(NotFound, match="has no tag 'env'"):
            path_service.remove_path_tag(conn, ctx, "/a/b", "env")


def test_a_node_carries_at_most_32_tags_of_its_own(actor) -> None:
    with actor().tx() as (conn, ctx):
        path_service.set_path_tags(conn, ctx, "/a", {f"k{i}": "v" for i in range(30)})
        path_service.set_path_tags(conn, ctx, "/a", {"k0": "w", "k30": "v", "k31": "v"})
        # One more key, across requests, passes the bound: refused whole.
        with pytest.raises(InvalidInput, match=r"/a would carry 34 tags of its own; .* 32"):
            path_service.set_path_tags(conn, ctx, "/a", {"k1": "w", "k32": "v", "k33": "v"})
        with pytest.raises(InvalidInput, match="at most 32 tags, not 33"):
            path_service.set_path_tags(conn, ctx, "/b", {f"k{i}": "v" for i in range(33)})
        node = path_service.describe_path(conn, ctx, "/a")
        assert len(node.tags) == 32 and node.tags["k0"] == "w" and node.tags["k1"] == "v"
        assert path_service.find_path_id(conn, "/b") is None
        path_service.set_path_tags(conn, ctx, "/a", {"k1": "w"})  # a new value fits


def test_a_path_tag_key_given_twice_after_folding_is_refused(actor) -> None:
    with actor().tx() as (conn, ctx):
        with pytest.raises(InvalidInput, match="tag 'team' is given twice"):
            path_service.set_path_tags(conn, ctx, "/a", {"Team": "a", "team": "b"})
        assert path_service.find_path_id(conn, "/a") is None


def test_a_node_the_reader_may_not_see_does_not_exist_for_it(actor) -> None:
    with actor().tx() as (conn, ctx):
        fact_service.store_fact(conn, ctx, NewFact("/secret/plans", "hidden"))
        fact_service.store_fact(conn, ctx, NewFact("/open", "seen"))
        policy_service.add_policy(conn, ctx, "p, alice, path:/open/*, write, allow")
        policy_service.add_policy(conn, ctx, "p, alice, path:/open/*, read, allow")
    with actor("alice").tx() as (conn, ctx):
        with pytest.raises(NotFound):
            path_service.describe_path(conn, ctx, "/secret")
        with pytest.raises(NotFound):
            path_service.remove_path_tag(conn, ctx, "/secret", "k")
        root = path_service.describe_path(conn, ctx, "/")
        # /memory: its facts are public; /open: alice reads there; /secret: nothing.
        assert [child.path for child in root.children] == ["/memory", "/open"]
        with pytest.raises(Forbidden):  # writing is not tagging
            path_service.set_path_tags(conn, ctx, "/open", {"k": "v"})
