"""The schema comes from migrations only; they go up, down and up again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from app.acl.scope import fact_scope, tag_token
from app.db import migrate
from app.db.engine import make_engine, read_transaction, write_transaction
from app.db.seed import MEMORY_FACTS
from app.errors import StartupError
from app.runtime import open_runtime
from app.services.vector_index import encode
from tests.conftest import make_settings

EXPECTED = {"paths", "path_closure", "facts", "fact_tags", "path_tags", "meta", "casbin_rule"}


def test_up_down_up(tmp_path: Path) -> None:
    engine = make_engine(tmp_path / "m.db")
    migrate.upgrade(engine, 32)
    with read_transaction(engine) as conn:
        assert set(inspect(conn).get_table_names()) >= EXPECTED
        assert migrate.current_revision(conn) == migrate.head_revision()
        assert migrate.stored_width(conn) == 32
        written = conn.exec_driver_sql(
            "SELECT f.id, p.path, f.content, f.owner, f.supersedes_id, f.deleted_at "
            "FROM facts f JOIN paths p ON p.id = f.path_id ORDER BY f.id"
        ).all()
        assert [tuple(row) for row in written] == [
            (number, "/memory", content, "default", None, None)
            for number, content in enumerate(MEMORY_FACTS, start=1)
        ]
        assert len(written) == 7
        tags = conn.exec_driver_sql(
            "SELECT fact_id, key, value FROM fact_tags ORDER BY fact_id, key"
        ).all()
        assert [tuple(row) for row in tags] == [
            (number, key, value)
            for number in range(1, 8)
            for key, value in (("owner", "default"), ("visibility", "public"))
        ]
    migrate.downgrade(engine)
    with read_transaction(engine) as conn:
        assert not EXPECTED & set(inspect(conn).get_table_names())
        assert (
            conn.exec_driver_sql(
                "SELECT count(*) FROM sqlite_master WHERE name LIKE 'facts_%'"
            ).scalar()
            == 0
        )
    migrate.upgrade(engine, 32)
    with read_transaction(engine) as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM facts").scalar() >= 5
        assert conn.exec_driver_sql("SELECT count(*) FROM casbin_rule").scalar() == 6
    engine.dispose()


TAG_LINE = "SELECT count(*) FROM casbin_rule WHERE ptype = 'p' AND v0 = 'default' " + (
    "AND v1 = 'path:/*' AND v2 = 'tag' AND v3 = 'allow'"
)


def test_0002_gives_default_tag_on_the_whole_tree_and_takes_it_back(tmp_path: Path) -> None:
    engine = make_engine(tmp_path / "m.db")
    migrate.upgrade(engine, 32, "0001")  # a memory made before the `tag` action
    with read_transaction(engine) as conn:
        assert conn.exec_driver_sql(TAG_LINE).scalar() == 0
        version = conn.exec_driver_sql(
            "SELECT value FROM meta WHERE key = 'policy_version'"
        ).scalar()
    migrate.upgrade(engine, 32)
    with read_transaction(engine) as conn:
        assert conn.exec_driver_sql(TAG_LINE).scalar() == 1
        # Running servers reload their rules: the change bumped the version.
        assert (
            conn.exec_driver_sql("SELECT value FROM meta WHERE key = 'policy_version'").scalar()
            != version
        )
    # An owner's own `tag` line survives a downgrade; only the migration's goes.
    with write_transaction(engine) as conn:
        conn.exec_driver_sql(
            "INSERT INTO casbin_rule (ptype, v0, v1, v2, v3) "
            "VALUES ('p', 'alice', 'path:/a/*', 'tag', 'allow')"
        )
    migrate.downgrade(engine, "0001")
    with read_transaction(engine) as conn:
        assert migrate.current_revision(conn) == "0001"
        assert conn.exec_driver_sql(TAG_LINE).scalar() == 0
        assert conn.exec_driver_sql("SELECT count(*) FROM casbin_rule").scalar() == 6
    # Added if absent: an upgrade where the owner already wrote the line adds no twin.
    with write_transaction(engine) as conn:
        conn.exec_driver_sql(
            "INSERT INTO casbin_rule (ptype, v0, v1, v2, v3) "
            "VALUES ('p', 'default', 'path:/*', 'tag', 'allow')"
        )
    migrate.upgrade(engine, 32)
    with read_transaction(engine) as conn:
        assert conn.exec_driver_sql(TAG_LINE).scalar() == 1
    engine.dispose()


def test_start_stops_when_config_and_meta_disagree(tmp_path: Path) -> None:
    open_runtime(make_settings(tmp_path, embedding={"width": 16})).close()
    with pytest.raises(StartupError) as caught:
        open_runtime(make_settings(tmp_path, embedding={"width": 24}))
    assert "24" in caught.value.detail and "16" in caught.value.detail


def test_a_migration_the_database_refuses_stops_the_start_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL's first start, by a role that may not create pgvector in a database
    without it: the driver's reason and what to do, not a traceback with its SQL."""
    from sqlalchemy.exc import ProgrammingError

    def refused(*_args: object, **_kwargs: object) -> None:
        driver = Exception(
            'permission denied to create extension "vector"\n'
            "HINT:  Must have CREATE privilege on current database to create this extension."
        )
        raise ProgrammingError("CREATE EXTENSION IF NOT EXISTS vector", {}, driver)

    monkeypatch.setattr(migrate, "upgrade", refused)
    with pytest.raises(StartupError) as caught:
        open_runtime(make_settings(tmp_path))
    detail = caught.value.detail
    assert detail.startswith("cannot open the memory at ")
    assert 'permission denied to create extension "vector"' in detail
    assert "CREATE EXTENSION vector in that database" in detail
    assert "\n" not in detail and "IF NOT EXISTS" not in detail and "HINT" not in detail


