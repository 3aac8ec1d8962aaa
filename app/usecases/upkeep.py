"""A server's background upkeep: the activity record and old token records pruned.

One daemon thread runs a pass a minute after start (a server started for a moment, as
tests do, competes with no one) and then every `every_seconds` (an hour), each pass a
few short write transactions (app.usecases.memory.Memory.prune). A failed pass is
logged and tried again at the next; stop() ends the thread. Tests call the pass itself
(Memory.prune) and need no thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

UPKEEP_SECONDS = 3600.0
FIRST_PASS_SECONDS = 60.0


class Upkeep:
    def __init__(
        self,
        run: Callable[[], dict[str, int]],
        *,
        every_seconds: float = UPKEEP_SECONDS,
        first_after: float = FIRST_PASS_SECONDS,
    ) -> None:
        self._run = run
        self._every = every_seconds
        self._first_after = first_after
        self._stop = threading.Event()
        self.passes = 0
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="upkeep", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        self._stop.wait(self._first_after)
        while not self._stop.is_set():
            try:
                gone = self._run()
                if any(gone.values()):
                    log.info("pruned %s", ", ".join(f"{n} {what}" for what, n in gone.items()))
            except Exception:
                log.exception("pruning the activity record failed; trying again later")
            self.passes += 1
            self._stop.wait(self._every)

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
