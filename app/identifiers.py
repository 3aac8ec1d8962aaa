"""The one rule for the characters of identifiers: subject names, tag keys and
values, path input (SPEC "Access control").

Control and format characters (Unicode Cc and Cf: NUL, newlines, the zero-width
space, bidi overrides, the BOM) print as nothing or rearrange what is around
them, so `default` and `default` + U+200B would look like one subject in a log,
a policy listing or a tag and be two. Lone surrogates (Cs) are here too: JSON can
spell one, UTF-8 (and so SQLite) cannot hold it.
"""

from __future__ import annotations

import re
import unicodedata

HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs"})
# The Cc characters of ASCII; ASCII has no Cf or Cs. Policy objects are checked on
# every Casbin match, and nearly every identifier is ASCII: one regex scan then.
_ASCII_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def hidden_character(text: str) -> str | None:
    """The first control, format or surrogate character of `text` as `U+XXXX`, else None."""
    if text.isascii():
        match = _ASCII_CONTROL.search(text)
        return f"U+{ord(match.group()):04X}" if match else None
    for char in text:
        if unicodedata.category(char) in HIDDEN_CATEGORIES:
            return f"U+{ord(char):04X}"
    return None
