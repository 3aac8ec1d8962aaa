"""Where the tests' scratch files go: a tmpfs when the machine has one with room.

A test's memory is files made and deleted (a copied SQLite file with its journal, a
PostgreSQL database of ~300 files), and on an ext4 mounted without a journal (these
machines' disks) making a file right after many were deleted costs: the inode
allocator passes over every recently deleted inode (ext4's recently_deleted, 45-50% of
the samples in `perf`). CREATE DATABASE took 0.1-0.4 s of CPU a test there, 0.013-0.02 s
on /dev/shm; tests/api and tests/services on one worker: 240 s with pytest's tmp_path on
the disk, 214 s with it on /dev/shm (2026-12-06).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

IN_MEMORY = Path("/dev/shm")
ROOM = 2 * 2**30  # a whole `make test` peaked at 723 MB there (2026-12-06)


def in_memory_parent() -> str | None:
    """The tmpfs to make scratch directories in, or None (the usual temporary one)."""
    try:
        if os.access(IN_MEMORY, os.W_OK) and shutil.disk_usage(IN_MEMORY).free >= ROOM:
            return str(IN_MEMORY)
    except OSError:
        pass
    return None
