"""The Casbin model (built into the code), policy lines, and object matching.

A request object is a *resource*: the node a fact (or path) sits at, plus its
effective tags. A policy object names a node (`path:/a/b`), a subtree with its
own root (`path:/a/b/*`), or an attribute (`tag:key=value`). A deny beats every
allow, and no policy means no access. Every authenticated subject is a member of
the role `everyone` without a `g` line of its own (SPEC: Access control).

What a rule can grant depends on who chooses the attributes it matches. A reader
chooses nothing, so `read` and `delete` may be granted by path or tag rules. A
writer chooses the tags of the fact it stores, and path tags change what others
see beneath a node, so `write` and `tag` are granted by path rules alone: a tag
rule naming them can only deny. The matcher says this itself (`mayGrant`), so
that Casbin's enforce() stays the one oracle for every decision.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from app.auth.subjects import validate_subject
from app.errors import InvalidInput
from app.identifiers import hidden_character
from app.rules import SEGMENT, TAG_KEY, TAG_VALUE

EVERYONE = "everyone"
ADMIN = "admin"
# The role that reads /metrics and nothing else (a g line makes it, like any role):
# a scraper's token, which must not be an admin's (an admin can export every fact).
METRICS = "metrics"
ACTIONS = ("read", "write", "delete", "tag")
# Actions whose allow must come from a path rule: the actor picks the tags involved.
PATH_GRANTED_ACTIONS = frozenset({"write", "tag"})
EFFECTS = ("allow", "deny")

CASBIN_MODEL = """
[request_definition]
r = sub, obj, act

[policy_definition]
p = sub, obj, act, eft

[role_definition]
g = _, _

[policy_effect]
e = some(where (p.eft == allow)) && !some(where (p.eft == deny))

[matchers]
m = r.act == p.act && (g(r.sub, p.sub) || g("everyone", p.sub)) && objectMatch(r.obj, p.obj) \
    && (p.eft == "deny" || mayGrant(p.obj, p.act))
"""

_PATH_OBJECT = re.compile(rf"^path:(/|(?:/{SEGMENT})+)(/\*)?$")
_ROOT_SUBTREE = "path:/*"
_TAG_OBJECT = re.compile(r"^tag:([^=\s,]+)=([^\s=,]+)$")


@dataclass(frozen=True)
class Resource:
    """What a request is about: a node of the tree and its effective tags."""

    path: str
    tags: Mapping[str, str]

    def encode(self) -> str:
        # Casbin passes request values through as they are; one line per attribute
        # is unambiguous because neither paths nor tags may hold whitespace.
        lines = [f"path:{self.path}"]
        lines += [f"tag:{k}={v}" for k, v in sorted(self.tags.items())]
        return "\n".join(lines)


@dataclass(frozen=True)
class ObjectPattern:
    kind: str  # "node", "subtree" or "tag"
    path: str = ""  # for node and subtree: the folded path ("/" for the root)
    key: str = ""
    value: str = ""

    def matches(self, path: str, tags: Mapping[str, str]) -> bool:
        if self.kind == "tag":
            return tags.get(self.key) == self.value
        if self.kind == "node":
            return path == self.path
        return self.path == "/" or path == self.path or path.startswith(self.path + "/")


def parse_object(obj: str) -> ObjectPattern:
    """Parse a policy object; refuse anything that is not one of the three forms."""
    hidden = hidden_character(obj)
    if hidden:
        raise InvalidInput(f"policy object holds a control or format character ({hidden})")
    if obj == _ROOT_SUBTREE:
        return ObjectPattern("subtree", "/")
    match = _PATH_OBJECT.match(obj)
    # 'path://*' would also read as the root's subtree; only 'path:/*' is that.
    if match and not (match.group(1) == "/" and match.group(2)):
        path, star = match.group(1), match.group(2)
        return ObjectPattern("subtree" if star else "node", path)
    match = _TAG_OBJECT.match(obj)
    if match and TAG_KEY.match(match.group(1)) and TAG_VALUE.match(match.group(2)):
        return ObjectPattern("tag", key=match.group(1), value=match.group(2))
    raise InvalidInput(
        f"policy object {obj!r} is not one of path:/a/b, path:/a/b/* or tag:key=value "
        "(paths in lowercase, tag values without space, '=' or ',')"
    )


def object_match(request_obj: str, policy_obj: str) -> bool:
    """Casbin matcher function: does the encoded resource fall under the policy object?"""
    lines = request_obj.split("\n")
    path = lines[0].removeprefix("path:")
    tags = dict(line.removeprefix("tag:").split("=", 1) for line in lines[1:])
    try:
        pattern = parse_object(policy_obj)
    except InvalidInput:
        return False  # a malformed stored rule grants nothing
    return pattern.matches(path, tags)


def may_grant(policy_obj: str, action: str) -> bool:
    """Casbin matcher function: can an allow on `policy_obj` grant `action` at all?

    A tag object cannot grant `write` or `tag`: a writer could otherwise give its
    fact (or node) the very tag that lets it write there.
    """
    return not (action in PATH_GRANTED_ACTIONS and policy_obj.startswith("tag:"))


@dataclass(frozen=True)
class PolicyLine:
    """A policy line as the seed writes it: `p, alice, path:/a/*, read, allow` or `g, alice, r`."""

    ptype: str
    values: tuple[str, ...]

    def __str__(self) -> str:
        return ", ".join((self.ptype, *self.values))

    def as_dict(self) -> dict[str, object]:
        return {"line": str(self), "ptype": self.ptype, "values": list(self.values)}


def parse_policy_line(line: str) -> PolicyLine:
    # The whole line, before fields are stripped: a tab or newline is not a separator.
    hidden = hidden_character(line)
    if hidden:
        raise InvalidInput(f"policy line holds a control or format character ({hidden})")
    parts = [part.strip() for part in line.split(",")]
    ptype = parts[0] if parts else ""
    values = tuple(parts[1:])
    if ptype == "p":
        if len(values) != 4:
            raise InvalidInput(
                "a p line has five fields, p, SUBJECT, OBJECT, ACTION, EFFECT; "
                f"this one has {len(parts)}"
            )
        subject, obj, action, effect = values
        _check_subject(subject)
        parse_object(obj)
        if action not in ACTIONS:
            raise InvalidInput(f"policy action {action!r} is not one of {', '.join(ACTIONS)}")
        if effect not in EFFECTS:
            raise InvalidInput(f"policy effect {effect!r} is not allow or deny")
        if effect == "allow" and not may_grant(obj, action):
            # It would be silently ignored by the matcher: say so instead.
            raise InvalidInput(
                f"a tag rule cannot allow {action!r} (the writer chooses the tags); "
                f"allow it on a path (path:/a/b or path:/a/b/*), or use the tag rule to deny"
            )
    elif ptype == "g":
        if len(values) != 2:
            raise InvalidInput(
                f"a g line has three fields, g, MEMBER, ROLE; this one has {len(parts)}"
            )
        for name in values:
            _check_subject(name)
        if values[0] == values[1]:
            raise InvalidInput(f"a g line gives {values[0]!r} to itself")
    else:
        raise InvalidInput(f"a policy line starts with p or g, not {ptype!r}")
    return PolicyLine(ptype, values)


def _check_subject(name: str) -> None:
    try:
        validate_subject(name)
    except InvalidInput as exc:
        raise InvalidInput(f"subject {name!r}: {exc.detail.removeprefix('subject ')}") from None
