"""Changing keys of config.yaml and nothing else of the file its owner wrote.

The file is the owner's: its comments, order, blank lines, quoting, indentation and
line endings stay byte for byte. PyYAML, the parser that loads the file at start
(app.settings), composes it into nodes that carry where each one starts and ends; a
key's value is replaced in place, a missing key or section is inserted as one line
each, in the style of the mapping it joins (block or flow). No YAML is re-emitted:
a round-trip dumper rewrites what it does not keep (`null`s, `---`, indentation,
CRLF line ends, a file of comments alone). What the new text means is checked
before it is written: every other key loads exactly as before, and the file loads
as a valid config; otherwise the file stays as it was, with a message that says what
to write by hand.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode

from app.dirs import Dirs, make_private_dir
from app.errors import ConfigError
from app.files import PRIVATE_FILE_MODE, private_file
from app.settings import Settings, parse_config, read_config, settings_from_text

Scalar = str | int

NULL_TAG = "tag:yaml.org,2002:null"
STR_TAG = "tag:yaml.org,2002:str"
# Where the section itself is missing or null and no other section shows the file's.
DEFAULT_INDENT = 2


def set_embedding_model(
    dirs: Dirs, model: str, width: int, env: Mapping[str, str] | None = None
) -> Settings:
    """Write `embedding.model` and `embedding.width` to config.yaml (made 0600 when there
    is none), atomically, and return the settings it now gives under `env` (the
    EMBORNAL_* variables, os.environ by default)."""
    return set_keys(dirs, "embedding", {"model": model, "width": width}, env)


def set_keys(
    dirs: Dirs, section: str, values: Mapping[str, Scalar], env: Mapping[str, str] | None = None
) -> Settings:
    """Set `section.key` to each of `values` in config.yaml, the rest of its text kept.

    The new text replaces the file only if it loads as a config (under `env`) whose
    other keys are those of the old one; a file that is a link is rewritten where it
    points, and keeps its mode.
    """
    env = os.environ if env is None else env
    path = dirs.config_file
    old = read_config(path)
    before = parse_config(old or "", path)  # as the next start would read it
    expected = {**before, section: {**(before.get(section) or {}), **values}}
    try:
        text = with_keys(old or "", section, values)
        if not _same(_parsed_or_none(text, path), expected):
            raise ConfigError("the edit would change other keys")
    except ConfigError as exc:
        wanted = ", ".join(f"{section}.{k}: {_scalar(v)}" for k, v in values.items())
        raise ConfigError(
            f"{path} is left as it was ({exc.detail}); set {wanted} in it by hand"
        ) from None
    try:
        config = settings_from_text(text, path, dirs, env)
    except ConfigError as exc:
        raise ConfigError(
            f"{path} is left as it was: the edited file would not load: {exc.detail}"
        ) from None
    # A key an EMBORNAL_* variable overrides would not take effect: say so, write nothing.
    given = getattr(config, section).model_dump()
    overridden = [k for k, v in values.items() if given.get(k) != v]
    if overridden:
        names = ", ".join(f"EMBORNAL_{section.upper()}__{k.upper()}" for k in overridden)
        raise ConfigError(
            f"{path} is left as it was: {names} override{'s' if len(overridden) == 1 else ''} "
            "config.yaml; unset them to change it"
        )
    make_private_dir(path.parent)
    target = path.resolve()  # a link stays a link
    mode = stat.S_IMODE(target.stat().st_mode) if old is not None else PRIVATE_FILE_MODE
    with private_file(target, force=True, mode=mode) as out:
        out.write(text)
    return config


def with_keys(text: str, section: str, values: Mapping[str, Scalar]) -> str:
    """`text` with `section.key: value` for each of `values`, and nothing else changed."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise ConfigError(f"the config file is not valid YAML: {exc}") from None
    newline = "\r\n" if "\r\n" in text else "\n"
    if root is None:  # empty, or comments alone
        return _append(text, len(text), _block_section(section, values, 0, DEFAULT_INDENT, newline))
    if isinstance(root, ScalarNode) and root.tag == NULL_TAG:  # `---` alone, or `null`
        start, end = root.start_mark.index, root.end_mark.index
        if end > start and text.startswith(newline, end):
            end += len(newline)  # `null`'s line becomes the section's
        block = _block_section(section, values, 0, DEFAULT_INDENT, newline)
        return _append(text[:start] + text[end:], start, block)
    if not isinstance(root, MappingNode):
        raise ConfigError("the config file must be a mapping of sections")
    edits: list[tuple[int, int, str]] = []
    entry = _entry(root, section)
    if entry is None:
        if root.flow_style:
            edits.append(_flow_insert(root, f"{section}: {_flow_mapping(values)}"))
        else:
            column = root.value[0][0].start_mark.column if root.value else 0
            block = _block_section(section, values, column, _indent_of(root), newline)
            return _append(text, root.end_mark.index, block)
    else:
        key, node = entry
        if isinstance(node, ScalarNode) and node.tag == NULL_TAG:
            edits += _fill_null(text, root, key, node, values, newline)
        elif isinstance(node, MappingNode):
            edits += _set_in_mapping(text, key, node, values, newline)
        else:
            raise ConfigError(f"'{section}' must be a mapping of keys")
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


def _parsed_or_none(text: str, path: Path) -> dict[str, Any] | None:
    try:
        return parse_config(text, path)
    except ConfigError:
        return None


