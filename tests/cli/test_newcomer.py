"""A CLI as careful as the API (issue 31): `memory list`, plain text, clean help, and
the model a server says it chose."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer.main

from app import cli
from app.embeddings.catalog import CATALOG
from app.settings import Settings
from tests.cli.conftest import Invoke
from tests.conftest import TINY

GARDEN = [
    ("/garden/beds", "beans grow by the south wall", "kind=plan"),
    ("/garden/beds", "the leeks went in on the first of May", "kind=log"),
    ("/garden", "compost turns every second week", "kind=plan"),
    ("/garden/shed", "the rake hangs left of the door", "kind=where"),
    ("/kitchen", "the kettle is blue", "kind=where"),
]


def store_all(invoke: Invoke, times: list[str] | None = None) -> list[int]:
    """Store GARDEN; their ids, and (into `times`) when each was created."""
    ids = []
    for path, content, tag in GARDEN:
        done = invoke("memory", "store", path, content, "--tag", tag, "--json")
        assert done.exit_code == 0, done.output
        ids.append(json.loads(done.stdout)["id"])
        if times is not None:
            times.append(json.loads(done.stdout)["created_at"])
    return ids


def listed(invoke: Invoke, *args: str) -> tuple[list[int], list[str]]:
    """Every page of `memory list ARGS --json`, following next_cursor."""
    ids: list[int] = []
    cursors: list[str] = []
    cursor: list[str] = []
    while True:
        done = invoke("memory", "list", *args, *cursor, "--json")
        assert done.exit_code == 0, done.output
        page = json.loads(done.stdout)
        ids += [f["id"] for f in page["facts"]]
        if not page["next_cursor"]:
            return ids, cursors
        cursors.append(page["next_cursor"])
        cursor = ["--cursor", page["next_cursor"]]


def test_memory_list_pages_the_listing_rest_gives(
    cli_env: Settings, invoke: Invoke, client: Any, auth: Any
) -> None:
    times: list[str] = []
    ids = store_all(invoke, times)
    ours, cursors = listed(invoke, "--under", "/garden", "--limit", "2")
    assert len(cursors) == 1  # four facts, two a page
    rest = client.get("/v1/facts", params={"under": "/garden"}, headers=auth("default")).json()
    assert ours == [f["id"] for f in rest["facts"]] == ids[3::-1]
    tagged, _ = listed(invoke, "--under", "/", "--tag", "kind=where")
    assert tagged == [ids[4], ids[3]]
    recalled = invoke("memory", "get", str(ids[0]))  # a recall: now the strongest
    assert recalled.exit_code == 0
    strongest, _ = listed(invoke, "--under", "/garden", "--sort", "strength", "--limit", "1")
    assert strongest[0] == ids[0]
    then, _ = listed(invoke, "--under", "/garden", "--as-of", times[1])
    assert then == [ids[1], ids[0]]


def test_memory_list_speaks_plainly(cli_env: Settings, invoke: Invoke) -> None:
    ids = store_all(invoke)
    page = invoke("memory", "list", "--under", "/garden", "--limit", "2")
    assert page.exit_code == 0, page.output
    lines = page.stdout.splitlines()
    assert lines[0].startswith(f"#{ids[3]} /garden/shed  strength ")
    assert lines[-1].startswith("more: the same command with --cursor ")
    cursor = lines[-1].rsplit(" ", 1)[1]
    rest = invoke("memory", "list", "--under", "/garden", "--limit", "2", "--cursor", cursor)
    assert f"#{ids[0]} /garden/beds" in rest.stdout and "more:" not in rest.stdout
    none = invoke("memory", "list", "--under", "/garden", "--tag", "kind=gone")
    assert none.stdout == "no facts under /garden tagged kind=gone\n"
    bad = invoke("memory", "list", "--sort", "oldest")
    assert bad.exit_code == 1 and str(bad.exception) == "--sort must be created or strength"


def test_a_search_without_results_says_so(cli_env: Settings, invoke: Invoke) -> None:
    store_all(invoke)
    empty = invoke("memory", "search", "submarine", "--mode", "keyword")
    assert empty.exit_code == 0
    assert empty.stdout == "no facts match 'submarine' (keyword search)\n"
    found = invoke("memory", "search", "kettle", "--mode", "keyword")
    assert found.stdout.startswith("1 found (keyword search)\nscore ")


# What a Python object looks like when it was printed instead of said.
REPR = re.compile(r"\{'|\['|': |\bNone\b|\bTrue\b|\bFalse\b|<[a-zA-Z_.]+ object at")


def test_no_command_prints_a_python_repr(cli_env: Settings, invoke: Invoke) -> None:
    store_all(invoke)
    commands: list[tuple[str, ...]] = [
        ("memory", "tag", "/garden", "--tag", "visibility=public"),
        ("memory", "tag", "/garden/beds", "--tag", "kind=bed"),
        ("memory", "tag", "/garden", "--remove", "visibility"),
        ("memory", "show", "/garden"),
        ("memory", "list"),
        ("memory", "search", "kettle"),
        ("memory", "store", "/notes", "a note"),
        ("memory", "history", "1"),
        ("policy", "list"),
        ("paths",),
        *[("model", "info", name) for name in (*CATALOG, "none")],
        ("model", "info"),
    ]
    for args in commands:
        done = invoke(*args)
        assert done.exit_code == 0, (args, done.output)
        assert not REPR.search(done.stdout), (args, done.stdout)
    tagged = invoke("memory", "tag", "/garden/shed", "--tag", "k=v")
    assert tagged.stdout == "/garden/shed  tags: k=v\n"
    info = invoke("model", "info", "minilm-l6").stdout
    assert "query_prefix: none\n" in info and "complete: " in info
    assert re.search(r"^file model\.onnx: (missing|present|verified), 21\.9 MB, ", info, re.M)


def commands(group: Any, path: tuple[str, ...] = ("embornal",)) -> Any:
    yield path, group
    for name, sub in getattr(group, "commands", {}).items():
        yield from commands(sub, (*path, name))


def test_help_says_one_line_per_command_and_option() -> None:
    """Rich keeps a docstring's line breaks: a summary spread over two lines broke
    mid-sentence in the command lists (`mcp`, `ui`, `memory show`)."""
    for path, command in commands(typer.main.get_command(cli.app)):
        summary = (command.help or "").strip().split("\n\n")[0]
        assert summary and "\n" not in summary, (path, summary)
        assert summary.endswith("."), (path, summary)
        for param in command.params:
            text = getattr(param, "help", None) or ""
            assert "\n" not in text, (path, param.name, text)


def test_help_lists_each_command_with_its_whole_summary() -> None:
    from typer.testing import CliRunner

    root = typer.main.get_command(cli.app)
    for args in ((), ("memory",), ("model",), ("policy",), ("token",)):
        group = root.commands[args[0]] if args else root
        # Wide enough for any summary: each command is then one row of the panel.
        shown = CliRunner().invoke(cli.app, [*args, "--help"], env={"COLUMNS": "200"}).stdout
        rows = {
            match.group(1): match.group(2).strip()
            for match in re.finditer(r"^│ ([a-z-]+) {2,}(.+?) *│$", shown, re.M)
        }
        for name, command in group.commands.items():
            assert rows[name] == (command.help or "").split("\n\n")[0].strip(), (args, name)


@pytest.fixture
def unnamed_env(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The CLI on a new memory whose config names no model; the hub is unreachable."""
    for name in list(os.environ):
        if name.startswith(("EMBORNAL_", "XDG_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("EMBORNAL_HOME", str(home))
    monkeypatch.setenv("EMBORNAL_EMBEDDING__HUB_URL", "http://127.0.0.1:9")
    monkeypatch.setattr(cli.state, "settings", None)
    return home


def test_serve_says_once_which_model_it_fell_back_to(
    unnamed_env: Path, tiny_model: Any, monkeypatch: pytest.MonkeyPatch, invoke: Invoke
) -> None:
    import uvicorn

    monkeypatch.setattr("app.runtime.OFFLINE_MODEL", TINY)
    monkeypatch.setattr(uvicorn, "run", lambda _app, **_options: None)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    first = invoke("serve", "--port", str(port))
    assert first.exit_code == 0, first.output
    (line,) = [x for x in first.output.splitlines() if "bge-base-en-v1.5" in x]
    assert line.startswith("bge-base-en-v1.5 cannot be fetched (")
    assert f"the offline model {TINY}" in line
    assert line.endswith("embornal model use bge-base-en-v1.5")
    second = invoke("serve", "--port", str(port))
    assert [x for x in second.output.splitlines() if TINY in x] == [
        f"embedding with {TINY}, the model of this memory's vectors; to move to the "
        "default, bge-base-en-v1.5: embornal model use bge-base-en-v1.5"
    ]
    # Commands that load no model open the memory at its width, and say whose it is.
    info = invoke("model", "info")
    assert info.exit_code == 0, info.output
    assert info.stdout.startswith(f"this memory embeds with {TINY} ")
    # The switch the note names, while the default still cannot be fetched: refused
    # before config.yaml names a model the memory could not start with.
    switch = invoke("model", "use", "bge-base-en-v1.5")
    assert switch.exit_code == 1 and "cannot download model.onnx" in str(switch.exception)
    assert not (unnamed_env / "config.yaml").exists()
    assert invoke("memory", "list", "--limit", "1").exit_code == 0


@pytest.mark.slow  # a real server process and the real offline model
def test_a_fresh_memory_with_no_network_serves_semantic_search(tmp_path: Path) -> None:
    """What `make run` does on a fresh clone with no network: no second command."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EMBORNAL_", "XDG_"))}
    env |= {"EMBORNAL_HOME": str(tmp_path), "EMBORNAL_EMBEDDING__HUB_URL": "http://127.0.0.1:9"}
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        ready = wait_for(base, "/readyz", server)
        assert ready["model"] == {"loaded": True, "name": "minilm-l6", "reason": None}
        token = subprocess.run(
            [sys.executable, "-m", "app.cli", "token", "issue", "--subject", "default"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
            stored = client.post("/v1/facts", json={"path": "/pets", "content": CAT})
            assert stored.status_code == 201 and stored.json()["embedded"], stored.text
            found = client.get("/v1/search", params={"q": "kitten napping", "mode": "semantic"})
        assert found.status_code == 200, found.text
        assert found.json()["results"][0]["fact"]["content"] == CAT
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=15)
    assert output.count("embeds with the offline model minilm-l6") == 1, output


CAT = "our office cat sleeps on the printer"


def wait_for(base: str, route: str, server: subprocess.Popen[str]) -> dict:
    deadline = time.monotonic() + 60
    with httpx.Client(base_url=base, timeout=2) as client:
        while time.monotonic() < deadline:
            if server.poll() is not None:
                raise AssertionError(server.communicate()[0])
            try:
                response = client.get(route)
                if response.status_code == 200:
                    return dict(response.json())
            except httpx.TransportError:
                pass  # not listening yet
            time.sleep(0.1)  # a poll interval, not a wait for something to happen
    raise AssertionError(f"{route} not ready within 60 s")
