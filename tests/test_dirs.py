"""Where the three kinds of file live, and the one-time move out of ~/.embornal."""

from __future__ import annotations

from pathlib import Path

from app.dirs import move_legacy_files, resolve_dirs


def test_xdg_with_empty_variables_falling_back(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": "", "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CACHE_HOME": ""}
    dirs = resolve_dirs(env, "linux", tmp_path)
    assert dirs.config_dir == tmp_path / ".config" / "embornal"
    assert dirs.data_dir == tmp_path / "data" / "embornal"
    assert dirs.cache_dir == tmp_path / ".cache" / "embornal"


def test_macos_reads_no_xdg_variable(tmp_path: Path) -> None:
    dirs = resolve_dirs({"XDG_CONFIG_HOME": "/elsewhere"}, "darwin", tmp_path)
    support = tmp_path / "Library" / "Application Support" / "embornal"
    assert dirs.config_file == support / "config.yaml"
    assert dirs.database_file == support / "memory.db"
    assert dirs.weights_dir == tmp_path / "Library" / "Caches" / "embornal"


def test_embornal_home_puts_the_three_in_one(tmp_path: Path) -> None:
    one = tmp_path / "one"
    for platform in ("linux", "darwin"):
        dirs = resolve_dirs({"EMBORNAL_HOME": str(one)}, platform, tmp_path)
        assert dirs.config_dir == dirs.data_dir == dirs.cache_dir == one


def _legacy(home: Path) -> Path:
    old = home / ".embornal"
    old.mkdir(parents=True)
    (old / "config.yaml").write_text("server: {port: 9000}\n")
    (old / "memory.db").write_bytes(b"old memory")
    (old / "memory.db-wal").write_bytes(b"wal")
    (old / "model.onnx").write_bytes(b"weights")
    return old


def test_legacy_move_says_what_it_moved_and_is_silent_the_second_time(tmp_path: Path) -> None:
    old = _legacy(tmp_path)
    dirs = resolve_dirs({}, "linux", tmp_path)
    moved = move_legacy_files(dirs, tmp_path)
    assert len(moved) == 3 and all(line.startswith("moved ") for line in moved)
    assert dirs.config_file.read_text() == "server: {port: 9000}\n"
    assert dirs.database_file.read_bytes() == b"old memory"
    assert Path(str(dirs.database_file) + "-wal").read_bytes() == b"wal"
    assert (old / "model.onnx").exists()  # the weights stay where they are
    assert move_legacy_files(dirs, tmp_path) == []


def test_legacy_move_never_overwrites_a_memory_in_the_new_place(tmp_path: Path) -> None:
    old = _legacy(tmp_path)
    dirs = resolve_dirs({}, "linux", tmp_path)
    dirs.data_dir.mkdir(parents=True)
    dirs.database_file.write_bytes(b"new memory")
    moved = move_legacy_files(dirs, tmp_path)
    assert [line for line in moved if "memory.db" in line] == []
    assert dirs.database_file.read_bytes() == b"new memory"
    assert (old / "memory.db").read_bytes() == b"old memory"
    assert any("config.yaml" in line for line in moved)
