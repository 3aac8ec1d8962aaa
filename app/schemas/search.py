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

    None of them depends on facts the reader cannot see: keyword and fused scores
    come from positions among the reader's own results, cosine from the fact and
    the query alone.
    """

    keyword: float | None = Field(
        default=None,
        description=(
            "Keyword rank score, 1/position among the keyword matches you can see "
            "(1 for the best, 0.5 for the second...). Facts holding every content word "
            "of the query come before those holding only some."
        ),
    )
    all_words: bool | None = Field(
        default=None,
        description=(
            "Keyword match: true when the fact holds every content word of the query "
            "(stop words such as 'the' or 'or' never count), false when it holds some "
            "of them (the relaxed match that fills the page)"
        ),
    )
    cosine: float | None = Field(
        default=None, description="Cosine similarity of the fact's embedding to the query's"
    )
    words_held: float | None = Field(
        default=None,
        description=(
            "Hybrid, keyword matches: the share of the query's content words the fact "
            "holds, each word weighed by how rare it is among your keyword matches "
            "(0 to 1); a keyword match counts that much in the fusion"
        ),
    )
    rrf: float | None = Field(
        default=None,
        description=(
            "Hybrid: weighted reciprocal rank fusion, the sum of weight/(60 + position) "
            "over the semantic ranking (weight 1; its 100 nearest facts, ordered by the "
            "query less what its 10 nearest share) and the keyword ranking (weight "
            "`words_held`), doubled for a fact created in the time span the query names"
        ),
    )
    in_window: bool | None = Field(
        default=None,
        description=(
            "Hybrid: true when the query names a time span ('last week', 'in May', "
            "'3 days ago') and the fact was created in it, which boosts it"
        ),
    )


class SearchResult(BaseModel):
    fact: Fact
    score: float = Field(
        description=(
            "What the results are ordered by, higher is better: `keyword` in keyword "
            "mode, `cosine` in semantic mode, `rrf` in hybrid mode"
        )
    )
    scores: Scores


class SearchOut(BaseModel):
    mode: Mode
    results: list[SearchResult]
    as_of: AsOfNote = None
