"""What a new user met on the command line, each held by a test (issue 9)."""

from __future__ import annotations

import json
import socket
import stat
from pathlib import Path

import pytest
import sqlean
from sqlalchemy import func, select

from app import cli
from app.db.tables import facts, meta
from app.embeddings import loader
from app.embeddings.fake import FakeEmbedder
from app.embeddings.loader import LoadedModel
from app.errors import ConfigError, EmbornalError
from app.settings import Settings
from tests.cli.conftest import Invoke
from tests.conftest import TEST_WIDTH, TINY


class LockProbe(FakeEmbedder):
    """An embedder that, while it runs, takes SQLite's write lock from a connection of
    its own: it can only when nobody (the command itself included) holds it."""

    def __init__(self, database: Path) -> None:
        super().__init__(TEST_WIDTH)
        self.database = database
        self.lock_was_free: list[bool] = []

    def _probe(self) -> None:
        conn = sqlean.connect(str(self.database), timeout=0, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            self.lock_was_free.append(True)
        except sqlean.OperationalError:
            self.lock_was_free.append(False)
        finally:
            conn.close()

    def embed_query(self, text: str):  # type: ignore[no-untyped-def]
        self._probe()
        return super().embed_query(text)

    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        self._probe()
        return super().embed_documents(texts)


@pytest.fixture
def probe(cli_env: Settings, monkeypatch: pytest.MonkeyPatch) -> LockProbe:
    """The CLI's model, whatever config says: a LockProbe on the test memory."""
    embedder = LockProbe(cli_env.database_path)
    monkeypatch.setattr(
        loader, "load_model", lambda *_a, **_k: LoadedModel(embedder.name, embedder)
    )
    return embedder


def test_search_and_store_never_hold_the_write_lock_while_the_model_runs(
    probe: LockProbe, invoke: Invoke
) -> None:
    stored = invoke("memory", "store", "/lock", "the model runs with no lock held", "--json")
    assert stored.exit_code == 0, stored.output
    found = invoke("memory", "search", "lock held", "--mode", "semantic", "--json")
    assert found.exit_code == 0, found.output
    assert json.loads(stored.stdout)["embedded"] is True
    assert json.loads(found.stdout)["mode"] == "semantic"
    assert probe.lock_was_free == [True, True]  # the store's documents, the search's query


def test_a_refused_store_creates_nothing_and_loads_no_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, invoke: Invoke
) -> None:
    home = tmp_path / "new-user"
    monkeypatch.setenv("EMBORNAL_HOME", str(home))

    def no_model(*_args: object, **_kwargs: object) -> LoadedModel:
        raise AssertionError("a refused store loaded the model")

    monkeypatch.setattr(loader, "load_model", no_model)
    result = invoke("memory", "store", "/Bad Path", "text")
    assert isinstance(result.exception, EmbornalError)
    assert "segment 'bad path'" in result.exception.detail
    assert not (home / "memory.db").exists()
    assert not home.exists() or list(home.iterdir()) == []


def test_show_lists_every_fact_at_the_path_however_many_sit_below(
    cli_env: Settings, invoke: Invoke
) -> None:
    # The facts at the node come first: newest first, the 60 stored below them after
    # fill more than a page (50) of the subtree, which is where `show` looked before.
    for i in range(3):
        assert invoke("memory", "store", "/topic", f"at the node {i}").exit_code == 0
    for i in range(60):
        assert invoke("memory", "store", f"/topic/sub{i % 3}", f"below {i}").exit_code == 0
    shown = invoke("memory", "show", "/topic", "--json")
    assert shown.exit_code == 0, shown.output
    node = json.loads(shown.stdout)
    assert sorted(f["content"] for f in node["facts"]) == [f"at the node {i}" for i in range(3)]
    assert node["fact_count"] == 3
    assert [(c["path"], c["fact_count"]) for c in node["children"]] == [
        ("/topic/sub0", 20),
        ("/topic/sub1", 20),
        ("/topic/sub2", 20),
    ]


