"""`embornal memory backup|export|import` as a user runs them: real subprocesses."""

from __future__ import annotations

import json
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_commands import env_for, run

pytestmark = pytest.mark.slow  # starts processes (make test-fast leaves it out)


def test_backup_export_import_round_trip(tmp_path: Path) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    stored = run(source, "memory", "store", "/projects/x", "the sky is blue", "--json")
    assert stored.returncode == 0, stored.stderr
    first = json.loads(stored.stdout)["id"]
    run(source, "memory", "store", "/projects/x", "the sky is grey", "--supersedes", str(first))
    run(source, "memory", "tag", "/projects", "--tag", "team=core")
    run(source, "policy", "add", "p, alice, path:/projects/*, read, allow")

    copy = tmp_path / "copy.db"
    backup = run(source, "memory", "backup", str(copy))
    assert backup.returncode == 0, backup.stderr
    assert "backed up 9 facts" in backup.stdout
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    with sqlite3.connect(copy) as db:  # a plain SQLite file, readable by any tool
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    again = run(source, "memory", "backup", str(copy))
    assert again.returncode == 1 and again.stderr.count("\n") == 1
    assert "--force" in again.stderr and "Traceback" not in again.stderr

    exported = run(source, "memory", "export")
    assert exported.returncode == 0, exported.stderr
    dump = tmp_path / "dump.jsonl"
    to_file = run(source, "memory", "export", str(dump))
    assert to_file.returncode == 0 and "exported 9 facts" in to_file.stdout
    assert dump.read_text() == exported.stdout
    assert stat.S_IMODE(dump.stat().st_mode) == 0o600

    restored = run(target, "memory", "import", str(dump), "--with-policies", "--json")
    assert restored.returncode == 0, restored.stderr
    report = json.loads(restored.stdout)
    assert report["mode"] == "restore" and report["path_tags_added"] == ["/projects team=core"]
    assert "p, alice, path:/projects/*, read, allow" in report["policies_added"]
    assert run(target, "memory", "export").stdout == exported.stdout
    second = run(target, "memory", "import", str(dump))
    assert second.returncode == 0 and second.stdout.startswith("merge: 0 facts added, 9 already")


# `embornal memory backup` that stops once SQLite's online backup is done, while the copy
# is still in its -wal (the whole memory), says so, and waits to be killed.
STALLED_BACKUP = """
import sys
import sqlean
from app.cli import main
from app.db import backup
from app.db.engine import set_up_connection

class Stalls(sqlean.Connection):
    def execute(self, sql, *args):
        if sql == "PRAGMA journal_mode=DELETE":
            print("copied", flush=True)
            sys.stdin.read()
        return super().execute(sql, *args)

def connect_file(path):
    conn = sqlean.connect(
        str(path), isolation_level=None, check_same_thread=False, factory=Stalls
    )
    set_up_connection(conn)
    return conn

backup.connect_file = connect_file
main()
"""


def test_a_backup_killed_mid_copy_is_swept_by_the_next(tmp_path: Path) -> None:
    """SIGKILL leaves the hidden copy and its -wal; the next backup to the same file
    removes them, and its own copy is whole."""
    home = tmp_path / "home"
    assert run(home, "memory", "store", "/projects/x", "the sky is blue").returncode == 0
    copy = tmp_path / "copy.db"
    stalled = subprocess.Popen(
        [sys.executable, "-c", STALLED_BACKUP, "memory", "backup", str(copy)],
        env=env_for(home),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert stalled.stdout is not None
    try:
        assert stalled.stdout.readline() == "copied\n"
    finally:
        stalled.kill()
        stalled.wait(timeout=30)
    left = {p.name: p.stat().st_size for p in tmp_path.iterdir() if p.name != "home"}
    [wal] = [name for name in left if name.endswith("-copy-wal")]
    assert wal.startswith(".copy.db.") and "copy.db" not in left

    again = run(home, "memory", "backup", str(copy))
    assert again.returncode == 0, again.stderr
    assert "backed up 8 facts" in again.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.db", "home"]
    assert left[wal] > copy.stat().st_size  # it held the whole memory
    with sqlite3.connect(copy) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        ({"path": "/ok/then bad"}, "segment 'then bad'"),
        # The third attack: a time that made every later listing a 500, for every reader.
        ({"created_at": 1e308}, "created_at 1e+308 is not a time between 1970"),
    ],
)
def test_a_bad_line_stops_the_import_and_is_named(tmp_path: Path, bad: dict, said: str) -> None:
    home = tmp_path / "home"
    dump = tmp_path / "dump.jsonl"
    assert run(home, "memory", "export", str(dump)).returncode == 0
    lines = dump.read_text().splitlines()
    last = max(i for i, line in enumerate(lines) if '"type":"fact"' in line)
    fact = json.loads(lines[last])
    good = fact | {"id": 100, "content": "a fine fact first"}
    end = json.loads(lines[-1]) | {"facts": json.loads(lines[-1])["facts"] + 2}
    lines[last + 1 : last + 1] = [json.dumps(good), json.dumps(fact | {"id": 101} | bad)]
    lines[-1] = json.dumps(end)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(lines) + "\n")
    before = run(home, "memory", "export").stdout
    result = run(home, "memory", "import", str(broken))
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"error: line {last + 3}: {said}")
    assert run(home, "memory", "export").stdout == before
    assert run(home, "memory", "show", "/").returncode == 0


def test_a_files_policies_are_applied_only_with_policies_and_each_is_named(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    assert run(home, "memory", "store", "/alice/secrets", "the vault code is 0000").returncode == 0
    records = [
        {"type": "embornal-export", "version": 1, "embedding_width": 16},
        {"type": "path", "path": "/alice/secrets", "tags": {"visibility": "public"}},
        {"type": "policy", "line": "g, bob, admin"},
        {"type": "end", "paths": 1, "facts": 0, "policies": 1},
    ]
    file = tmp_path / "gift.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in records))
    plain = run(home, "memory", "import", str(file))
    assert plain.returncode == 0, plain.stderr
    assert "not applied: 1 policy lines and 1 path tags" in plain.stdout
    assert "--with-policies" in plain.stdout
    assert "g, bob, admin" not in run(home, "policy", "list").stdout
    applied = run(home, "memory", "import", str(file), "--with-policies")
    assert applied.returncode == 0, applied.stderr
    assert "policy added: g, bob, admin" in applied.stdout
    assert "path tag added: /alice/secrets visibility=public" in applied.stdout
    assert "g, bob, admin" in run(home, "policy", "list").stdout
