"""What every connection to a memory file is set up with: WAL, and reads through a
memory map that another connection's commits show through at once; and which pooled
connection a request gets, on both backends."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Connection, text

from app.db.engine import (
    MMAP_BYTES,
    WRITE,
    make_engine,
    read_transaction,
    write_transaction,
)


def read(conn: Connection, sql: str) -> object:
    """`sql`'s value in a read snapshot of its own."""
    with conn.begin():
        return conn.exec_driver_sql(sql).scalar()


def test_a_connection_reads_through_a_map_and_sees_another_connections_commit(
    tmp_path: Path,
) -> None:
    engine = make_engine(tmp_path / "memory.db")
    try:
        with engine.connect() as reader, engine.connect() as writer:
            writer.execution_options(sqlite_begin=WRITE)
            assert read(reader, "PRAGMA journal_mode") == "wal"
            assert read(reader, "PRAGMA mmap_size") == MMAP_BYTES
            with writer.begin():
                writer.exec_driver_sql("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
                # Enough rows that the table spans pages the reader has mapped before.
                writer.execute(
                    text("INSERT INTO notes (body) VALUES (:body)"),
                    [{"body": f"note {n} " + "x" * 200} for n in range(2000)],
                )
            assert read(reader, "SELECT count(*) FROM notes") == 2000
            with writer.begin():
                writer.exec_driver_sql("UPDATE notes SET body = 'changed' WHERE id = 1500")
                writer.exec_driver_sql("DELETE FROM notes WHERE id > 1900")
            assert read(reader, "SELECT body FROM notes WHERE id = 1500") == "changed"
            assert read(reader, "SELECT count(*) FROM notes") == 1900
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_one_request_after_another_gets_the_connection_used_last(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # A search reads on one connection and writes its recalls on another; a pool that
    # handed out the longest idle one would rotate through them all, and each read would
    # land on a connection whose page cache SQLite empties (another one wrote since).
    if backend == "sqlite":
        engine, url = make_engine(tmp_path / "memory.db"), None
    else:
        server = request.getfixturevalue("postgres")
        url = server.new_database()
        engine = make_engine(url)
    try:
        held = [engine.connect() for _ in range(3)]  # the pool now holds three
        for conn in held:
            conn.close()
        used = []
        for _ in range(3):
            with write_transaction(engine) as conn:
                used.append(conn.connection.driver_connection)
            with read_transaction(engine) as conn:
                used.append(conn.connection.driver_connection)
        assert all(c is used[0] for c in used)
    finally:
        engine.dispose()
        if url is not None:
            server.drop_database(url)
