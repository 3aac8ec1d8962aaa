"""One rule for identifiers (app.identifiers): no Unicode Cc, Cf (or lone surrogate)
in subject names, tag keys and values, path input and policy lines; subjects in NFC."""

from __future__ import annotations

import datetime as dt
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.acl.model import parse_object, parse_policy_line
from app.auth.subjects import validate_subject
from app.auth.tokens import issue_token
from app.errors import InvalidInput
from app.identifiers import HIDDEN_CATEGORIES, hidden_character
from app.services.validation import check_tag, fold_path, parse_tag_filter
from tests.conftest import make_settings

# NUL, tab, newline, DEL, C1 NEL, soft hyphen, zero-width space and joiner, LRM,
# the bidi override RLO, word joiner, BOM, an interlinear annotation, a tag character.
HIDDEN = [
    "\x00", "\t", "\n", "\x7f", "\x85", "\xad", "\u200b", "\u200d", "\u200e", "\u202e",
    "\u2060", "\ufeff", "\ufff9", "\U000e0041",
]  # fmt: skip


@pytest.mark.parametrize("char", HIDDEN)
def test_the_rule_names_the_character(char: str) -> None:
    assert unicodedata.category(char) in {"Cc", "Cf"}
    assert hidden_character(f"ab{char}cd") == f"U+{ord(char):04X}"


@given(st.text())
def test_the_rule_is_exactly_the_categories(text: str) -> None:
    expected = next((c for c in text if unicodedata.category(c) in HIDDEN_CATEGORIES), None)
    assert hidden_character(text) == (f"U+{ord(expected):04X}" if expected else None)


@pytest.mark.parametrize("char", HIDDEN)
def test_every_identifier_refuses_them(char: str) -> None:
    with pytest.raises(InvalidInput, match="control or format character"):
        fold_path(f"/projects/emb{char}ornal")
    with pytest.raises(InvalidInput, match="control or format character"):
        check_tag(f"te{char}am", "green")
    with pytest.raises(InvalidInput, match="control or format character"):
        check_tag("team", f"gr{char}een")
    with pytest.raises(InvalidInput, match="control or format character"):
        parse_tag_filter(f"team=green{char}")
    with pytest.raises(InvalidInput, match="control or format character"):
        validate_subject(f"default{char}")
    with pytest.raises(InvalidInput, match="control or format character"):
        parse_policy_line(f"p, alice{char}, path:/a/*, read, allow")
    with pytest.raises(InvalidInput, match="control or format character"):
        parse_object(f"tag:team=green{char}")


def test_a_trailing_newline_is_not_folded_away() -> None:
    # strip() would have eaten it, and made `/a\n` the same node as `/a`.
    with pytest.raises(InvalidInput):
        fold_path("/a\n")
    assert fold_path(" /A/ ") == "/a"  # spaces are still tolerated around a path


def test_subjects_must_be_nfc_and_are_not_rewritten() -> None:
    composed, decomposed = "jos\u00e9", "jose\u0301"
    assert validate_subject(composed) == composed
    with pytest.raises(InvalidInput, match="NFC"):
        validate_subject(decomposed)
    with pytest.raises(InvalidInput, match="NFC"):
        parse_policy_line(f"g, {decomposed}, readers")


def test_token_issue_refuses_a_lookalike_subject(tmp_path) -> None:
    settings = make_settings(tmp_path)
    with pytest.raises(InvalidInput, match="U\\+200B"):
        issue_token(settings, "default\u200b", dt.timedelta(hours=1))
    with pytest.raises(InvalidInput, match="NFC"):
        issue_token(settings, "jose\u0301", dt.timedelta(hours=1))
    assert issue_token(settings, "jos\u00e9", dt.timedelta(hours=1))
