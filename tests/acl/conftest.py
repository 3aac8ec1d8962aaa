"""One memory file per test module for the differential tests, emptied and refilled
per example (hypothesis runs many examples inside one test call)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from app.acl.enforcer import AccessControl
from app.db.engine import make_engine


@pytest.fixture(scope="module")
def engine(migrated_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    path = tmp_path_factory.mktemp("acl-diff") / "memory.db"
    shutil.copy(migrated_template, path)
    eng = make_engine(path)
    yield eng
    eng.dispose()


@pytest.fixture(scope="module")
def control(engine: Engine) -> AccessControl:
    # One for the module: each example's policy writes bump the version it reloads on.
    return AccessControl(engine)
