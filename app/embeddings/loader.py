"""Turn settings into a loaded model, and back the `embornal model pull|info` commands.

`load_model` is the one way a process gets its model: a function of the settings
whose result (the embedder, or why there is none) the Runtime keeps. It changes
nothing else, so the server can load a new model beside the old one and swap.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.embeddings.base import Embedder, ModelUnavailable
from app.embeddings.catalog import NO_MODEL, get_spec
from app.errors import ConfigError
from app.settings import Settings

# Why a process configured with `embedding.model: none` has no model (readiness, a
# search by meaning): the owner's choice, not a failure.
NO_MODEL_REASON = "no embedding model is configured (embedding.model: none)"


@dataclass(frozen=True)
class LoadedModel:
    """What loading gave: the embedder, or the reason there is none (for readiness)."""

    name: str  # the catalog name asked for, or "none"
    embedder: Embedder | None = None
    problem: str | None = None
    load_seconds: float | None = None

    @property
    def width(self) -> int | None:
        return self.embedder.width if self.embedder is not None else None


def load_model(
    settings: Settings, *, download: bool | None = None, progress: bool = False
) -> LoadedModel:
    """Load the configured model; with none, or one that cannot be had, say why.

    `download` overrides embedding.download. Raises ConfigError only for a name the
    catalog does not know; every other failure is a LoadedModel without an embedder.
    """
    name = settings.embedding.model
    if name == NO_MODEL:
        return LoadedModel(name, problem=NO_MODEL_REASON)
    started = time.perf_counter()
    try:
        embedder = load_embedder(settings, progress=progress, download=download)
    except ModelUnavailable as exc:
        return LoadedModel(name, problem=exc.reason)
    if embedder is None:  # pragma: no cover - load_embedder gives None only for NO_MODEL
        return LoadedModel(name, problem="no embedding model is configured")
    return LoadedModel(name, embedder, load_seconds=time.perf_counter() - started)


def load_embedder(
    settings: Settings,
    *,
    progress: bool = False,
    download: bool | None = None,
    yield_cores: bool | None = None,
) -> Embedder | None:
    """The configured model, loaded; None when embedding.model is "none".

    Fetches missing files when `download` (by default embedding.download) allows it;
    a message about missing files tells which of the two said no. Raises ConfigError for a name the
    catalog doesn't know, ModelUnavailable (with a reason for readiness) when the
    files can't be had or the model won't load. `yield_cores` (by default: whether the
    memory is on a database server) stops the model's threads spinning after each run.
    """
    name = settings.embedding.model
    if name == NO_MODEL:
        return None
    from app.embeddings.fetch import ensure_model_files  # httpx: only when there is a model

    spec = get_spec(name)
    model_dir = ensure_model_files(spec, settings, progress=progress, download=download)
    # Imported here so that `model info` and a server without a model skip onnxruntime.
    from app.embeddings.onnx_embedder import OnnxEmbedder

    try:
        return OnnxEmbedder(
            spec,
            model_dir,
            threads=settings.embedding.threads,
            batch_size=settings.embedding.batch_size,
            # A database server's processes take the cores after each embedding.
            yield_cores=settings.database.url is not None if yield_cores is None else yield_cores,
        )
    except Exception as exc:  # onnxruntime and tokenizers raise their own kinds
        raise ModelUnavailable(
            f"model '{name}' failed to load: {exc.__class__.__name__}: {exc}"
        ) from exc


def model_info(settings: Settings, name: str | None = None) -> dict[str, Any]:
    """What `embornal model info` shows: the model, how it is used, and its files."""
    name = name or settings.embedding.model
    weights_dir = str(settings.dirs.weights_dir)
    if name == NO_MODEL:
        return {
            "name": NO_MODEL,
            "width": None,
            "weights_dir": weights_dir,
            "files": [],
            "complete": True,
            "description": "no model: facts are stored without embeddings",
        }
    from app.embeddings.fetch import model_status

    spec = get_spec(name)
    status = model_status(spec, settings)
    return {
        "name": spec.name,
        "description": spec.description,
        "width": spec.width,
        "pooling": spec.pooling,
        "query_prefix": spec.query_prefix,
        "document_prefix": spec.document_prefix,
        "max_tokens": spec.max_tokens,
        "weights_dir": weights_dir,
        "model_dir": status["dir"],
        "complete": status["complete"],
        "files": status["files"],
    }


def pull_model(settings: Settings, name: str | None = None, progress: bool = True) -> Path:
    """Fetch and verify a model's files (downloading even when embedding.download is off)."""
    name = name or settings.embedding.model
    if name == NO_MODEL:
        raise ConfigError("embedding.model is 'none': there is no model to pull; name one")
    from app.embeddings.fetch import ensure_model_files

    spec = get_spec(name)
    return ensure_model_files(spec, settings, progress=progress, download=True)
