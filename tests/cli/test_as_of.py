"""`--as-of` on the read verbs and `--on-duplicate` on store: the use cases REST and MCP call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_commands import run

pytestmark = pytest.mark.slow  # starts processes (make test-fast leaves it out)


def test_read_commands_answer_as_of_a_moment(tmp_path: Path) -> None:
    old = json.loads(
        run(tmp_path, "memory", "store", "/c", "the gate code is 1234", "--json").stdout
    )
    moment = old["created_at"]  # a fact exists from its own creation on
    new = run(
        tmp_path,
        "memory",
        "store",
        "/c",
        "the gate code is 9876",
        "--supersedes",
        str(old["id"]),
        "--json",
    )
    new_id = json.loads(new.stdout)["id"]
    chain = json.loads(
        run(tmp_path, "memory", "history", str(old["id"]), "--as-of", moment, "--json").stdout
    )
    assert [f["id"] for f in chain["facts"]] == [old["id"]]
    assert chain["as_of"]["at"] == moment
    found = json.loads(
        run(
            tmp_path,
            "memory",
            "search",
            "gate code",
            "--mode",
            "keyword",
            "--as-of",
            moment,
            "--json",
        ).stdout
    )
    assert [r["fact"]["id"] for r in found["results"]] == [old["id"]]
    got = json.loads(
        run(tmp_path, "memory", "get", str(old["id"]), "--as-of", moment, "--json").stdout
    )
    assert got["superseded"] is False and got["recall_count"] == 0
    shown = json.loads(run(tmp_path, "memory", "show", "/c", "--as-of", moment, "--json").stdout)
    assert [f["id"] for f in shown["facts"]] == [old["id"]]
    gone = run(tmp_path, "memory", "get", str(new_id), "--as-of", moment)
    assert gone.returncode == 1
    bad = run(tmp_path, "memory", "search", "gate", "--as-of", "yesterday")
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "as_of" in bad.stderr
    # A moment whose UTC no date can hold: one line too, never a traceback.
    for command in (
        ("memory", "search", "gate", "--mode", "keyword"),
        ("memory", "get", str(old["id"])),
        ("memory", "history", str(old["id"])),
        ("memory", "show", "/c"),
    ):
        far = run(tmp_path, *command, "--as-of", "0001-01-01T00:00:00+14:00")
        assert far.returncode == 1, command
        assert far.stderr.startswith("error: as_of") and far.stderr.count("\n") == 1, far.stderr


def test_store_says_whether_similar_facts_were_looked_for(tmp_path: Path) -> None:
    stored = run(tmp_path, "memory", "store", "/c", "a fact", "--on-duplicate", "refuse", "--json")
    assert stored.returncode == 0, stored.stderr
    fact = json.loads(stored.stdout)
    # No model in this memory: nothing could be compared, and the answer says so.
    assert fact["similar"] == [] and fact["similar_checked"] is False
    bad = run(tmp_path, "memory", "store", "/c", "another", "--on-duplicate", "skip")
    assert bad.returncode == 1 and "--on-duplicate" in bad.stderr
