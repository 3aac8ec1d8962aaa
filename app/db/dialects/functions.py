"""SQL functions whose name alone differs between the backends, compiled per dialect."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Float
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import GenericFunction


class greatest(GenericFunction[float]):
    """The larger of its arguments: max(a, b) in SQLite, greatest(a, b) in PostgreSQL
    (where max() is only the aggregate)."""

    type = Float()
    inherit_cache = True


@compiles(greatest, "sqlite")
def _greatest_sqlite(element: greatest, compiler: Any, **kw: Any) -> str:
    return f"max({compiler.process(element.clauses, **kw)})"
