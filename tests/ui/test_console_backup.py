"""The console's backup download: made beside the memory under a hidden name its
process locks, sent from there, gone once the download has ended (sent whole or cut
off), and, after a kill, gone with the next download or the server's next start."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.db.backup import DOWNLOAD, sweep_download_copies
from app.runtime import Runtime
from app.settings import Settings
from app.ui.pages import SESSION_COOKIE
from app.usecases.memory import NewFact
from tests.conftest import BACKENDS, both_backends
from tests.db.test_backup import killed_backup
from tests.test_files import held
from tests.ui.conftest import Browser

backend = pytest.fixture(scope="module", params=BACKENDS)(both_backends)


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The process's temporary directory (/tmp) for the test: nothing may be left there."""
    folder = tmp_path / "scratch"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.fixture
def pg_dump_on_path(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if backend == "postgresql":
        import pgserver

        # The wheel's pg_dump matches its server; a machine's older one would refuse it.
        tools = Path(pgserver.__file__).parent / "pginstall" / "bin"
        monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")


def hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def downloading(
    person: Browser, *, at_first_chunk: Callable[[], None], cut: str | None = None
) -> tuple[int, bytes]:
    """GET /ui/backup as the ASGI server calls the app (the test client would hand back
    only the finished response): `at_first_chunk` runs while the body is being sent.
    `cut`: the client goes away after the first chunk, as uvicorn says it ("disconnect",
    the sending cancelled) or as a server on ASGI 2.4 does ("send fails")."""
    app = person.client.app
    cookie = person.client.cookies.get(SESSION_COOKIE)
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/ui/backup",
        "raw_path": b"/ui/backup",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"testserver"), (b"cookie", f"{SESSION_COOKIE}={cookie}".encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    status, body = 0, bytearray()

    async def run() -> None:
        first_chunk, never = anyio.Event(), anyio.Event()
        asked = 0

        async def receive() -> dict[str, Any]:
            nonlocal asked
            asked += 1
            if asked == 1:
                return {"type": "http.request", "body": b"", "more_body": False}
            if cut == "disconnect":
                await first_chunk.wait()
                return {"type": "http.disconnect"}
            await never.wait()
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                if not first_chunk.is_set():
                    first_chunk.set()
                    at_first_chunk()
                    if cut == "send fails":
                        raise OSError("the client has gone")
                    if cut == "disconnect":
                        await never.wait()  # until the disconnect cancels the sending
                body.extend(message["body"])

        await app(scope, receive, send)

    anyio.run(run)
    return status, bytes(body)


def test_a_download_is_made_beside_the_memory_and_gone_once_sent(
    browser: Callable[..., Browser],
    actor,
    settings: Settings,
    backend: str,
    pg_dump_on_path: None,
    scratch: Path,
    tmp_path: Path,
) -> None:
    actor("default").memory.store("default", NewFact("/notes", "backed up"))
    folder = settings.dirs.data_dir
    seen: list[str] = []

    def while_sent() -> None:
        seen.extend(hidden(folder))
        for name in seen:
            assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600, name
        sweep_download_copies(folder)  # its process holds it: a sweep leaves it
        assert hidden(folder) == seen
        assert list(scratch.iterdir()) == []  # nothing in /tmp

    status, body = downloading(browser("default"), at_first_chunk=while_sent)
    assert status == 200
    [tmp, copy] = [name for name in seen if name.startswith(f".{DOWNLOAD}.")]
    assert tmp.endswith(".tmp") and copy == f"{tmp}-copy"
    assert hidden(folder) == [n for n in seen if not n.startswith(f".{DOWNLOAD}.")]
    assert list(scratch.iterdir()) == []
    if backend == "postgresql":
        assert body[:5] == b"PGDMP"  # pg_restore's custom format
        return
    kept = tmp_path / "copy.db"
    kept.write_bytes(body)
    with sqlite3.connect(kept) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        contents = [row[0] for row in db.execute("SELECT content FROM facts")]
    assert "backed up" in contents


@pytest.mark.only_backend("sqlite")
@pytest.mark.parametrize("cut", ["disconnect", "send fails"])
def test_a_download_cut_off_leaves_nothing(
    browser: Callable[..., Browser], settings: Settings, scratch: Path, cut: str
) -> None:
    folder = settings.dirs.data_dir
    before = hidden(folder)
    during: list[str] = []
    try:
        downloading(
            browser("default"), at_first_chunk=lambda: during.extend(hidden(folder)), cut=cut
        )
    except OSError:
        assert cut == "send fails"
    assert len(during) == len(before) + 2  # the locked file and the copy
    assert hidden(folder) == before
    assert list(scratch.iterdir()) == []


@pytest.mark.only_backend("sqlite")
def test_a_killed_downloads_copy_goes_with_the_next_download(
    browser: Callable[..., Browser], settings: Settings
) -> None:
    folder = settings.dirs.data_dir
    before = hidden(folder)
    killed = killed_backup(folder, DOWNLOAD)
    running = killed_backup(folder, DOWNLOAD, "runn1ng_")
    with held(running[0]):
        response = browser("default").get("/ui/backup")
        assert response.status_code == 200 and response.content[:15] == b"SQLite format 3"
        assert not any(path.exists() for path in killed)
        assert all(path.exists() for path in running)  # another server's, still sending
    assert sorted(set(hidden(folder)) - {p.name for p in running}) == before


@pytest.mark.slow  # starts a process
@pytest.mark.only_backend("sqlite")
def test_a_download_killed_while_sent_is_swept_at_the_servers_next_start(
    app: FastAPI, rt: Runtime, settings: Settings
) -> None:
    """SIGKILL while the copy is being sent (the server holds it, and its lock) leaves the
    hidden copy of the whole memory beside it; the next start removes it."""
    folder = settings.dirs.data_dir
    before = hidden(folder)
    sending = subprocess.Popen(
        [sys.executable, "-c", SENDING, str(settings.dirs.data_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert sending.stdout is not None
    try:
        copy = Path(sending.stdout.readline().strip())
    finally:
        sending.kill()
        sending.wait(timeout=30)
    assert copy.parent == folder and copy.name.startswith(f".{DOWNLOAD}.")
    with sqlite3.connect(copy) as db:  # the whole memory, left behind
        assert db.execute("SELECT count(*) FROM facts").fetchone()[0] > 0
    assert len(hidden(folder)) == len(before) + 2
    with TestClient(app):  # the server starts
        assert hidden(folder) == before


# The console's backup as the server holds it while the download is sent: made, then
# waiting (for the kill) with the copy and its lock held. The memory is the test's.
SENDING = """
import sys
from pathlib import Path
from app.runtime import open_runtime
from app.usecases.memory import Memory
from tests.conftest import make_settings

rt = open_runtime(make_settings(Path(sys.argv[1])))
with Memory(rt).backup_to_send("default") as copy:
    print(copy, flush=True)
    sys.stdin.read()
"""
