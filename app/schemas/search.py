"""Search requests and results."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.rules import MAX_LIMIT, MAX_QUERY_CHARS, Mode, SearchSort
from app.schemas.common import RequestModel
from app.schemas.facts import MAX_PATH_CHARS, Fact


class SearchIn(RequestModel):
    q: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, examples=["small facts"])
    mode: Mode | None = Field(
        default=None, description="Default: hybrid when a model is loaded, else keyword"
    )
    under: str | None = Field(
        default=None,
        max_length=MAX_PATH_CHARS,
        description="Only facts in this subtree",
        examples=["/projects"],
    )
    tag: list[str] = Field(
        default_factory=list,
        description="key=value filters, all must hold",
        examples=[["lang=py"]],
    )
    min_strength: float | None = Field(default=None, ge=0.0, le=1.0)
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT)
    sort: SearchSort = Field(
        default="relevance", description="Order the page by relevance or strength"
    )
    peek: bool = Field(default=False, description="Read without counting a recall")


class Scores(BaseModel):
    """The scores a result was ranked by; which ones are present depends on the mode."""

    bm25: float | None = Field(default=None, description="FTS5 bm25: lower is better")
    cosine: float | None = Field(default=None, description="Cosine similarity to the query")
    rrf: float | None = Field(default=None, description="Reciprocal rank fusion (hybrid)")


class SearchResult(BaseModel):
    fact: Fact
    score: float = Field(description="What the results are ordered by (higher is better)")
    scores: Scores


class SearchOut(BaseModel):
    mode: Mode
    results: list[SearchResult]
