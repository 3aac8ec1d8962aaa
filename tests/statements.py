"""The statements an engine runs, seen from a test."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, event


@contextmanager
def executed(engine: Engine, holding: str = "") -> Iterator[list[tuple[str, Any]]]:
    """(text, parameters) of each statement `engine` runs inside the block whose text
    holds `holding` (every one by default), in the order they run."""
    seen: list[tuple[str, Any]] = []

    def keep(*args: Any) -> None:  # conn, cursor, statement, parameters, context, many
        statement, parameters = args[2], args[3]
        if holding in statement:
            seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", keep)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", keep)
