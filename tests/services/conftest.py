"""The service suite runs on both backends."""

from __future__ import annotations

import pytest

from tests.conftest import BACKENDS, both_backends

backend = pytest.fixture(scope="module", params=BACKENDS)(both_backends)
