"""Stage timing by wrapping functions by name: what bench.search_profile and
bench.peer_bench print as where a request spends its time.

Standard library only: bench/peer_runner.py imports it inside the peer's own
virtualenv, which holds neither numpy nor embornal.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any


class Timers:
    """Wraps functions by name and adds up their time per request.

    By default a stage's time is inclusive (a wrapped function called inside another
    counts in both). With `exclusive`, time spent in a wrapped callee is taken out of
    its wrapped caller, so the stages of one request add up to at most its total; that
    needs the calls to nest (one thread, no interleaved coroutines).
    """

    def __init__(self, *, exclusive: bool = False) -> None:
        self.current: dict[str, float] = defaultdict(float)
        self.exclusive = exclusive
        self._inner: list[float] = []  # per open call: time spent in wrapped callees
        self._undo: list[Callable[[], None]] = []

    def _enter(self) -> float:
        if self.exclusive:
            self._inner.append(0.0)
        return time.perf_counter()

    def _leave(self, stage: str, t0: float) -> None:
        spent = time.perf_counter() - t0
        if self.exclusive:
            spent_inside = self._inner.pop()
            if self._inner:
                self._inner[-1] += spent
            spent -= spent_inside
        self.current[stage] += spent

    def wrap(self, owner: Any, name: str, stage: str) -> None:
        """Time `owner.name` (a module's function, a class's method or an object's
        attribute; a coroutine function is timed until it returns) as `stage`."""
        original = getattr(owner, name)
        timed: Callable[..., Any]
        if inspect.iscoroutinefunction(original):

            @functools.wraps(original)
            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                t0 = self._enter()
                try:
                    return await original(*args, **kwargs)
                finally:
                    self._leave(stage, t0)

            timed = timed_async
        else:

            @functools.wraps(original)
            def timed_sync(*args: Any, **kwargs: Any) -> Any:
                t0 = self._enter()
                try:
                    return original(*args, **kwargs)
                finally:
                    self._leave(stage, t0)

            timed = timed_sync
        had_own = isinstance(owner, type) and name in vars(owner)
        setattr(owner, name, timed)
        if isinstance(owner, type) and not had_own:
            # An inherited method: undo by removing the override, not by pinning it.
            self._undo.append(lambda: delattr(owner, name))
        else:
            self._undo.append(lambda: setattr(owner, name, original))

    def wrap_exit(self, owner: Any, name: str, stage: str) -> None:
        """Time only the exit of the context manager `owner.name` returns (a
        transaction's commit) as `stage`."""
        original = getattr(owner, name)

        @contextlib.contextmanager
        def timed(*args: Any, **kwargs: Any) -> Any:
            with original(*args, **kwargs) as value:
                try:
                    yield value
                finally:
                    t0 = self._enter()
            self._leave(stage, t0)

        setattr(owner, name, timed)
        self._undo.append(lambda: setattr(owner, name, original))

    def take(self) -> dict[str, float]:
        out, self.current = dict(self.current), defaultdict(float)
        return out

    def restore(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
