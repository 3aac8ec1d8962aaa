"""Input folding and checks (app.services.validation), each rule at its bounds."""

from __future__ import annotations

import re

import pytest

from app.errors import InvalidInput
from app.rules import MAX_LIMIT, MAX_SEGMENT_CHARS, MAX_SEGMENTS
from app.services.validation import (
    check_content,
    check_limit,
    check_tags,
    fold_path,
    parse_tag_filter,
)


@pytest.mark.parametrize(
    ("raw", "folded"),
    [("/", "/"), ("/Projects/Embornal/", "/projects/embornal"), (" /a.b_c-d/9 ", "/a.b_c-d/9")],
)
def test_a_path_folds_to_one_spelling(raw: str, folded: str) -> None:
    assert fold_path(raw) == folded


def test_a_path_at_its_bounds() -> None:
    longest = "/" + "/".join(["s" * MAX_SEGMENT_CHARS] * MAX_SEGMENTS)
    assert fold_path(longest) == longest
    with pytest.raises(InvalidInput, match=f"segment 's{{{MAX_SEGMENT_CHARS + 1}}}' is longer"):
        fold_path("/" + "s" * (MAX_SEGMENT_CHARS + 1))
    with pytest.raises(InvalidInput, match=f"has {MAX_SEGMENTS + 1} segments; at most 32"):
        fold_path("/a" * (MAX_SEGMENTS + 1))


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("projects", "must start with '/'"),
        ("/a//b", "empty segment"),
        ("/-a", "segment '-a' must start with a letter or digit"),
        ("/a b", "segment 'a b' must start"),
        ("/a\u200bb", "control or format character (U+200B)"),
    ],
)
def test_a_bad_path_is_refused_and_the_field_named(raw: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(message)) as caught:
        fold_path(raw, field="under")
    assert caught.value.errors is not None and caught.value.errors[0]["loc"] == ["under"]


def test_tags_fold_their_keys_and_refuse_owner_twins_and_too_many() -> None:
    assert check_tags({"Lang": "py", "env": "prod"}, limit=2) == {"lang": "py", "env": "prod"}
    with pytest.raises(InvalidInput, match="owner tag is written by the memory"):
        check_tags({"Owner": "mallory"}, limit=8)
    with pytest.raises(InvalidInput, match="tag 'k' is given twice"):
        check_tags({"K": "1", "k": "2"}, limit=8)
    with pytest.raises(InvalidInput, match="at most 2 tags, not 3"):
        check_tags({"a": "1", "b": "2", "c": "3"}, limit=2)
    with pytest.raises(InvalidInput, match="no space, '=' or ','"):
        check_tags({"k": "a b"}, limit=8)


def test_a_tag_filter_is_key_equals_value() -> None:
    assert parse_tag_filter("Lang=py") == ("lang", "py")
    with pytest.raises(InvalidInput, match="must be key=value"):
        parse_tag_filter("lang")


def test_content_at_its_bounds() -> None:
    assert check_content("x" * 10, 10) == "x" * 10
    for bad, message in [
        ("   ", "empty"),
        ("x" * 11, "11 characters; at most 10"),
        ("a\x00", "NUL"),
    ]:
        with pytest.raises(InvalidInput, match=message):
            check_content(bad, 10)


def test_a_page_size_says_its_bounds() -> None:
    assert check_limit(1) == 1 and check_limit(MAX_LIMIT) == MAX_LIMIT
    for bad in (0, MAX_LIMIT + 1):
        with pytest.raises(InvalidInput) as caught:
            check_limit(bad)
        assert caught.value.detail == f"limit must be between 1 and 100, not {bad}"
