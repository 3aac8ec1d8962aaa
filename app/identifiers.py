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


# Characters that reorder or rewrite what a terminal shows after them: the bidi
# embeddings, overrides and isolates (U+202A-202E, U+2066-2069) and the C0/C1 controls
# but tab and line feed (an escape sequence can clear a screen or retitle a window).
_DISPLAY_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def for_display(text: str) -> str:
    """Free text (fact content) as a terminal may show it: each character that could
    reorder or rewrite what follows is shown as <U+XXXX>. The stored text is unchanged."""
    return _DISPLAY_UNSAFE.sub(lambda m: f"<U+{ord(m.group()):04X}>", text)
