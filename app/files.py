"""Files the memory writes for its owner alone (exports, backups): whole or not at all.

A file is written beside its target under a temporary name (`.NAME.XXXXXXXX.tmp`, mode
0600 from the start, as mkstemp creates it) and renamed over the target at the end, so
a reader never sees half a file and a failure leaves whatever was there before. A
writer may keep files of its own beside the temporary one, named after it
(`.NAME.XXXXXXXX.tmp-...`: a backup's copy, and SQLite's files beside that); they go
when it goes. A file the owner made and the memory rewrites (config.yaml) keeps the
owner's mode.

A failure removes the temporary file; a writer killed outright (SIGKILL, a power cut)
cannot, and its hidden copy would stay forever. So a writer holds an exclusive flock on
its temporary file until the file is renamed or removed, and each new temporary file
first sweeps the old ones of the same target: one whose lock can be taken has no
writer left and goes, with the files named after it; one whose lock is held is another
writer's, still at work, and stays. Nothing else in the folder is touched: no other
target's files, no symlink (nor what it points to), nothing but regular files.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import IO

from app.errors import Conflict, EmbornalError, InvalidInput

try:  # Linux and macOS; elsewhere nothing is locked and so nothing is swept.
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

# A temporary file's name: "." + the target's name + "." + mkstemp's 8 random
# characters + ".tmp". The random part has no dot, so the target's name is unambiguous.
TEMP_NAME = re.compile(r"\.(.+)\.[a-z0-9_]{8}\.tmp")
PRIVATE_FILE_MODE = 0o600


@contextmanager
def private_file(
    target: Path, *, force: bool = False, mode: int = PRIVATE_FILE_MODE
) -> Iterator[IO[str]]:
    """A UTF-8 text file that appears at `target` whole or not at all, mode 0600 (or
    `mode`). Lines end as written: newline translation is off."""
    with temp_beside(target, force=force) as tmp:
        try:
            with tmp.open("w", encoding="utf-8", newline="\n") as out:
                yield out
                out.flush()
                os.fsync(out.fileno())
            publish(tmp, target, mode=mode)
        except OSError as exc:
            # A full disk (ENOSPC) or a failing one: one line, and no partial file anywhere.
            if isinstance(exc, BrokenPipeError):
                raise
            raise EmbornalError(f"cannot write {target}: {exc.strerror or exc}") from None


@contextmanager
def temp_beside(target: Path, *, force: bool) -> Iterator[Path]:
    """`locked_temp` for a file the owner named; refuses to replace `target` unless
    `force`."""
    if target.is_dir():
        raise InvalidInput(f"{target} is a directory; name a file")
    if target.exists() and not force:
        raise Conflict(f"{target} exists; pass --force to overwrite it")
    if not target.parent.is_dir():
        raise InvalidInput(f"the directory {target.parent} does not exist")
    with ExitStack() as stack:
        try:
            tmp = stack.enter_context(locked_temp(target))
        except OSError as exc:
            raise EmbornalError(f"cannot write in {target.parent}: {exc.strerror}") from None
        yield tmp


@contextmanager
def locked_temp(target: Path) -> Iterator[Path]:
    """An empty 0600 file beside `target`, under its writer's lock while the block runs.
    When the block ends it is gone (renamed over `target` by `publish`, or removed), and
    so are the files named after it (`TMP-...`) that the writer put beside it. The stale
    temporary files of the same target are swept first."""
    sweep_stale_temps(target.parent, glob.escape(target.name))
    fd, tmp = _new_locked_temp(target)
    try:
        yield tmp
    finally:
        _remove(tmp)
        os.close(fd)  # the lock last, once the files are gone: no sweep finds them unlocked


def _new_locked_temp(target: Path) -> tuple[int, Path]:
    """mkstemp's file, locked. Another writer's sweep may take a new file between the
    two and remove it: then another is made."""
    while True:
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.path.samestat(os.fstat(fd), os.stat(name, follow_symlinks=False)):
                return fd, Path(name)
        except (BlockingIOError, FileNotFoundError):
            pass  # a sweep holds it, or has removed it
        except BaseException:
            os.close(fd)
            Path(name).unlink(missing_ok=True)
            raise
        os.close(fd)


def sweep_stale_temps(directory: Path, targets: str) -> None:
    """Remove the temporary files in `directory` of the targets named `targets` (a glob
    pattern) that no writer holds, each with the files named after it."""
    if fcntl is None:  # pragma: no cover
        return  # no lock to tell a killed writer's file from a live one's
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return  # the write that follows says what is wrong with the directory
    for entry in entries:
        named = TEMP_NAME.fullmatch(entry.name)
        if named and fnmatch.fnmatchcase(named[1], targets):
            _remove_if_stale(Path(entry.path))


def _remove_if_stale(tmp: Path) -> None:
    try:
        # O_NOFOLLOW: a symlink is not ours to open; O_NONBLOCK: nor does a FIFO stop us.
        # Opened for writing: over NFS an exclusive flock needs it.
        fd = os.open(tmp, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return  # held: its writer is still at work
        # Removed under the lock: a writer that created this file a moment ago and
        # had not locked it yet finds it gone and takes another (_new_locked_temp).
        _remove(tmp)
    finally:
        os.close(fd)


def _remove(tmp: Path) -> None:
    """Remove `tmp` and the regular files named after it (`TMP-...`), those first: a
    removal cut short leaves `tmp`, by which a later sweep finds the rest."""
    try:
        with os.scandir(tmp.parent) as entries:
            paths = [Path(e.path) for e in entries if e.name.startswith(f"{tmp.name}-")]
    except OSError:
        paths = []
    for path in (*paths, tmp):
        with suppress(OSError):
            if stat.S_ISREG(os.lstat(path).st_mode):
                os.unlink(path)


def publish(tmp: Path, target: Path, *, mode: int = PRIVATE_FILE_MODE) -> None:
    """Rename the finished `tmp` over `target`, durably, with `mode`."""
    os.chmod(tmp, mode)
    os.replace(tmp, target)
    with suppress(OSError):  # not every filesystem lets a directory be fsynced
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
