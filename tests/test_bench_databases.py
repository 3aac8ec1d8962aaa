"""The benches' own PostgreSQL runs with the shared_buffers asked (`--shared-buffers`),
and a run without it puts initdb's back: a figure said to be measured at 1 GB is."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from bench.databases import Databases
from tests.scratch import in_memory_parent


def _shared_buffers(databases: Databases) -> str:
    with databases.admin.connect() as conn:
        return str(conn.exec_driver_sql("SHOW shared_buffers").scalar())


@pytest.mark.slow  # starts a PostgreSQL four times
def test_the_bench_server_starts_with_the_shared_buffers_asked_and_without_puts_initdbs_back() -> (
    None
):
    # A short path: the cluster's unix socket lives in its directory (at most 107 bytes).
    # A --home's server is kept by design: this one is the test's to remove.
    with tempfile.TemporaryDirectory(prefix="dbs-", dir=in_memory_parent()) as scratch:
        root = Path(scratch)
        asked = Databases("postgresql", None, root, "64MB")
        try:
            assert _shared_buffers(asked) == "64MB"
            assert "but shared_buffers=64MB" in asked.describe()
        finally:
            asked.close()
        again = Databases("postgresql", None, root)  # the same data directory, kept
        try:
            assert _shared_buffers(again) == "128MB"
            assert "settings as initdb made them)" in again.describe()
        finally:
            again.close()


@pytest.mark.slow
def test_a_temporary_server_started_again_for_its_shared_buffers_is_still_deleted() -> None:
    databases = Databases("postgresql", shared_buffers="96MB")
    data = Path(databases.server.pgdata)
    try:
        assert _shared_buffers(databases) == "96MB"
    finally:
        databases.close()
    assert not data.exists()


@pytest.mark.parametrize("size", ["1 GB", "0MB", "64", "64MB'; SELECT 1; --"])
def test_shared_buffers_must_be_a_size(size: str) -> None:
    with pytest.raises(SystemExit, match="a size such as"):
        Databases("postgresql", shared_buffers=size)


def test_shared_buffers_is_for_the_benchs_own_postgresql() -> None:
    with pytest.raises(SystemExit, match="for --backend postgresql"):
        Databases("sqlite", shared_buffers="1GB")
    with pytest.raises(SystemExit, match="not --database-url's"):
        Databases("postgresql", "postgresql+psycopg://x@/postgres", shared_buffers="1GB")
