"""Scope tokens: where a fact sits and whose it is, as words an index can intersect.

A search walks an index (FTS5's doclists, the vector index's cells) and then drops the
facts the reader may not see (app.acl.compile's fragment). Where the reader sees a
small part of a large memory, that walk costs in proportion to the whole memory: the
hidden facts holding the query's words are walked and dropped. Scope tokens let the
walk start from the reader's part instead.

Each fact carries, from the moment it is stored, one token for each node above it and
its own (the root excepted) and one for each of its own tags, the owner tag included:
what never changes about a fact (its path and its own tags are immutable). A reader's
allow rules become the tokens a fact it may read must hold at least one of: a subtree
or a node rule the token of that node (a node rule's token also covers the nodes
beneath: wider than needed, never narrower), a tag rule the tag's token and, for the
tags a fact inherits, the tokens of the nodes that carry the tag on the path (read at
search time: path tags change). Any fact the reader may read holds one of them, so a
search may intersect with them first and apply the exact fragment after: the same
rows, found among fewer. A rule on the whole tree leaves nothing to narrow (None).

Tokens are digits behind a letter, so the tokenizers keep them whole, and are hashes
of what they stand for: two that collide only widen the intersection, which the exact
fragment then narrows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence

from app.acl.model import ObjectPattern
from app.rules import OWNER_KEY

# A reader whose rules name more than this many tokens is not narrowed: an OR of many
# doclists costs more to walk than the rows it would spare (bench.reader_cost_bench).
MAX_READER_TOKENS = 16


def _token(kind: str, name: str) -> str:
    digest = hashlib.blake2b(f"{kind}\x00{name}".encode(), digest_size=8).digest()
    # 50 bits as 15 digits: room enough that a collision is a curiosity, not a cost.
    return "s" + str(int.from_bytes(digest, "big") >> 14).zfill(15)


def node_token(path: str) -> str:
    return _token("path", path)


def tag_token(key: str, value: str) -> str:
    return _token("tag", f"{key}={value}")


def _ancestors(path: str) -> list[str]:
    """The nodes above `path` and itself, the root excepted: /a/b -> /a, /a/b."""
    segments = [s for s in path.split("/") if s]
    return ["/" + "/".join(segments[: i + 1]) for i in range(len(segments))]


def fact_scope(path: str, tags: Mapping[str, str]) -> str:
    """The tokens a fact at `path` with its own `tags` (owner included) carries."""
    tokens = [node_token(p) for p in _ancestors(path)]
    tokens += [tag_token(k, v) for k, v in sorted(tags.items())]
    return " ".join(tokens)


def inherited_tags(rules: Iterable[tuple[ObjectPattern, str]]) -> list[tuple[str, str]]:
    """The (key, value) of the tag rules that allow a read through a path's tags: the
    nodes carrying them are looked up at search time (reader_tokens' `tagged_nodes`)."""
    return sorted(
        {
            (p.key, p.value)
            for p, effect in rules
            if effect == "allow" and p.kind == "tag" and p.key != OWNER_KEY
        }
    )


def narrows(rules: Iterable[tuple[ObjectPattern, str]]) -> bool:
    """Whether tokens could narrow what the rules let a subject read: not when one
    allows the whole tree, nor when they name more tokens than a walk can afford (each
    allow names one at least), nor when none allows anything (the fragment is false)."""
    allows = {p for p, effect in rules if effect == "allow"}
    if not allows or len(allows) > MAX_READER_TOKENS:
        return False
    return not any(p.kind != "tag" and p.path == "/" for p in allows)


def reader_tokens(
    rules: Iterable[tuple[ObjectPattern, str]], tagged_nodes: Sequence[str]
) -> list[str] | None:
    """The tokens of which every fact the rules let a subject read holds one, or None
    when they would not narrow anything (a rule on the whole tree, or too many).
    `tagged_nodes`: the nodes whose own path tags match a tag rule (inherited_tags)."""
    rules = list(rules)
    if not narrows(rules) or "/" in tagged_nodes:
        return None  # (the root carries a tag a rule names: every fact)
    # A deny only narrows: the exact fragment applies it.
    allows = [pattern for pattern, effect in rules if effect == "allow"]
    tokens = {tag_token(p.key, p.value) if p.kind == "tag" else node_token(p.path) for p in allows}
    tokens.update(node_token(p) for p in tagged_nodes)
    return sorted(tokens) if len(tokens) <= MAX_READER_TOKENS else None
