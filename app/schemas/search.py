"""Search requests and results."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.rules import MAX_LIMIT, MAX_QUERY_CHARS, Mode, SearchSort
from app.schemas.common import AS_OF_DESCRIPTION, RequestModel
from app.schemas.facts import MAX_PATH_CHARS, AsOfNote, Fact

# Longer than any RFC 3339 time; bounds what an error message may quote.
MAX_AS_OF_CHARS = 40


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
    as_of: str | None = Field(
        default=None,
        max_length=MAX_AS_OF_CHARS,
        description=AS_OF_DESCRIPTION,
        json_schema_extra={"format": "date-time"},
        examples=["2026-12-01T09:30:00Z"],
    )


class Scores(BaseModel):
    """The scores a result was ranked by; which ones are present depends on the mode.

    None of them depends on a fact the reader cannot see, nor on a deleted or superseded
    one: keyword statistics are counted over the reader's own current matches, cosine is
    the fact's and the query's own, and relevance weighs those.
    """

    keyword: float | None = Field(
        default=None,
        description=(
            "BM25 of the fact for the query's words, counted over the facts you can see "
            "that hold any of them (how many hold each word, their lengths); higher is "
            "better"
        ),
    )
    all_words: bool | None = Field(
        default=None,
        description=(
            "Keyword mode: true when the fact holds every word of the query that carries a "
            "topic (stop words such as 'the' or 'or' never count)"
        ),
    )
    words_held: float | None = Field(
        default=None,
        description=(
            "The share of the query's words the fact holds, each word weighed by how rare "
            "it is among your facts that hold any of them (0 to 1)"
        ),
    )
    cosine: float | None = Field(
        default=None, description="Cosine similarity of the fact's embedding to the query's"
    )
    relevance: float | None = Field(
        default=None,
        description=(
            "Hybrid: the estimated chance (0 to 1) that the fact answers the query, from its "
            "cosine, the words it holds and where it stands among the other candidates, "
            "weighed by a model fitted on development data (docs/search.md)"
        ),
    )
    in_window: bool | None = Field(
        default=None,
        description=(
            "Hybrid: true when the query names a time span ('last week', 'in May', "
            "'3 days ago') and the fact was created in it"
        ),
    )


class SearchResult(BaseModel):
    fact: Fact
    score: float = Field(
        description=(
            "What the results are ordered by, higher is better: `keyword` in keyword "
            "mode, `cosine` in semantic mode, `relevance` in hybrid mode"
        )
    )
    scores: Scores


class SearchOut(BaseModel):
    mode: Mode
    results: list[SearchResult]
    as_of: AsOfNote = None