def test_revision_files_follow_the_naming_rule_the_fast_head_check_reads() -> None:
    """migrate.upgrade skips Alembic when the memory is at head_revision(), which reads
    the file names: each file is `<revision>_<slug>.py`, in one numbered line."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(migrate.alembic_config())
    assert migrate.head_revision() == migrate.alembic_head_revision()
    revisions = sorted(scripts.walk_revisions(), key=lambda script: script.revision)
    for script in revisions:
        assert Path(script.path).name.startswith(f"{script.revision}_")
    assert [s.down_revision for s in revisions] == [None, *(s.revision for s in revisions[:-1])]


@pytest.mark.slow  # starts a process
def test_a_memory_at_head_opens_without_importing_alembic(tmp_path: Path) -> None:
    """What every CLI command pays: checked in a fresh interpreter."""
    import subprocess
    import sys

    engine = make_engine(tmp_path / "m.db")
    migrate.upgrade(engine, 32)
    engine.dispose()
    code = (
        "import sys; from app.db import migrate; from app.db.engine import make_engine; "
        f"migrate.upgrade(make_engine({str(tmp_path / 'm.db')!r}), 32); "
        "print('alembic' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_each_database_gets_its_own_cursor_key(tmp_path: Path) -> None:
    """Cursors signed by one memory are worthless to another (migration 0003)."""
    keys = []
    for name in ("one.db", "two.db"):
        engine = make_engine(tmp_path / name)
        migrate.upgrade(engine, 32)
        with read_transaction(engine) as conn:
            keys.append(
                conn.exec_driver_sql("SELECT value FROM meta WHERE key = 'cursor_key'").scalar()
            )
        engine.dispose()
    assert all(len(bytes.fromhex(key)) == 32 for key in keys)
    assert keys[0] != keys[1]


def test_0004_moves_the_vectors_into_codes_and_back(tmp_path: Path) -> None:
    """An existing memory: its vec0 float32 copy becomes one code row per embedded
    fact, and the downgrade rebuilds the vec0 copy from facts.embedding."""
    before = ScriptDirectory.from_config(migrate.alembic_config()).get_revision("0004")
    assert before is not None
    previous = str(before.down_revision)
    engine = make_engine(tmp_path / "m.db")
    migrate.upgrade(engine, 32, revision=previous)
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((40, 32)).astype("<f4")
    with engine.begin() as conn:
        for k, vector in enumerate(vectors):
            fid = conn.exec_driver_sql(
                "INSERT INTO facts (path_id, content, owner, created_at, embedding) "
                "VALUES (1, ?, 'default', 0, ?) RETURNING id",
                (f"fact {k}", vector.tobytes()),
            ).scalar_one()
            conn.exec_driver_sql(
                "INSERT INTO facts_vec (fact_id, embedding) VALUES (?, ?)", (fid, vector.tobytes())
            )
        ids = [
            r[0]
            for r in conn.exec_driver_sql(
                "SELECT id FROM facts WHERE embedding IS NOT NULL ORDER BY id"
            )
        ]
    migrate.upgrade(engine, 32)
    with read_transaction(engine) as conn:
        rows = conn.exec_driver_sql(
            "SELECT fact_id, list, code FROM facts_vec ORDER BY fact_id"
        ).all()
        assert [r[0] for r in rows] == ids
        assert all(r[1] == 0 for r in rows)
        assert [r[2] for r in rows] == [encode(v.reshape(1, -1))[0].tobytes() for v in vectors]
        assert (
            "vec0"
            not in conn.exec_driver_sql(
                "SELECT sql FROM sqlite_master WHERE name = 'facts_vec'"
            ).scalar_one()
        )
    migrate.downgrade(engine, previous)
    with read_transaction(engine) as conn:
        back = conn.exec_driver_sql(
            "SELECT fact_id, embedding FROM facts_vec ORDER BY fact_id"
        ).all()
        assert [r[0] for r in back] == ids
        assert [bytes(r[1]) for r in back] == [v.tobytes() for v in vectors]
        assert not conn.exec_driver_sql(
            "SELECT count(*) FROM sqlite_master WHERE name = 'facts_vec_centroids'"
        ).scalar()
    engine.dispose()


def test_0010_gives_every_fact_its_scope_tokens_in_the_keyword_index(tmp_path: Path) -> None:
    """An existing memory: each fact's tokens written from its path and own tags, the
    FTS5 index rebuilt with them as a second column (a word never matches a token), and
    the downgrade back to the one-column index, its words still found."""
    engine = make_engine(tmp_path / "m.db")
    migrate.upgrade(engine, 32, revision="0009")
    with engine.begin() as conn:
        path_id = conn.exec_driver_sql("SELECT id FROM paths WHERE path = '/memory'").scalar_one()
        fid = conn.exec_driver_sql(
            "INSERT INTO facts (path_id, content, owner, created_at) "
            "VALUES (?, 'kelp harbor', 'alice', 0) RETURNING id",
            (path_id,),
        ).scalar_one()
        conn.exec_driver_sql(
            "INSERT INTO fact_tags (fact_id, key, value) VALUES (?, 'owner', 'alice'), "
            "(?, 'team', 'x')",
            (fid, fid),
        )
    migrate.upgrade(engine, 32)
    held = fact_scope("/memory", {"owner": "alice", "team": "x"})
    with read_transaction(engine) as conn:
        assert conn.exec_driver_sql("SELECT scope FROM facts WHERE id = ?", (fid,)).scalar() == held
        match = "SELECT rowid FROM facts_fts WHERE facts_fts MATCH ?"
        token = tag_token("team", "x")
        assert conn.exec_driver_sql(match, (f"{{scope}} : {token}",)).scalars().all() == [fid]
        starters = conn.exec_driver_sql("SELECT count(*) FROM facts WHERE scope = ''").scalar()
        assert starters == 0  # the /memory facts the migrations wrote have theirs too
        assert conn.exec_driver_sql(match, (f"{{content}} : {token}",)).scalars().all() == []
        assert conn.exec_driver_sql(match, ("{content} : kelp",)).scalars().all() == [fid]
    migrate.downgrade(engine, "0009")
    with read_transaction(engine) as conn:
        assert "scope" not in {c["name"] for c in inspect(conn).get_columns("facts")}
        assert conn.exec_driver_sql(match, ("kelp",)).scalars().all() == [fid]
