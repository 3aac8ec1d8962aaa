"""Facts in and out (SPEC: "A fact in JSON has at least ...")."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, Field, WithJsonSchema, field_validator

from app.rules import MAX_ID, OnDuplicate
from app.schemas.common import AsOf, Problem, RequestModel, UtcTime, as_of_note

AsOfNote = Annotated[
    AsOf | None,
    BeforeValidator(as_of_note),
    Field(description="Set when the answer is `as_of` a moment: which, and what is today's"),
]

# Above what 32 segments of 64 characters can spell; bounds what an error message may quote.
MAX_PATH_CHARS = 4096

# Tags may be left out (a supersede then keeps the old fact's), never sent as null: the
# document says "an object", so generated clients get one plain model for it.
OptionalTags = Annotated[
    dict[str, str] | None,
    WithJsonSchema({"type": "object", "additionalProperties": {"type": "string"}}),
]


class FactIn(RequestModel):
    path: str = Field(
        max_length=MAX_PATH_CHARS,
        description="Topic path, folded to lowercase, e.g. /projects/embornal",
        examples=["/projects/embornal"],
    )
    content: str = Field(
        description="One small statement; [[/path]] links allowed",
        examples=["embornal keeps its facts in SQLite; see [[/projects/embornal/storage]]"],
    )
    tags: OptionalTags = Field(
        default=None,
        description=(
            "The fact's own tags; `owner` is written by the memory. Left out of a "
            "supersede, the old fact's own tags are kept; `{}` drops them"
        ),
        examples=[{"lang": "py"}],
    )
    supersedes_id: int | None = Field(
        default=None, ge=1, le=MAX_ID, description="Id of the fact this corrects"
    )

    @field_validator("tags", mode="before")
    @classmethod
    def _tags_not_null(cls, value: object) -> object:
        if value is None:
            raise ValueError("tags may be left out, but not null")
        return value


ON_DUPLICATE = (
    "What to do when a fact you can read is `similar` (cosine at least "
    "search.similar_threshold): `allow` stores and lists it in `similar`; `refuse` is a "
    "409 naming it, and nothing is written"
)


class StoreIn(FactIn):
    on_duplicate: OnDuplicate = Field(default="allow", description=ON_DUPLICATE)


class BatchIn(RequestModel):
    facts: list[FactIn] = Field(min_length=1, description="Stored all or nothing")
    on_duplicate: OnDuplicate = Field(
        default="allow", description=ON_DUPLICATE + " (for any fact of the batch)"
    )


class Link(BaseModel):
    path: str
    exists: bool = Field(description="True when the node exists and the reader may see it")


class Fact(BaseModel):
    id: int
    path: str
    content: str
    owner: str
    tags: dict[str, str] = Field(description="The fact's own tags, owner included")
    effective_tags: dict[str, str] = Field(description="Own tags over inherited, nearest wins")
    links: list[Link]
    supersedes_id: int | None = Field(
        description="The fact this one corrects; null when there is none or it is hidden"
    )
    superseded_by_id: int | None = Field(
        description="The fact that corrects this one; null when there is none or it is hidden"
    )
    superseded: bool = Field(
        description="True when a newer fact corrects this one, even one the reader cannot see"
    )
    deleted_at: UtcTime | None
    created_at: UtcTime
    last_recall_at: UtcTime | None
    recall_count: int
    stability_days: float
    strength: float = Field(description="exp(-elapsed_days / stability_days), now")
    embedded: bool


class FactList(BaseModel):
    facts: list[Fact]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null at end")
    as_of: AsOfNote = None


class FactsOut(BaseModel):
    """Facts in a given order: a batch as stored, or a supersede chain oldest first."""

    facts: list[Fact]
    as_of: AsOfNote = None


class Similar(BaseModel):
    """An existing fact near a stored one, that its writer may read."""

    id: int
    path: str
    cosine: float = Field(description="Cosine similarity of the two facts' embeddings")


class StoreConflict(Problem):
    """A store refused with 409: the fact to supersede is superseded already, or
    `on_duplicate: "refuse"` met a fact that says nearly the same. Nothing was stored."""

    similar: list[Similar] | None = Field(
        default=None,
        description="on_duplicate refuse: the facts you can read that say nearly the same, "
        "nearest first, as a 201's `similar`: supersede one (`supersedes_id`) rather than "
        "repeat it. Absent when the conflict is a supersede's",
    )
    index: int | None = Field(
        default=None, description="In a batch: the position of the fact that was refused"
    )


class StoredFact(Fact):
    similar: list[Similar] = Field(
        description=(
            "Up to 3 current facts you can read that say nearly the same (cosine at least "
            "search.similar_threshold), nearest first, not counting the fact this one "
            "supersedes nor the rest of its batch. When one states the same thing, "
            "supersede it (supersedes_id) rather than keep both"
        )
    )
    similar_checked: bool = Field(
        description=(
            "False when no similar facts were looked for: the fact has no embedding yet "
            "(no model loaded, or it failed), so `similar` is empty for that reason alone"
        )
    )


class StoredFacts(BaseModel):
    """A batch as stored, in the order sent."""

    facts: list[StoredFact]
