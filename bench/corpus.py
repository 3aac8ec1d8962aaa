"""A corpus of real English sentences that every machine with Python has: the comments
of the standard library's own source. Deterministic (sorted files, first occurrence)."""

from __future__ import annotations

import re
import sysconfig
from pathlib import Path

_COMMENT = re.compile(r"#\s*([A-Za-z][^\n]{30,200})")


def sentences(limit: int) -> list[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    seen: set[str] = set()
    out: list[str] = []
    for path in sorted(stdlib.rglob("*.py")):
        if "site-packages" in path.parts:
            continue
        try:
            text = path.read_text(errors="ignore")
        except OSError:
            continue
        for match in _COMMENT.finditer(text):
            sentence = match.group(1).strip()
            if sentence not in seen:
                seen.add(sentence)
                out.append(sentence)
                if len(out) >= limit:
                    return out
    return out
