"""Files written whole or not at all (app.files), and the temporary files of a writer
that was killed outright: the next writer to the same target removes them, while a
live writer's stay, and nothing else in the folder is touched."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from app.files import private_file, sweep_stale_temps

# Another process that flocks a file, says so, and holds the lock until its stdin ends.
HOLDER = """
import fcntl, sys
with open(sys.argv[1], "r+") as fh:
    fcntl.flock(fh, fcntl.LOCK_EX)
    print("locked", flush=True)
    sys.stdin.read()
"""


def leftover(directory: Path, target: str, random: str = "deadbeef") -> Path:
    """A temporary file of `target` as a killed writer leaves it: hidden, no lock."""
    path = directory / f".{target}.{random}.tmp"
    path.write_text("half a file")
    return path


@contextmanager
def held(path: Path) -> Iterator[None]:
    """`path` flocked by another live process while the block runs."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdin is not None and holder.stdout is not None
    try:
        assert holder.stdout.readline() == "locked\n"
        yield
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def write(target: Path, text: str = "whole\n") -> None:
    with private_file(target, force=True) as out:
        out.write(text)


def test_a_killed_writers_temporary_file_goes_with_the_next_write(tmp_path: Path) -> None:
    target = tmp_path / "dump.jsonl"
    leftover(tmp_path, "dump.jsonl")
    killed = leftover(tmp_path, "dump.jsonl", "k1lled_2")
    Path(f"{killed}-its-own").write_text("a file the writer kept beside it")
    write(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dump.jsonl"]
    assert target.read_text() == "whole\n"


def test_a_live_writers_temporary_file_stays(tmp_path: Path) -> None:
    target = tmp_path / "dump.jsonl"
    running = leftover(tmp_path, "dump.jsonl")
    its_own = Path(f"{running}-its-own")
    its_own.write_text("a file the writer keeps beside it")
    with held(running):
        write(target)
        assert running.read_text() == "half a file" and its_own.exists()
    write(target)  # its writer is gone now
    assert not running.exists() and not its_own.exists()


def test_nothing_but_the_targets_own_temporary_files_is_touched(tmp_path: Path) -> None:
    target = tmp_path / "dump.jsonl"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "precious").write_text("keep")
    kept = [
        leftover(tmp_path, "other.jsonl"),
        leftover(tmp_path, "dump"),  # the temporary file of a target named "dump"
        leftover(tmp_path, "dump.jsonl.old"),
        tmp_path / ".dump.jsonl.tmp",
        tmp_path / ".dump.jsonl.deadbeef.tmp.keep",
        tmp_path / ".dump.jsonl.DEADBEEF.tmp",
        tmp_path / "dump.jsonl.deadbeef.tmp",
    ]
    for path in kept[3:]:
        path.write_text("not ours")
    link = tmp_path / ".dump.jsonl.symlink_.tmp"
    link.symlink_to(outside / "precious")
    folder = tmp_path / ".dump.jsonl.folder__.tmp"
    folder.mkdir()
    (folder / "inside").write_text("keep")
    fifo = tmp_path / ".dump.jsonl.fifo____.tmp"
    os.mkfifo(fifo)

    write(target)
    for path in kept:
        assert path.is_file(), path
    assert link.is_symlink() and (outside / "precious").read_text() == "keep"
    assert (folder / "inside").read_text() == "keep"
    assert fifo.exists()


def test_the_temporary_file_is_locked_while_it_is_written(tmp_path: Path) -> None:
    target = tmp_path / "dump.jsonl"
    with private_file(target) as out:
        out.write("whole\n")
        [tmp] = [p for p in tmp_path.iterdir() if p.name.startswith(".dump.jsonl.")]
        with tmp.open("rb") as other, pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        sweep_stale_temps(tmp_path, "dump.jsonl")
        assert tmp.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dump.jsonl"]
    assert target.read_text() == "whole\n"


def test_a_temporary_file_swept_before_its_writer_locked_it_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer's sweep can take a file between its mkstemp and its lock, and
    remove it: the writer makes another rather than write into a removed file."""
    mkstemp = tempfile.mkstemp
    made: list[str] = []

    def swept_at_once(*args: Any, **kwargs: Any) -> tuple[int, str]:
        fd, name = mkstemp(*args, **kwargs)
        made.append(name)
        if len(made) == 1:
            sweep_stale_temps(tmp_path, "dump.jsonl")  # not locked yet: removed
            assert not Path(name).exists()
        return fd, name

    monkeypatch.setattr(tempfile, "mkstemp", swept_at_once)
    target = tmp_path / "dump.jsonl"
    write(target)
    assert len(made) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dump.jsonl"]
    assert target.read_text() == "whole\n"
