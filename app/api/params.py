"""Query parameters that more than one route takes, declared once."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from app.schemas.common import AS_OF_DESCRIPTION
from app.schemas.facts import MAX_PATH_CHARS
from app.schemas.search import MAX_AS_OF_CHARS

MAX_TAG_FILTERS = 32

UnderQuery = Annotated[
    str | None,
    Query(
        max_length=MAX_PATH_CHARS, description="Only facts in this subtree", examples=["/projects"]
    ),
]
TagQuery = Annotated[
    list[str] | None,
    Query(
        max_length=MAX_TAG_FILTERS,
        description="key=value, repeatable; all must hold",
        examples=[["lang=py"]],
    ),
]
AsOfQuery = Annotated[
    str | None,
    Query(
        max_length=MAX_AS_OF_CHARS,
        description=AS_OF_DESCRIPTION,
        json_schema_extra={"format": "date-time"},
        examples=["2026-12-01T09:30:00Z"],
    ),
]
