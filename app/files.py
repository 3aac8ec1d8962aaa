"""Files the memory writes for its owner alone (exports, backups): whole or not at all.

A file is written beside its target under a temporary name (mode 0600 from the
start, as mkstemp creates it) and renamed over the target at the end, so a
reader never sees half a file and a failure leaves whatever was there before.
A file the owner made and the memory rewrites (config.yaml) keeps the owner's mode.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

from app.errors import Conflict, EmbornalError, InvalidInput

PRIVATE_FILE_MODE = 0o600


@contextmanager
def private_file(
    target: Path, *, force: bool = False, mode: int = PRIVATE_FILE_MODE
) -> Iterator[IO[str]]:
    """A UTF-8 text file that appears at `target` whole or not at all, mode 0600 (or
    `mode`). Lines end as written: newline translation is off."""
    tmp = temp_beside(target, force=force)
    try:
        with tmp.open("w", encoding="utf-8", newline="\n") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        publish(tmp, target, mode=mode)
    except OSError as exc:
        # A full disk (ENOSPC) or a failing one: one line, and no partial file anywhere.
        tmp.unlink(missing_ok=True)
        if isinstance(exc, BrokenPipeError):
            raise
        raise EmbornalError(f"cannot write {target}: {exc.strerror or exc}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def temp_beside(target: Path, *, force: bool) -> Path:
    """An empty 0600 file in the target's directory; refuses to replace `target`
    unless `force`."""
    if target.is_dir():
        raise InvalidInput(f"{target} is a directory; name a file")
    if target.exists() and not force:
        raise Conflict(f"{target} exists; pass --force to overwrite it")
    if not target.parent.is_dir():
        raise InvalidInput(f"the directory {target.parent} does not exist")
    try:
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise EmbornalError(f"cannot write in {target.parent}: {exc.strerror}") from None
    os.close(fd)
    return Path(name)


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
