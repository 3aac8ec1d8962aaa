"""A server with a model embeds the pending queue itself, in the background.

Facts wait for an embedding when they were stored without a model (or while it
failed), imported, or written by the migration (the /memory starter facts).
`embornal memory reindex` fills them from the command line; a running server
does the same work here, with the same code (embedding.reindex): small batches,
the model run outside any transaction, each batch written in one short write
transaction, so requests never wait long behind it. A fact filled meanwhile by
someone else is skipped.

One daemon thread (the service is synchronous and SQLite has one writer). It
runs a pass at start, then waits to be woken (`wake()`) or for the next poll,
which catches facts another process (the CLI, an import) queued. Tests drive
it without sleeping: `run_pass()` runs one pass in the caller's thread, and
`wait_idle(timeout)` waits for the thread to find the queue empty.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy import Engine

from app.embeddings.base import Embedder
from app.errors import EmbornalError
from app.services.embedding import reindex

log = logging.getLogger(__name__)

# Small batches: the model takes ~10 ms a text on two cores, so a batch is done in
# a fraction of a second and a search waiting for the CPU is not held up long.
BATCH_SIZE = 16
POLL_SECONDS = 30.0


class EmbedWorker:
    def __init__(
        self,
        engine: Engine,
        model: Callable[[], Embedder | None],
        *,
        batch_size: int = BATCH_SIZE,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        # Asked before each pass: a server that switched models (`embornal model use`)
        # must not go on embedding with the old one.
        self.engine, self.model = engine, model
        self.batch_size, self.poll_seconds = batch_size, poll_seconds
        self.embedded = 0  # facts looked at since start, for logs and tests
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._idle = threading.Event()  # set when a pass found nothing left to do
        self._thread: threading.Thread | None = None

    def run_pass(self) -> int:
        """Embed what waits now, until the queue is empty or stop() is called."""
        embedder = self.model()
        if embedder is None:
            return 0
        done = reindex(
            self.engine,
            embedder,
            batch_size=self.batch_size,
            should_stop=self._stop.is_set,
        )
        self.embedded += done
        if done:
            log.info("embedded %d waiting facts", done)
        return done

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="embed-worker", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Look at the queue now rather than at the next poll."""
        self._idle.clear()
        self._wake.set()

    def wait_idle(self, timeout: float) -> bool:
        """True once the thread has found the queue empty (since the last wake)."""
        return self._idle.wait(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Finish the batch in hand (its write commits or not at all) and end the thread."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("the embedding worker did not stop within %.0f s", timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            try:
                self.run_pass()
            except Exception as exc:
                # A failing model or a database that is away: try again at the next poll,
                # rather than spin on the same batch. A database fault (app.db.faults) is
                # one line; it would repeat its traceback every poll while the outage lasts.
                if isinstance(exc, EmbornalError) and exc.public:
                    log.warning(
                        "background embedding paused, retrying in %.0f s: %s",
                        self.poll_seconds,
                        exc.detail,
                    )
                else:
                    log.exception(
                        "background embedding failed; retrying in %.0f s", self.poll_seconds
                    )
            else:
                if not self._stop.is_set():
                    self._idle.set()
            self._wake.wait(self.poll_seconds)
