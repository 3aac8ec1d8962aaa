"""Open the memory the way every entry point does: settings, engine, schema, rules, model.

The CLI and the HTTP app both start here, so a width disagreement or a config
mistake stops either one the same way. A Runtime holds what is built once per
process; app.usecases.memory.Memory runs the verbs on it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError

from app.acl.enforcer import AccessControl
from app.db import migrate
from app.db.engine import make_engine, read_transaction, write_transaction
from app.embeddings.query_cache import QueryCache
from app.errors import StartupError
from app.services import vector_index
from app.services.vector_index import VectorIndex
from app.settings import Settings

if TYPE_CHECKING:
    from app.embeddings.base import Embedder

log = logging.getLogger(__name__)
LOCAL_SUBJECT = "default"


@dataclass
class Runtime:
    settings: Settings
    engine: Engine
    access: AccessControl
    embedder: Embedder | None = None
    model_problem: str | None = None  # why there is no embedder, for readiness
    model_load_seconds: float | None = None
    vector_index: VectorIndex = field(default_factory=VectorIndex)
    query_cache: QueryCache = field(default_factory=QueryCache)

    def verify_width(self) -> None:
        """Stop (StartupError) unless config, meta and the loaded model agree on the width."""
        model_width = self.embedder.width if self.embedder is not None else None
        with read_transaction(self.engine) as conn:
            migrate.check_width(conn, self.settings.embedding.width, model_width)

    def load_vector_index(self) -> None:
        """Read every code from facts_vec into the in-memory index (readiness waits
        for this): one sequential read, ~1 s at a million facts (bench/search_bench.py)."""
        try:
            with read_transaction(self.engine) as conn:
                self.vector_index.refresh(conn)
        except Exception:
            # Readiness stays false and says so; each search tries the load again.
            log.exception("the vector index failed to load")

    def close(self) -> None:
        self.engine.dispose()


def open_engine(settings: Settings) -> Engine:
    """The SQLite file by default; PostgreSQL when database.url is set."""
    database = settings.database
    return make_engine(
        database.sqlalchemy_url() or settings.database_path,
        busy_timeout_ms=database.busy_timeout_ms,
        cache_size_mb=database.cache_size_mb,
        pool_size=database.pool_size,
        statement_timeout_ms=database.statement_timeout_ms,
    )


def open_runtime(
    settings: Settings,
    *,
    load_model: bool = False,
    download: bool = False,
    progress: bool = False,
    check_width: bool = True,
) -> Runtime:
    """Migrate to head, check the vector width, and (optionally) load the model once.

    `check_width=False` is for `reindex --rebuild` alone, which changes the width.
    """
    engine = open_engine(settings)
    try:
        migrate.upgrade(engine, settings.embedding.width)
    except OperationalError as exc:
        engine.dispose()
        # The driver's own first line (host, port, what failed) holds no password.
        reason = str(exc.orig or exc).strip().splitlines()[0]
        raise StartupError(
            f"cannot open the memory at {settings.database_shown}: {reason}"
        ) from None
    # A memory that outgrew its index cells gets new ones (once per 4x growth); the
    # look is a read, so a start does not queue behind a writer for nothing.
    with read_transaction(engine) as conn:
        stale = vector_index.partitions_stale(conn)
    if stale:
        with write_transaction(engine) as conn:
            vector_index.repartition_if_stale(conn)
    runtime = Runtime(settings=settings, engine=engine, access=AccessControl(engine))
    if load_model:
        from app.services.embedding import attach_model

        attach_model(runtime, download=download, progress=progress)
    if check_width:
        try:
            runtime.verify_width()
        except Exception:
            engine.dispose()
            raise
    return runtime
