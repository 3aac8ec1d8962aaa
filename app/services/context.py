"""What every service call needs besides its connection: who acts, under which rules.

Built by app.usecases.memory.Memory inside each transaction; services never run the model.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from app.acl.enforcer import Access
from app.settings import LimitsSettings


@dataclass(frozen=True)
class Context:
    subject: str
    access: Access
    limits: LimitsSettings = field(default_factory=LimitsSettings)
    # Injected so that tests can move time without sleeping.
    clock: Callable[[], float] = time.time
