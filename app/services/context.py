"""What every service call needs besides its connection: who acts, under which rules."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.acl.enforcer import Access
from app.settings import LimitsSettings

if TYPE_CHECKING:
    from app.embeddings.base import Embedder


@dataclass(frozen=True)
class Context:
    subject: str
    access: Access
    limits: LimitsSettings = field(default_factory=LimitsSettings)
    # Injected so that tests can move time without sleeping.
    clock: Callable[[], float] = time.time
    embedder: Embedder | None = None
    model_problem: str | None = None  # why there is no embedder, for 503 messages
