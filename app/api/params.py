"""Query parameters that more than one route takes, declared once."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from app.schemas.facts import MAX_PATH_CHARS

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
