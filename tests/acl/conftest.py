"""The ACL suite runs on both backends. The differential tests share one memory per
module and backend, emptied and refilled per example (hypothesis runs many examples
inside one test call)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from app.acl.enforcer import AccessControl
from app.db.engine import make_engine
from tests.conftest import BACKENDS, both_backends

backend = pytest.fixture(scope="module", params=BACKENDS)(both_backends)


@pytest.fixture(scope="module")
def engine(
    backend: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    """One memory per backend: the fragment must mean the same in either SQL."""
    if backend == "postgresql":
        server = request.getfixturevalue("postgres")
        url = server.new_database()
        eng = make_engine(url)
        yield eng
        eng.dispose()
        server.drop_database(url)
        return
    path = tmp_path_factory.mktemp("acl-diff") / "memory.db"
    shutil.copy(request.getfixturevalue("migrated_template"), path)
    eng = make_engine(path)
    yield eng
    eng.dispose()


@pytest.fixture(scope="module")
def control(engine: Engine) -> AccessControl:
    # One for the module: each example's policy writes bump the version it reloads on.
    return AccessControl(engine)
