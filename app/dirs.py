"""Where embornal keeps its three kinds of file (seed: "The memory model", first part).

config.yaml and memory.db must be backed up; the model weights are a download the
tool makes again, so they live apart, in a cache directory.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

APP_NAME = "embornal"
CONFIG_FILE = "config.yaml"
DATABASE_FILE = "memory.db"
# SQLite's companions of a WAL database travel with it.
DATABASE_COMPANIONS = ("-wal", "-shm")


@dataclass(frozen=True)
class Dirs:
    config_dir: Path
    data_dir: Path
    cache_dir: Path

    @property
    def config_file(self) -> Path:
        return self.config_dir / CONFIG_FILE

    @property
    def database_file(self) -> Path:
        return self.data_dir / DATABASE_FILE

    @property
    def weights_dir(self) -> Path:
        return self.cache_dir


def _xdg(env: Mapping[str, str], name: str, fallback: Path) -> Path:
    # An empty XDG variable counts as unset (XDG Base Directory spec).
    value = env.get(name, "")
    return Path(value) if value else fallback


def resolve_dirs(
    env: Mapping[str, str] | None = None,
    platform: str | None = None,
    home: Path | None = None,
) -> Dirs:
    """Resolve the three directories: EMBORNAL_HOME, else macOS, else XDG."""
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    home = Path(env.get("HOME") or Path.home()) if home is None else home

    embornal_home = env.get("EMBORNAL_HOME", "")
    if embornal_home:
        one = Path(embornal_home)
        return Dirs(one, one, one)
    if platform == "darwin":
        # macOS reads no XDG variable.
        support = home / "Library" / "Application Support" / APP_NAME
        return Dirs(support, support, home / "Library" / "Caches" / APP_NAME)
    return Dirs(
        config_dir=_xdg(env, "XDG_CONFIG_HOME", home / ".config") / APP_NAME,
        data_dir=_xdg(env, "XDG_DATA_HOME", home / ".local" / "share") / APP_NAME,
        cache_dir=_xdg(env, "XDG_CACHE_HOME", home / ".cache") / APP_NAME,
    )


# Config (the signing key) and data (every fact) are for their owner alone (SPEC "Files").
PRIVATE_DIR_MODE = 0o700


def make_private_dir(path: Path) -> None:
    """Create `path` 0700 if it is missing. Only the last directory gets the mode;
    parents mkdir creates (~/.local/share) get the default. An existing directory
    is left as it is: it may be one the owner chose and shares on purpose."""
    path.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)


def legacy_dir(home: Path) -> Path:
    return home / f".{APP_NAME}"


def move_legacy_files(dirs: Dirs, home: Path) -> list[str]:
    """Move config.yaml and memory.db out of an older build's $HOME/.embornal.

    A file moves only where its new place is still empty, so a memory already in
    the new place stays as it is. The weights stay where they are. Returns one
    line per moved file; a second run finds nothing to move and returns nothing.
    """
    old = legacy_dir(home)
    if not old.is_dir():
        return []
    moved: list[str] = []

    def move(src: Path, dst: Path) -> None:
        make_private_dir(dst.parent)
        shutil.move(str(src), str(dst))
        moved.append(f"moved {src} -> {dst}")

    config_src = old / CONFIG_FILE
    if config_src.is_file() and not dirs.config_file.exists():
        move(config_src, dirs.config_file)

    db_src = old / DATABASE_FILE
    db_dst = dirs.database_file
    db_place_empty = not any(
        Path(str(db_dst) + suffix).exists() for suffix in ("", *DATABASE_COMPANIONS)
    )
    if db_src.is_file() and db_place_empty:
        # The companions first, so the main file never arrives without its WAL.
        for suffix in DATABASE_COMPANIONS:
            companion = Path(str(db_src) + suffix)
            if companion.is_file():
                move(companion, Path(str(db_dst) + suffix))
        move(db_src, db_dst)
    return moved