def test_a_refused_rebuild_leaves_the_memory_as_it_was(
    cli_env: Settings, invoke: Invoke, tiny_model, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert invoke("memory", "store", "/kept", "a fact with a vector").exit_code == 0

    def state() -> tuple[list[tuple[str, str]], int, int]:
        from app.runtime import open_engine

        engine = open_engine(cli_env)
        try:
            with engine.connect() as conn:
                rows = conn.execute(select(meta.c.key, meta.c.value).order_by(meta.c.key)).all()
                waiting = conn.execute(
                    select(func.count()).select_from(facts).where(facts.c.embedding.is_(None))
                ).scalar_one()
                vectors = conn.exec_driver_sql("SELECT count(*) FROM facts_vec").scalar_one()
        finally:
            engine.dispose()
        return [tuple(r) for r in rows], waiting, vectors

    before = state()
    # The tiny model gives 32-d vectors; config (and the memory) say 64.
    monkeypatch.setenv("EMBORNAL_EMBEDDING__MODEL", TINY)
    refused = invoke("memory", "reindex", "--rebuild")
    assert isinstance(refused.exception, EmbornalError)
    assert "gives 32-d vectors but config.yaml says embedding.width: 64" in (
        refused.exception.detail
    )
    assert state() == before


def test_serve_on_a_busy_port_says_so_in_one_line(cli_env: Settings, invoke: Invoke) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = invoke("serve", "--port", str(port))
    assert isinstance(result.exception, EmbornalError)
    assert result.exception.detail == (
        f"port {port} on 127.0.0.1 is in use (another server?); "
        "choose another with --port or server.port"
    )


def test_serve_on_a_host_that_does_not_resolve_says_so_in_one_line(
    cli_env: Settings, invoke: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uvicorn logged its own lines and exited 3; the resolver is stubbed, so that no
    test waits on a DNS server."""

    def unknown(host: str, *_args: object, **_kwargs: object) -> list[object]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unknown)
    result = invoke("serve", "--host", "999.1.1.1", "--port", "8534")
    assert isinstance(result.exception, EmbornalError)  # main(): one line, exit 1
    assert result.exception.detail == "cannot listen on 999.1.1.1:8534: Name or service not known"


def test_a_database_path_naming_a_text_file_is_refused_in_one_line(
    cli_env: Settings, invoke: Invoke, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """It was made 0600, then SQLAlchemy's traceback said "file is not a database"."""
    notes = tmp_path / "notes.txt"
    notes.write_text("milk, eggs, bread\n")
    notes.chmod(0o644)
    monkeypatch.setenv("EMBORNAL_DATABASE__PATH", str(notes))
    result = invoke("memory", "list")
    assert isinstance(result.exception, ConfigError)  # main(): one line, exit 1
    assert result.exception.detail == f"database.path: {notes} is not a SQLite database"
    assert stat.S_IMODE(notes.stat().st_mode) == 0o644


def test_migrate_says_what_it_did(cli_env: Settings, invoke: Invoke) -> None:
    """It said "at the head revision" after upgrading an older memory too."""
    from app.db import migrate
    from app.db.engine import make_engine

    head = migrate.head_revision()
    made = invoke("migrate")  # the test's memory, made at head already
    assert made.exit_code == 0 and f"is at the head revision ({head})" in made.stdout
    engine = make_engine(cli_env.database_path)
    migrate.downgrade(engine, "0012")
    engine.dispose()
    upgraded = invoke("migrate")
    assert upgraded.exit_code == 0
    assert f"upgraded from revision 0012 to {head}" in upgraded.stdout
    cli_env.database_path.unlink()
    new = invoke("migrate")
    assert f"is new, made at the head revision ({head})" in new.stdout


def test_version(invoke: Invoke) -> None:
    from app import __version__

    result = invoke("--version")
    assert result.exit_code == 0 and result.stdout == f"embornal {__version__}\n"


def test_the_offline_hint_names_a_command_that_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda _name: None)
    monkeypatch.setattr("sys.argv", ["/opt/venv/bin/embornal-not-here"])
    hint = cli.offline_hint()
    command = hint.removeprefix("For the offline model, run: ").removesuffix(" model use minilm-l6")
    assert command != "embornal"  # not on PATH: a path the user can paste
    assert Path(command.split(" ")[0]).is_file()
    monkeypatch.setattr("shutil.which", lambda _name: "/usr/local/bin/embornal")
    assert cli.offline_hint() == "For the offline model, run: embornal model use minilm-l6"


def test_json_from_the_cli_is_what_the_api_returns(
    cli_env: Settings, invoke: Invoke, client, auth
) -> None:
    stored = invoke("memory", "store", "/same", "one shape [[/memory]]", "--tag", "k=v", "--json")
    fact = json.loads(stored.stdout)
    over_http = client.get(
        f"/v1/facts/{fact['id']}", params={"peek": "true"}, headers=auth("default")
    ).json()
    from_cli = json.loads(invoke("memory", "get", str(fact["id"]), "--peek", "--json").stdout)
    # The app runs on the tests' clock, the CLI on the real one: strength is of the clock.
    assert from_cli.pop("strength") == pytest.approx(1.0, abs=1e-3)
    over_http.pop("strength")
    assert from_cli == over_http
    assert from_cli["created_at"].endswith("Z") and from_cli["links"] == [
        {"path": "/memory", "exists": True}
    ]
    node_http = client.get("/v1/paths/same", headers=auth("default")).json()
    node_cli = json.loads(invoke("memory", "show", "/same", "--json").stdout)
    assert {k: v for k, v in node_cli.items() if k not in ("facts", "next_cursor")} == node_http
    (listed,) = node_cli["facts"]
    listed.pop("strength")
    assert listed == over_http and node_cli["next_cursor"] is None


def test_serve_without_its_model_says_the_offline_command_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, invoke: Invoke
) -> None:
    import uvicorn

    monkeypatch.setenv("EMBORNAL_HOME", str(tmp_path / "fresh"))
    monkeypatch.setenv("EMBORNAL_EMBEDDING__MODEL", "bge-base-en-v1.5")
    monkeypatch.setenv("EMBORNAL_EMBEDDING__WIDTH", "768")
    monkeypatch.setenv("EMBORNAL_EMBEDDING__DOWNLOAD", "false")  # its files are not here
    monkeypatch.setattr(uvicorn, "run", lambda _app, **_options: None)
    with socket.socket() as free:  # a port nobody listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    result = invoke("serve", "--port", str(port))
    assert result.exit_code == 0, result.output
    assert result.output.count("model use minilm-l6") == 1
    assert result.output.count("no embedding model") == 1


def test_memory_tag_keeps_a_node_within_32_tags_and_a_key_said_once(
    cli_env: Settings, invoke: Invoke
) -> None:
    full = [arg for i in range(32) for arg in ("--tag", f"k{i}=v")]
    assert invoke("memory", "tag", "/a", *full).exit_code == 0
    more = invoke("memory", "tag", "/a", "--tag", "extra=v").exception
    assert isinstance(more, EmbornalError) and "/a would carry 33 tags" in more.detail
    twice = invoke("memory", "tag", "/b", "--tag", "Team=a", "--tag", "team=b").exception
    assert isinstance(twice, EmbornalError) and "tag 'team' is given twice" in twice.detail
    shown = invoke("memory", "show", "/a", "--json")
    assert len(json.loads(shown.stdout)["tags"]) == 32
