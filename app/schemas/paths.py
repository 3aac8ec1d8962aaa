"""A node of the tree, one level deep."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.schemas.facts import Fact


class Child(BaseModel):
    path: str
    fact_count: int = Field(description="Current facts in the child's subtree the reader sees")


class PathOut(BaseModel):
    path: str
    tags: dict[str, str] = Field(description="The node's own tags")
    effective_tags: dict[str, str] = Field(description="Own and inherited tags, nearest wins")
    children: list[Child]
    fact_count: int = Field(description="Current facts at this node the reader sees")
    subtree_fact_count: int = Field(description="Current facts in the subtree the reader sees")


class PathWithFacts(PathOut):
    """A node with a page of the facts at it (`embornal memory show --json`)."""

    facts: list[Fact]
    next_cursor: str | None
