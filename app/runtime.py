"""Open the memory the way every entry point does: settings, engine, schema, rules, model.

The CLI and the HTTP app both start here, so a width disagreement or a config
mistake stops either one the same way. A Runtime holds what is built once per
process; app.usecases.memory.Memory runs the verbs on it.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError

from app.acl.enforcer import AccessControl
from app.db import migrate
from app.db.dialects import VectorsMissing, backend
from app.db.engine import close_engine, make_engine, read_transaction, write_transaction
from app.embeddings import loader
from app.embeddings.base import Embedder
from app.embeddings.catalog import CATALOG, NO_MODEL, OFFLINE_MODEL
from app.embeddings.loader import LoadedModel
from app.embeddings.query_cache import QueryCache
from app.errors import ConfigError, StartupError
from app.services import embedding as embedding_service
from app.services import vector_index
from app.services.tokens import RevocationList
from app.services.vector_index import VectorIndex
from app.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    settings: Settings
    engine: Engine
    access: AccessControl
    model: LoadedModel = field(default_factory=lambda: LoadedModel("none"))
    vector_index: VectorIndex = field(default_factory=VectorIndex)
    query_cache: QueryCache = field(default_factory=QueryCache)
    # What a server says at start about the model it chose (load_model), or None.
    model_note: str | None = None
    # Whether this process moved the memory to the offline model (load_model).
    fell_back: bool = False
    # The default model, when the memory's own model is used instead (adopt_memory_model).
    adopted_from: str | None = None
    # The schema revision the memory was at when this runtime opened it (None: new).
    found_at_revision: str | None = None
    # What of the vectors' schema the database lacked at start (a restore that left it
    # out), for the server to say once; /readyz looks again each time it is asked.
    vectors_missing: VectorsMissing | None = None
    # The revoked token ids this process checks requests against (app.services.tokens).
    revocations: RevocationList = field(default_factory=lambda: RevocationList(0.0))
    _switching: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _side: ThreadPoolExecutor | None = field(default=None, repr=False)
    _side_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _closed: bool = field(default=False, repr=False)

    def side_work(self) -> ThreadPoolExecutor:
        """Threads for work a request hands off while it does its own (hybrid's keyword
        half on PostgreSQL): as many as the pool has connections, made on first use."""
        with self._side_lock:
            if self._side is None:
                self._side = ThreadPoolExecutor(
                    max_workers=self.settings.database.pool_size, thread_name_prefix="side"
                )
            return self._side

    # The model as the verbs use it. Tests set an embedder (a fake) directly.
    @property
    def embedder(self) -> Embedder | None:
        return self.model.embedder

    @embedder.setter
    def embedder(self, embedder: Embedder | None) -> None:
        name = embedder.name if embedder is not None else "none"
        self.model = LoadedModel(name, embedder, None if embedder else self.model.problem)

    @property
    def model_problem(self) -> str | None:
        """Why there is no embedder, for readiness and a search by meaning: with none
        configured, that config chose none, whether or not this process loaded."""
        return self.problem_of(self.model)

    @model_problem.setter
    def model_problem(self, problem: str | None) -> None:
        self.model = LoadedModel(self.model.name, self.model.embedder, problem)

    def problem_of(self, model: LoadedModel) -> str | None:
        """model_problem for `model`, a snapshot of self.model a caller took."""
        if model.embedder is None and model.problem is None and self.no_model_configured:
            return loader.NO_MODEL_REASON
        return model.problem

    @property
    def no_model_configured(self) -> bool:
        """Whether config.yaml or EMBORNAL_EMBEDDING__MODEL says `none`: the owner's
        choice for this process, which then loads no model and follows none (not even
        the one the memory's vectors come from). The default is a named model, and no
        fallback or switch ever sets `none`, so the settings say it only when asked."""
        return self.settings.embedding.model == NO_MODEL

    def verify_width(self) -> None:
        """Stop (StartupError) unless config, meta and the loaded model agree on the width."""
        with read_transaction(self.engine) as conn:
            migrate.check_width(conn, self.settings.embedding.width, self.model.width)

    def model_is_current(self, conn: Connection) -> bool:
        """Whether the memory (as `conn` sees it) names the loaded model, or none: a
        search checks this in its own snapshot instead of a read of its own before
        embedding, and follows a switch only when there was one. With no model by
        configuration there is nothing to follow: always current."""
        if self.no_model_configured:
            return True
        wanted = migrate.stored_model(conn)
        return wanted is None or wanted == self.model.name

    def follow_model(self) -> None:
        """Load the model the memory now names, when another process switched it.

        `embornal model use` records its model in meta (with the new width) while a
        server runs; this sees it on the server's next call and loads that model,
        outside any transaction, with the new width. One read of meta a call: a
        switch costs the one request that loads. A process configured with no model
        (`embedding.model: none`) follows nothing: it reads nothing and loads nothing.
        """
        if self.no_model_configured:
            return
        with read_transaction(self.engine) as conn:
            wanted = migrate.stored_model(conn)
            width = migrate.stored_width(conn)
        if wanted is None or wanted == self.model.name:
            return
        with self._switching:  # one thread loads; the others then see it done
            if wanted == self.model.name:
                return
            settings, model = self._load_named(wanted, width, download=False)
            log.info("the memory switched to the model %s: %s", wanted, model.problem or "loaded")
            self.settings, self.model = settings, model

    def _with_model(self, name: str, width: int | None) -> Settings:
        """These settings with the model `name` (and, when given, the width)."""
        update: dict[str, object] = {"model": name}
        if width is not None:
            update["width"] = width
        embedding = self.settings.embedding.model_copy(update=update)
        return self.settings.model_copy(update={"embedding": embedding})

    def _load_named(
        self, name: str, width: int | None, *, download: bool, progress: bool = False
    ) -> tuple[Settings, LoadedModel]:
        """The settings for the model `name` at the memory's `width`, and the model."""
        settings = self._with_model(name, width)
        try:
            model = loader.load_model(settings, download=download, progress=progress)
        except ConfigError as exc:
            # A name this build's catalog lacks: say so in readiness, serve on.
            return settings, LoadedModel(name, problem=exc.detail)
        if model.embedder is not None and width is not None and model.width != width:
            model = LoadedModel(
                name,
                problem=f"the model {name} gives {model.width}-d vectors; "
                f"the memory holds {width}-d ones",
            )
        return settings, model

    def adopt_memory_model(self) -> None:
        """With the model left to its default, take the one the memory's vectors come from.

        Every command opens the memory this way, a model loaded or not, so the width it
        checks is the memory's: a memory that moved to the offline model (load_model)
        stays there, and `model info` or `memory list` open it like `serve` does. A
        model named in config.yaml or EMBORNAL_EMBEDDING__* (model or width) is used as
        named, at the catalog's width unless one is given; older builds recorded no
        model, and then the width names it when one catalog model has it.

        With `embedding.model: none` no model is taken, and unless a width is given the
        width is the memory's: there is no model whose width could disagree with its
        vectors, so a memory that holds some opens (keyword search; stored facts wait for
        a process with a model). A width given is checked against the memory's, as any.
        """
        embedding = self.settings.embedding
        if self.no_model_configured:
            if "width" in embedding.model_fields_set:
                return
            with read_transaction(self.engine) as conn:
                width = migrate.stored_width(conn)
            if width is not None and width != embedding.width:
                self.settings = self._with_model(NO_MODEL, width)
            return
        if "width" in embedding.model_fields_set:
            return
        if "model" in embedding.model_fields_set:
            # A catalog model named without a width has its own: `model: minilm-l6` alone
            # is 384-d, not the default model's 768.
            spec = CATALOG.get(embedding.model)
            if spec is not None and spec.width != embedding.width:
                self.settings = self._with_model(embedding.model, spec.width)
            return
        with read_transaction(self.engine) as conn:
            recorded = migrate.stored_model(conn)
            width = migrate.stored_width(conn)
        if recorded is None and width is not None and width != embedding.width:
            recorded = _only_model_of_width(width)
        if recorded is not None and recorded != embedding.model:
            self.adopted_from = embedding.model
            self.settings = self._with_model(recorded, width)

    def load_model(self, *, download: bool, progress: bool = False) -> None:
        """Load the model this process embeds with: one decision, for every entry point.

        A model named in config.yaml or EMBORNAL_EMBEDDING__* is loaded as named, and
        so is the memory's own (adopt_memory_model). Otherwise the memory has none yet,
        and the default model (bge-base-en-v1.5) is loaded when its files are here or
        this process fetches them. Where it cannot be fetched (the download failed, or
        embedding.download is off, as in the image) and no fact holds a vector yet, the
        offline model that installs with the package (minilm-l6) is: the memory moves
        to its width and records it, and `model_note` says so and how to switch
        (SPEC "Running it"). With facts already embedded, nothing moves on its own:
        no model, keyword search, facts queued, and the front end names the one command
        that switches. A command that fetches nothing (store and search, while
        embedding.download is on) does not decide that the default cannot be had.
        """
        embedding = self.settings.embedding
        if self.adopted_from is not None:
            self.settings, self.model = self._load_named(
                embedding.model, embedding.width, download=download, progress=progress
            )
            if self.model.embedder is not None:
                default = self.adopted_from
                self.model_note = (
                    f"embedding with {embedding.model}, the model of this memory's vectors; "
                    f"to move to the default, {default}: embornal model use {default}"
                )
            return
        self.model = loader.load_model(self.settings, download=download, progress=progress)
        if {"model", "width"} & embedding.model_fields_set or self.model.embedder is not None:
            return
        # "Cannot be fetched" is final where this process tried, or where nothing ever does.
        tried = download or not embedding.download
        if not tried:
            return
        with read_transaction(self.engine) as conn:
            if embedding_service.any_embedded(conn):
                return  # vectors of the default's space: only a deliberate switch
        default, unavailable = embedding.model, self.model.problem
        _, offline = self._load_named(OFFLINE_MODEL, None, download=False)
        if offline.width is None:
            self.model = LoadedModel(
                default,
                problem=f"{unavailable}; the offline model {OFFLINE_MODEL} is not installed "
                f"either ({offline.problem})",
            )
            return
        with write_transaction(self.engine) as conn:
            # Looked at again under the write lock: another process (a replica starting
            # at once) may have decided, or embedded, meanwhile.
            recorded = migrate.stored_model(conn)
            width = migrate.stored_width(conn)
            free = recorded in (None, default) and not embedding_service.any_embedded(conn)
            if free:
                if width != offline.width:
                    embedding_service.rebuild_vectors(conn, offline.width)
                migrate.record_model(conn, OFFLINE_MODEL)
        if not free:
            if recorded not in (None, default):
                self.adopted_from = default
                self.settings, self.model = self._load_named(recorded, width, download=False)
            return
        self.settings = self._with_model(OFFLINE_MODEL, offline.width)
        self.model, self.fell_back = offline, True
        self.model_note = (
            f"{default} cannot be fetched ({unavailable}); this memory has no embedded fact "
            f"yet, so it embeds with the offline model {OFFLINE_MODEL} ({offline.width}-d) "
            f"from now on. To move to {default} once it can be fetched: "
            f"embornal model use {default}"
        )

    def record_model(self) -> None:
        """Name the loaded model in meta, if the memory names another (or none)."""
        if self.model.embedder is None:
            return
        with read_transaction(self.engine) as conn:
            if migrate.stored_model(conn) == self.model.name:
                return
        with write_transaction(self.engine) as conn:
            migrate.record_model(conn, self.model.name)

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
        """Close the memory; once (`serve` hands its runtime to the app, which closes it
        at shutdown, and its own `with` then closes it again: a second fold of the WAL
        would open a connection to do nothing)."""
        with self._side_lock:
            if self._closed:
                return
            self._closed = True
            if self._side is not None:
                self._side.shutdown(wait=True)
                self._side = None
        close_engine(self.engine)


def _only_model_of_width(width: int) -> str | None:
    names = [spec.name for spec in CATALOG.values() if spec.width == width]
    return names[0] if len(names) == 1 else None


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
    A model that loads and agrees becomes the memory's model (meta), so that running
    servers follow it.
    """
    engine = open_engine(settings)
    try:
        found_at = migrate.upgrade(engine, settings.embedding.width)
    except DBAPIError as exc:
        engine.dispose()
        # The driver's own first line (host, port, what failed) holds no password, and
        # no SQL: that follows on the lines after it.
        reason = str(exc.orig or exc).strip().splitlines()[0]
        if "extension" in reason and "vector" in reason:
            # A role that may not create extensions, in a database without pgvector.
            reason += (
                "; an administrator runs CREATE EXTENSION vector in that database once "
                "(docs/postgresql.md)"
            )
        raise StartupError(
            f"cannot open the memory at {settings.database_shown}: {reason}"
        ) from None
    try:
        # A memory that outgrew its index cells gets new ones (once per 4x growth); the
        # look is a read, so a start does not queue behind a writer for nothing.
        with read_transaction(engine) as conn:
            stale = vector_index.partitions_stale(conn)
        if stale:
            with write_transaction(engine) as conn:
                vector_index.repartition_if_stale(conn)
        runtime = Runtime(
            settings=settings,
            engine=engine,
            access=AccessControl(engine),
            revocations=RevocationList(settings.auth.revocation_check_seconds),
            found_at_revision=found_at,
        )
        runtime.adopt_memory_model()
        if load_model:
            runtime.load_model(download=download, progress=progress)
        if check_width:
            runtime.verify_width()
            runtime.record_model()
        with read_transaction(engine) as conn:
            runtime.vectors_missing = backend(conn).vectors.missing(conn)
    except Exception:
        engine.dispose()
        raise
    return runtime