def _same(a: Any, b: Any) -> bool:
    """== where True is not 1 and 1 is not 1.0: to the settings those are other values."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _entry(mapping: MappingNode, name: str) -> tuple[Node, Node] | None:
    """The key node and value node of `name` in `mapping`: the last one, as the loader
    keeps the last of repeated keys."""
    found = None
    for key, value in mapping.value:
        if isinstance(key, ScalarNode) and key.tag == STR_TAG and key.value == name:
            found = (key, value)
    return found


def _set_in_mapping(
    text: str, key: Node, node: MappingNode, values: Mapping[str, Scalar], newline: str
) -> list[tuple[int, int, str]]:
    edits = []
    missing: dict[str, Scalar] = {}
    after = key.end_mark.index  # missing keys go after the last present one, else the section's key
    for name, value in values.items():
        entry = _entry(node, name)
        if entry is None:
            missing[name] = value
            continue
        scalar = entry[1]
        if not isinstance(scalar, ScalarNode) or scalar.style in ("|", ">"):
            raise ConfigError(f"'{name}' is not a value on one line")
        start, end = scalar.start_mark.index, scalar.end_mark.index
        new = _scalar(value, scalar.style)
        if end == start:  # `key:` with no value
            new = f" {new}"
        edits.append(_keeping_comment_column(text, start, end, new))
        after = max(after, end)
    if missing:
        if node.flow_style:
            edits.append(_flow_insert(node, _flow_items(missing)))
        else:
            lines = _key_lines(missing, node.value[0][0].start_mark.column, newline)
            edits.append(_after_line(text, after, lines, newline))
    return edits


def _keeping_comment_column(text: str, start: int, end: int, new: str) -> tuple[int, int, str]:
    """An edit replacing text[start:end] by `new`; a comment after it on the line keeps
    its column (comments aligned down the file stay aligned), or moves right as little as
    it can when `new` is longer."""
    rest = text[end:].split("\n", 1)[0]
    gap = len(rest) - len(rest.lstrip(" "))
    if "\n" in text[start:end] or gap == 0 or not rest[gap:].startswith("#"):
        return (start, end, new)
    spaces = max(gap + (end - start) - len(new), min(gap, 2))
    return (start, end + gap, new + " " * spaces)


def _fill_null(
    text: str,
    root: MappingNode,
    key: Node,
    node: ScalarNode,
    values: Mapping[str, Scalar],
    newline: str,
) -> list[tuple[int, int, str]]:
    """`section:` with no value (or `null`, `~`): the keys become its mapping."""
    start, end = node.start_mark.index, node.end_mark.index
    if root.flow_style:
        return [(start, end, _flow_mapping(values) if end > start else f" {_flow_mapping(values)}")]
    # `section: null` loses its `null`: a comment after it keeps its column; with none,
    # the spaces before it go too.
    if text[end:].split("\n", 1)[0].strip():
        removal = _keeping_comment_column(text, start, end, "")
    else:
        while start > 0 and text[start - 1] == " ":
            start -= 1
        removal = (start, end, "")
    lines = _key_lines(values, key.start_mark.column + _indent_of(root), newline)
    return [removal, _after_line(text, end, lines, newline)]


def _after_line(text: str, index: int, lines: str, newline: str) -> tuple[int, int, str]:
    """An edit inserting `lines` at the start of the line after the one holding `index`."""
    end = text.find("\n", index)
    if end == -1:  # the last line has no line end
        return (len(text), len(text), newline + lines)
    return (end + 1, end + 1, lines)


def _append(text: str, index: int, block: str) -> str:
    """`block` inserted at `index`, on a line of its own."""
    before = text[:index]
    if before and not before.endswith("\n"):
        newline = "\r\n" if "\r\n" in text else "\n"
        before += newline
    return before + block + text[index:]


def _block_section(
    section: str, values: Mapping[str, Scalar], column: int, indent: int, newline: str
) -> str:
    return f"{' ' * column}{section}:{newline}" + _key_lines(values, column + indent, newline)


def _key_lines(values: Mapping[str, Scalar], column: int, newline: str) -> str:
    """`key: value` for each of `values`, a line each, at `column`."""
    return "".join(f"{' ' * column}{k}: {_scalar(v)}{newline}" for k, v in values.items())


def _indent_of(root: MappingNode) -> int:
    """How far the file indents a section's keys: as its first block section does."""
    for key, value in root.value:
        if isinstance(value, MappingNode) and not value.flow_style and value.value:
            step = value.value[0][0].start_mark.column - key.start_mark.column
            if step > 0:
                return step
    return DEFAULT_INDENT


def _flow_insert(node: MappingNode, items: str) -> tuple[int, int, str]:
    """An edit adding `items` (`key: value, ...`) at the front of the flow mapping `node`."""
    if node.value:
        first = node.value[0][0].start_mark.index
        return (first, first, items + ", ")
    start = node.start_mark.index + 1  # just inside `{`
    return (start, start, items)


def _flow_items(values: Mapping[str, Scalar]) -> str:
    return ", ".join(f"{k}: {_scalar(v)}" for k, v in values.items())


def _flow_mapping(values: Mapping[str, Scalar]) -> str:
    return "{" + _flow_items(values) + "}"


def _scalar(value: Scalar, style: str | None = None) -> str:
    """`value` as YAML on one line: a string in `style` (a quote it had), else plain when
    it reads back as itself, quoted otherwise."""
    if not isinstance(value, str):
        return str(int(value))
    quote = style if style in ('"', "'") else None
    dumped = yaml.safe_dump(
        [value], default_flow_style=True, default_style=quote, width=2**31, allow_unicode=True
    )
    return dumped.strip()[1:-1]
