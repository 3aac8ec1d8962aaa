"""Results as JSON, in one place: the HTTP responses and the CLI's `--json` alike.

The use cases return typed results (frozen dataclasses: app.services.facts.Fact,
FactPage, app.services.paths.Node, app.services.search.SearchPage ...). Their JSON
form is the response schema of this package that FastAPI validates a route's
result with; `to_json` gives the command line that same form, so `embornal ...
--json` prints what the API returns, field for field.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python


@functools.cache
def schemas() -> dict[type, type[BaseModel]]:
    """Each result type and its response schema. Imported when first asked for: the
    CLI's `paths --json` must not pay for the memory's modules (bench/cli_startup.py)."""
    from app.schemas.facts import Fact as FactOut
    from app.schemas.facts import FactList
    from app.schemas.facts import StoredFact as StoredFactOut
    from app.schemas.paths import PathOut, PathWithFacts
    from app.schemas.search import SearchOut
    from app.usecases.memory import Browse, Fact, FactPage, Node, SearchPage, StoredFact

    return {
        Fact: FactOut,
        StoredFact: StoredFactOut,
        FactPage: FactList,
        Node: PathOut,
        Browse: PathWithFacts,
        SearchPage: SearchOut,
    }


def to_json(value: Any) -> Any:
    """`value` as JSON-ready Python: results by their response schema; containers,
    reports and plain values (datetimes as RFC 3339, paths as text) by pydantic."""
    is_result = dataclasses.is_dataclass(value) and not isinstance(value, type)
    schema = schemas().get(type(value)) if is_result else None
    if schema is not None:
        return schema.model_validate(value, from_attributes=True).model_dump(mode="json")
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(item) for item in value]
    return to_jsonable_python(value)
