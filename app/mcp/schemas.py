"""What the MCP tools take and give: JSON schemas written for a language model.

Inputs refuse unknown fields (a misspelt argument is an error the model can fix,
not a silently dropped filter). Their bounds mirror the HTTP API's; the rules
themselves (paths, tags, content limits, access) are checked by the use cases.
Outputs reuse the HTTP API's response models, so a fact reads the same
whichever front end handed it out.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.rules import MAX_ID, MAX_LIMIT, MAX_QUERY_CHARS, ListSort, Mode, OnDuplicate
from app.schemas.facts import MAX_PATH_CHARS
from app.schemas.search import MAX_AS_OF_CHARS

# The schema's bound on a batch; the use case enforces limits.batch_facts (1000 by default).
MAX_BATCH = 1000

FactId = Field(ge=1, le=MAX_ID, description="The fact's id, as a tool returned it")


def as_of_field() -> Any:
    return Field(
        default=None,
        max_length=MAX_AS_OF_CHARS,
        description=(
            "Answer as the memory stood at this moment, an RFC 3339 time with a timezone "
            "(e.g. 2026-12-01T09:30:00Z): what it believed then, to see why you acted as "
            "you did. Facts stored later do not exist; facts superseded or deleted later "
            "are still current. Never a recall. Strength, path tags and access rules are "
            "today's."
        ),
        json_schema_extra={"format": "date-time"},
    )


class ToolInput(BaseModel):
    # Strict types, as REST: "1" or true for a fact id is a mistake to name, not to guess.
    model_config = ConfigDict(extra="forbid", strict=True)


class FactItem(ToolInput):
    path: str = Field(
        max_length=MAX_PATH_CHARS,
        description=(
            "The topic the fact belongs to, like /projects/embornal/storage: lowercase "
            "segments of letters, digits, '.', '_' or '-'. Missing parents are created."
        ),
    )
    content: str = Field(
        description=("One small, self-contained statement. Link related topics as [[/some/path]]."),
    )
    tags: dict[str, str] | None = Field(
        default=None,
        description=(
            'Optional key=value labels, e.g. {"lang": "py"}. The key `owner` is '
            "reserved: the memory records who wrote the fact itself. A supersede "
            "without tags keeps the old fact's; {} drops them."
        ),
    )
    supersedes_id: int | None = Field(
        default=None,
        ge=1,
        le=MAX_ID,
        description=(
            "To correct or update a fact, give its id here: the new fact replaces it in "
            "searches and listings, and the old one stays readable in its history."
        ),
    )


ON_DUPLICATE = (
    "allow (the default): store, and list in `similar` the facts you can read that say "
    "nearly the same. refuse: if there is one, store nothing and fail naming it, so you "
    "can supersede it instead."
)


class StoreFactIn(FactItem):
    on_duplicate: OnDuplicate = Field(default="allow", description=ON_DUPLICATE)


class StoreFactsIn(ToolInput):
    facts: list[FactItem] = Field(
        min_length=1,
        max_length=MAX_BATCH,
        description="The facts to store, all or nothing: if one is refused, none is stored",
    )
    on_duplicate: OnDuplicate = Field(
        default="allow", description=ON_DUPLICATE + " With refuse, any fact of the batch."
    )


class PolicyLineIn(ToolInput):
    line: str = Field(
        max_length=1024,
        description=(
            "A policy line as `p, SUBJECT, OBJECT, ACTION, EFFECT` (OBJECT path:/a/b, "
            "path:/a/b/* or tag:key=value; ACTION read, write, delete or tag; EFFECT "
            "allow or deny) or `g, MEMBER, ROLE`, e.g. `p, alice, path:/work/*, read, allow`"
        ),
    )


class SearchIn(ToolInput):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for")
    mode: Mode | None = Field(
        default=None,
        description=(
            "keyword (exact words), semantic (meaning) or hybrid (both). Default: hybrid "
            "when the memory has an embedding model, else keyword."
        ),
    )
    under: str | None = Field(
        default=None,
        max_length=MAX_PATH_CHARS,
        description="Only facts in this subtree, e.g. /projects",
    )
    tags: dict[str, str] = Field(
        default_factory=dict, description="Only facts carrying all of these tags"
    )
    min_strength: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Only facts at least this strong (1 = just recalled, fading towards 0)",
    )
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT, description="At most this many results")
    peek: bool = Field(
        default=False,
        description="Read without counting a recall (recalls keep useful facts strong)",
    )
    as_of: str | None = as_of_field()


class GetFactIn(ToolInput):
    fact_id: int = FactId
    peek: bool = Field(default=False, description="Read without counting a recall")
    include_deleted: bool = Field(default=False, description="Show the fact even if deleted")
    as_of: str | None = as_of_field()


class FactIdIn(ToolInput):
    fact_id: int = FactId


class HistoryIn(ToolInput):
    fact_id: int = FactId
    as_of: str | None = as_of_field()


class BrowseIn(ToolInput):
    path: str = Field(
        default="/", max_length=MAX_PATH_CHARS, description="The node to look at; / is the root"
    )
    sort: ListSort = Field(
        default="created", description="The node's facts newest first, or strongest first"
    )
    limit: int = Field(default=20, ge=1, le=MAX_LIMIT, description="At most this many facts")
    cursor: str | None = Field(
        default=None, max_length=1024, description="next_cursor of the previous page"
    )


class ListIn(ToolInput):
    under: str = Field(
        default="/", max_length=MAX_PATH_CHARS, description="The subtree to list, e.g. /projects"
    )
    tags: dict[str, str] = Field(
        default_factory=dict, description="Only facts carrying all of these tags"
    )
    sort: ListSort = Field(default="created", description="Newest first, or strongest first")
    limit: int = Field(default=20, ge=1, le=MAX_LIMIT, description="At most this many facts")
    cursor: str | None = Field(
        default=None, max_length=1024, description="next_cursor of the previous page"
    )
    as_of: str | None = as_of_field()


class TagPathIn(ToolInput):
    path: str = Field(max_length=MAX_PATH_CHARS, description="The node to tag")
    set: dict[str, str] = Field(
        default_factory=dict,
        max_length=64,
        description=(
            'Tags to add or replace on the node, e.g. {"visibility": "public"}. Facts '
            "below inherit them; the nearest tag wins."
        ),
    )
    remove: list[str] = Field(
        default_factory=list, max_length=64, description="Tag keys to remove from the node"
    )


class NoInput(ToolInput):
    pass


class DeletedOut(BaseModel):
    deleted_id: int = Field(description="The fact now deleted: it drops out of everything")
