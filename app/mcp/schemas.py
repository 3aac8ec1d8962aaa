"""What the MCP tools take: JSON schemas written for a language model's context.

Every tool's description and schema is sent to the model on each `tools/list`, so
each word here is paid for by every agent that connects (issue 31: the list is kept
under 12,000 characters, tests/mcp/test_mcp_tools.py): a field says what a model
would otherwise get wrong, and nothing the type already says. Inputs refuse unknown
fields (a misspelt argument is an error the model can fix, not a silently dropped
filter). Their bounds mirror the HTTP API's; the rules themselves (paths, tags,
content limits, access) are checked by the use cases. Tags are a plain
`{key: value}` object wherever a tool takes them, as PUT /v1/paths/{path}/tags and
POST /v1/facts take them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.rules import (
    MAX_ID,
    MAX_LIMIT,
    MAX_PATH_TAGS,
    MAX_QUERY_CHARS,
    ListSort,
    Mode,
    OnDuplicate,
)
from app.schemas.facts import MAX_PATH_CHARS
from app.schemas.search import MAX_AS_OF_CHARS

# The schema's bound on a batch; the use case enforces limits.batch_facts (1000 by default).
MAX_BATCH = 1000
# Keys one tag_path call removes: above what a node may carry (MAX_PATH_TAGS), so that a
# node tagged before that bound can be brought back within it.
MAX_TAGS_PER_CALL = 64

FactId = Field(ge=1, le=MAX_ID, description="A fact's id")


def as_of_field() -> Any:
    return Field(
        default=None,
        max_length=MAX_AS_OF_CHARS,
        description=(
            "RFC 3339 time, e.g. 2026-12-01T09:30:00Z: answer as the memory stood then "
            "(never a recall)"
        ),
        json_schema_extra={"format": "date-time"},
    )


def cursor_field() -> Any:
    return Field(default=None, max_length=1024, description="next_cursor of the previous page")


def tags_field(description: str, max_length: int | None = None) -> Any:
    return Field(default_factory=dict, max_length=max_length, description=description)


class ToolInput(BaseModel):
    # Strict types, as REST: "1" or true for a fact id is a mistake to name, not to guess.
    model_config = ConfigDict(extra="forbid", strict=True)


class FactItem(ToolInput):
    path: str = Field(
        max_length=MAX_PATH_CHARS,
        description="Topic path, e.g. /projects/embornal/storage (lowercase; parents made)",
    )
    content: str = Field(description="One self-contained statement; link topics as [[/a/path]]")
    tags: dict[str, str] | None = Field(
        default=None,
        description='e.g. {"lang": "py"}; owner is reserved; a supersede without keeps the old',
    )
    supersedes_id: int | None = Field(
        default=None, ge=1, le=MAX_ID, description="The fact this one corrects"
    )


ON_DUPLICATE = "refuse: store nothing when a fact you can read says nearly the same"


class StoreFactIn(FactItem):
    on_duplicate: OnDuplicate = Field(default="allow", description=ON_DUPLICATE)


class StoreFactsIn(ToolInput):
    facts: list[FactItem] = Field(min_length=1, max_length=MAX_BATCH)
    on_duplicate: OnDuplicate = Field(default="allow", description=ON_DUPLICATE)


class PolicyLineIn(ToolInput):
    line: str = Field(
        max_length=1024,
        description=(
            "`p, SUBJECT, OBJECT, ACTION, EFFECT` (OBJECT path:/a, path:/a/* or tag:k=v; "
            "ACTION read, write, delete or tag) or `g, MEMBER, ROLE`"
        ),
    )


class SearchIn(ToolInput):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    mode: Mode | None = Field(
        default=None, description="Default: hybrid with a model, else keyword"
    )
    under: str | None = Field(default=None, max_length=MAX_PATH_CHARS, description="A subtree")
    tags: dict[str, str] = tags_field("Only facts with all of these")
    min_strength: float | None = Field(
        default=None, ge=0.0, le=1.0, description="1: just recalled, fading towards 0"
    )
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT)
    peek: bool = Field(default=False, description="Not a recall")
    as_of: str | None = as_of_field()


class GetFactIn(ToolInput):
    fact_id: int = FactId
    peek: bool = Field(default=False, description="Not a recall")
    include_deleted: bool = False
    as_of: str | None = as_of_field()


class FactIdIn(ToolInput):
    fact_id: int = FactId


class HistoryIn(ToolInput):
    fact_id: int = FactId
    as_of: str | None = as_of_field()


class BrowseIn(ToolInput):
    path: str = Field(default="/", max_length=MAX_PATH_CHARS)
    sort: ListSort = Field(default="created", description="newest or strongest first")
    limit: int = Field(default=20, ge=1, le=MAX_LIMIT)
    cursor: str | None = cursor_field()


class ListIn(ToolInput):
    under: str = Field(default="/", max_length=MAX_PATH_CHARS)
    tags: dict[str, str] = tags_field("Only facts with all of these")
    sort: ListSort = Field(default="created", description="newest or strongest first")
    limit: int = Field(default=20, ge=1, le=MAX_LIMIT)
    cursor: str | None = cursor_field()
    as_of: str | None = as_of_field()


class TagPathIn(ToolInput):
    path: str = Field(max_length=MAX_PATH_CHARS)
    tags: dict[str, str] = tags_field(
        'Set or replace, e.g. {"visibility": "public"}', max_length=MAX_PATH_TAGS
    )
    remove: list[str] = Field(
        default_factory=list, max_length=MAX_TAGS_PER_CALL, description="Keys to remove"
    )


class NoInput(ToolInput):
    pass


class DeletedOut(BaseModel):
    deleted_id: int = Field(description="The fact now deleted: it drops out of everything")


def compact(schema: Any) -> Any:
    """A JSON schema without pydantic's `title`s: each repeats its property's name,
    and over a dozen tools they came to a fifth of `tools/list`."""
    if isinstance(schema, list):
        return [compact(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs") and isinstance(value, dict):
            # Names of properties and definitions, not keywords: a property may be `title`.
            out[key] = {name: compact(sub) for name, sub in value.items()}
        else:
            out[key] = compact(value)
    return out
