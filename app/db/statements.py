"""Statements built once and run many times, their values given at execution.

Building a SELECT with SQLAlchemy Core and computing its cache key costs about 50 us
a statement on the machines this was measured on; running a statement built before
costs about 12 (bench/search_profile.py). A search runs about ten statements, so the
hot paths (search, hydration, the policy version, the vector index's refresh) keep
theirs: statements that name no subject in module constants or in the backend's
Statements (app.db.dialects), statements around a subject's read fragment in that
subject's Access (app.acl.enforcer), which lives as long as the policies it was
compiled from.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import TypeVar

T = TypeVar("T")


class Statements:
    """A bounded memo of built statements by key. Two threads missing one key at once
    both build it and one wins: statements are immutable, either will do."""

    def __init__(self, kept: int = 64) -> None:
        self._kept = kept
        self._built: dict[Hashable, object] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        found = self._built.get(key)
        if found is None:
            found = build()
            with self._lock:
                if len(self._built) >= self._kept:
                    # Keys are few (kinds of statement x request filters): a full memo
                    # means unusual filters, and starting over keeps it bounded.
                    self._built.clear()
                self._built[key] = found
        return found  # type: ignore[return-value]
