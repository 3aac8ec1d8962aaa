"""The `embornal` command as a user runs it: a real subprocess on a temp home."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts processes (make test-fast leaves it out)


def env_for(home: Path) -> dict[str, str]:
    """The environment of an `embornal` on `home`: no model, the test width."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EMBORNAL_", "XDG_"))}
    env |= {"HOME": str(home), "EMBORNAL_EMBEDDING__MODEL": "none"}
    env["EMBORNAL_EMBEDDING__WIDTH"] = "16"
    return env


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        env=env_for(home),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path


def test_store_get_show_history_delete(home: Path) -> None:
    stored = run(
        home, "memory", "store", "/Projects/X", "the sky is blue", "--tag", "k=v", "--json"
    )
    assert stored.returncode == 0, stored.stderr
    fact = json.loads(stored.stdout)
    assert fact["path"] == "/projects/x" and fact["tags"] == {"k": "v", "owner": "default"}

    got = json.loads(run(home, "memory", "get", str(fact["id"]), "--json").stdout)
    assert got["recall_count"] == 1  # a get by id is a recall
    peeked = json.loads(run(home, "memory", "get", str(fact["id"]), "--peek", "--json").stdout)
    assert peeked["recall_count"] == 1

    newer = run(
        home,
        "memory",
        "store",
        "/projects/x",
        "the sky is grey",
        "--supersedes",
        str(fact["id"]),
        "--json",
    )
    chain = json.loads(run(home, "memory", "history", str(fact["id"]), "--json").stdout)
    assert [f["content"] for f in chain["facts"]] == ["the sky is blue", "the sky is grey"]

    shown = run(home, "memory", "show", "/projects")
    assert "/projects/x" in shown.stdout
    new_id = json.loads(newer.stdout)["id"]
    assert run(home, "memory", "delete", str(new_id)).returncode == 0
    again = run(home, "memory", "delete", str(new_id))
    assert again.returncode == 1 and again.stderr.count("\n") == 1
    assert "Traceback" not in again.stderr


def test_user_errors_are_one_line_and_exit_1(home: Path) -> None:
    for args in (
        ("memory", "store", "/Bad Path", "x"),
        ("memory", "store", "/x", "y", "--tag", "owner=me"),
        ("memory", "get", "999999"),
        ("memory", "get", "not-a-number"),
        ("policy", "add", "p, alice, file:/etc, read, allow"),
    ):
        result = run(home, *args)
        assert result.returncode == 1, (args, result.stdout, result.stderr)
        assert result.stderr.startswith("error:") and "Traceback" not in result.stderr


def test_paths_and_legacy_move(home: Path) -> None:
    old = home / ".embornal"
    old.mkdir()
    (old / "config.yaml").write_text("server: {port: 9001}\n")
    first = run(home, "paths", "--json")
    assert first.returncode == 0
    assert "moved" in first.stderr and "config.yaml" in first.stderr
    places = json.loads(first.stdout)
    assert places["config"] == str(home / ".config" / "embornal" / "config.yaml")
    assert places["database"] == str(home / ".local" / "share" / "embornal" / "memory.db")
    assert places["weights"] == str(home / ".cache" / "embornal")
    second = run(home, "paths")
    assert second.stderr == ""


def test_policy_add_list_remove(home: Path) -> None:
    assert run(home, "policy", "add", "p, alice, path:/work/acme/*, read, allow").returncode == 0
    listed = json.loads(run(home, "policy", "list", "--json").stdout)
    assert "p, alice, path:/work/acme/*, read, allow" in [p["line"] for p in listed["policies"]]
    assert run(home, "policy", "remove", "p, alice, path:/work/acme/*, read, allow").returncode == 0
    assert run(home, "policy", "remove", "p, alice, path:/work/acme/*, read, allow").returncode == 1


def test_the_command_line_on_the_file_is_the_way_back_for_a_locked_out_owner(
    home: Path,
) -> None:
    # The last admin line is refused here too, with what to do instead.
    refused = run(home, "policy", "remove", "g, default, admin")
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    assert "add another admin first" in refused.stderr
    # With another admin, default's own line may go: default is no admin any more...
    assert run(home, "policy", "add", "g, alice, admin").returncode == 0
    assert run(home, "policy", "remove", "g, default, admin").returncode == 0
    # ...and whoever can write the database file still manages its policies.
    listed = run(home, "policy", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert "g, alice, admin" in [p["line"] for p in json.loads(listed.stdout)["policies"]]
    back = run(home, "policy", "add", "g, default, admin")
    assert back.returncode == 0, back.stderr
    assert run(home, "policy", "remove", "g, alice, admin").returncode == 0
    assert run(home, "policy", "remove", "g, default, admin").returncode == 1


def test_model_use_switches_to_the_offline_model(home: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("EMBORNAL_", "XDG_"))}
        env["HOME"] = str(home)
        return subprocess.run(
            [sys.executable, "-m", "app.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    config = home / ".config" / "embornal" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("server:\n  port: 9999\nembedding:\n  model: none\n  width: 16\n")
    assert cli("memory", "store", "/pets", "our office cat sleeps on the printer").returncode == 0
    semantic = cli("memory", "search", "kitten napping", "--mode", "semantic")
    assert semantic.returncode == 1 and "embedding model" in semantic.stderr

    switched = cli("model", "use", "minilm-l6")
    assert switched.returncode == 0, switched.stderr
    assert "embedded 8 facts" in switched.stdout  # the 7 /memory facts and ours
    text = config.read_text()
    assert "minilm-l6" in text and "384" in text and "9999" in text
    found = cli("memory", "search", "kitten napping", "--mode", "semantic", "--json")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["fact"]["path"] == "/pets"


def test_content_cannot_reorder_or_rewrite_the_terminal(home: Path) -> None:
    """Issue 18: content is free text and stored as it comes, but a bidi override or an
    escape sequence in it must not reorder or rewrite what the CLI prints after it."""
    evil = "pay alice\u202e 01$ \x1b[2J done"
    stored = run(home, "memory", "store", "/x", evil, "--json")
    assert stored.returncode == 0, stored.stderr
    fact = json.loads(stored.stdout)
    assert fact["content"] == evil  # JSON carries it exactly, escaped by the encoder
    shown = run(home, "memory", "get", str(fact["id"]), "--peek").stdout
    assert "\u202e" not in shown and "\x1b" not in shown
    assert "pay alice<U+202E> 01$ <U+001B>[2J done" in shown
