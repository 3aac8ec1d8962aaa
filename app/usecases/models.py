"""The embedding model as the owner manages it: fetch its files, describe it, name it.

Switching the memory to a model is Memory.reindex(rebuild=True); loading one is the
Runtime's (app.embeddings.loader.load_model). These verbs run no model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.embeddings import loader
from app.embeddings.base import ModelUnavailable
from app.embeddings.catalog import OFFLINE_MODEL, ModelSpec, get_spec
from app.errors import Unavailable
from app.settings import Settings

__all__ = ["OFFLINE_MODEL", "describe", "pull", "spec"]


def pull(settings: Settings, name: str | None = None) -> Path:
    """Fetch and verify a model's files (downloading even when embedding.download is
    off); Unavailable says why they cannot be had."""
    try:
        return loader.pull_model(settings, name, progress=True)
    except ModelUnavailable as exc:
        raise Unavailable(exc.reason) from None


def describe(settings: Settings, name: str | None = None) -> dict[str, Any]:
    """The model, how it is used, and whether its files are present."""
    return loader.model_info(settings, name)


def spec(name: str) -> ModelSpec:
    """The catalog's entry for `name` (ConfigError naming the known ones if none)."""
    return get_spec(name)
