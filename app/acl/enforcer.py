"""The enforcer and per-subject access, kept in step with casbin_rule.

Policies live in casbin_rule of memory.db and are loaded through the SQLAlchemy
adapter. Any change to that table, by the API, the CLI or an import, bumps
meta.policy_version (a trigger does it), and every request compares that number
with the one its enforcer was loaded at: a change made either way takes effect
on the next request of a running server.

Subjects and roles are separate namespaces (SPEC: Access control). Casbin's g()
holds for a name and itself, so a subject named like a role would match every
line written for that role: a token whose `sub` is `admin` would be an admin.
`for_subject` is where a request's subject meets the loaded policies, so it
refuses such a subject there, for every front end alike.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

import casbin
from casbin.core_enforcer import CoreEnforcer
from casbin.util import SimpleEval
from sqlalchemy import ColumnElement, Connection, Engine, literal_column, select, text
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.elements import KeyedColumnElement
from sqlalchemy_adapter import Adapter

from app.acl.compile import read_predicate
from app.acl.model import (
    ADMIN,
    CASBIN_MODEL,
    EVERYONE,
    ObjectPattern,
    Resource,
    may_grant,
    object_match,
    parse_object,
)
from app.db.statements import Statements
from app.db.tables import meta
from app.errors import UNAUTHORIZED_MESSAGE, Unauthorized

log = logging.getLogger(__name__)
# Casbin's enforce() runs ast.parse on its matcher at every call, and CPython 3.11's AST
# state is shared between threads: concurrent parses from the request threads raised
# "SystemError: AST constructor recursion depth mismatch" (a 500 in the replica test
# under 16 writers). Decisions take microseconds; one at a time costs nothing visible.
_ENFORCE_LOCK = threading.Lock()
# Casbin logs policy lines and decisions at INFO and WARNING; configure_logging shows
# them at the debug log level only. Library use (tests, scripts) gets the same default.
_casbin_log = logging.getLogger("casbin")
if _casbin_log.level == logging.NOTSET:
    _casbin_log.setLevel(logging.ERROR)


class SubjectIsRole(Unauthorized):
    """A subject named like a role: refused like any bad token; `reason` is for the log.

    The detail is the one every authentication failure gives (app.auth.tokens), so a
    caller learns nothing about which names are roles.
    """

    def __init__(self, subject: str) -> None:
        super().__init__(UNAUTHORIZED_MESSAGE)
        self.subject = subject
        self.reason = (
            f"subject {subject!r} is a role name (the second field of a g line, or "
            f"{EVERYONE!r} or {ADMIN!r}); subjects and roles are separate namespaces"
        )

    @property
    def console_detail(self) -> str:
        # The owner at the console may know why (a server tells a client nothing).
        return self.reason


def role_names(enforcer: casbin.Enforcer) -> frozenset[str]:
    """Every name that is a role: the second field of a g line, plus everyone and admin."""
    return frozenset({EVERYONE, ADMIN, *(rule[1] for rule in enforcer.get_grouping_policy())})


def admins(links: Iterable[tuple[str, str]], *, roles: Iterable[str] = ()) -> frozenset[str]:
    """Who holds the admin role under these `g, MEMBER, ROLE` links, decided by an
    enforcer of the built-in model (so by Casbin's role manager, its depth limit
    included): every name that is not a role and reaches `admin`, and `everyone` when it
    does (then every subject does). Names in `roles` count as roles too: a role whose
    last member goes is nobody's, though Casbin would now take its name for a subject's.

    Empty means no token can manage policies, tokens, export or backup any more: only
    the command line on the database file could give the role back.
    """
    rules = [[member, role] for member, role in links]
    model = casbin.model.Model()
    model.load_model_from_text(CASBIN_MODEL)
    enforcer = casbin.Enforcer(model)
    if rules:
        enforcer.add_named_grouping_policies("g", rules)
    manager = enforcer.get_role_manager()
    not_subjects = role_names(enforcer) | set(roles)
    candidates = {member for member, _role in rules if member not in not_subjects} | {EVERYONE}
    return frozenset(name for name in candidates if manager.has_link(name, ADMIN))


@lru_cache(maxsize=8)
def _parsed_matcher(matcher: str) -> Any:
    """The matcher's syntax tree, as Casbin rewrites and parses it."""
    return CoreEnforcer._get_expression(matcher).ast_parsed_value


class _Enforcer(casbin.Enforcer):
    """Casbin's enforcer with its matcher parsed once: enforce() parses the same text
    again on every call (a quarter of a decision's time). Each call still gets its own
    evaluator, with that call's functions; only the tree, which evaluating never
    changes, is shared."""

    @staticmethod
    def _get_expression(expr: str, functions: dict[str, Any] | None = None) -> SimpleEval:
        evaluator = SimpleEval("", functions)  # "" skips the parse
        evaluator.expr = expr
        evaluator.ast_parsed_value = _parsed_matcher(expr)
        return evaluator


def build_enforcer(bind: Engine | Connection) -> casbin.Enforcer:
    """The enforcer of the policy lines `bind` reads. Given a connection, the adapter's
    session joins its transaction: the lines come from the caller's snapshot, and no
    second connection is drawn while the caller holds one (a cold server's first
    requests, each holding one, waited on the pool for its timeout: 503s)."""
    model = casbin.model.Model()
    model.load_model_from_text(CASBIN_MODEL)
    # The table is created by the migrations, never by the adapter.
    adapter = Adapter(bind, create_table=False)
    enforcer = _Enforcer(model, adapter)
    enforcer.add_function("objectMatch", object_match)
    enforcer.add_function("mayGrant", may_grant)
    return enforcer


def _fields(rule: list[str]) -> tuple[str, str, str, str]:
    sub, obj, act, eft = [*rule, "", "", "", ""][:4]
    return sub, obj, act, eft or "allow"


# Read at the start of every transaction: built once (app.db.statements).
_POLICY_VERSION = select(meta.c.value).where(meta.c.key == "policy_version")


def policy_version(conn: Connection) -> int:
    value = conn.execute(_POLICY_VERSION).scalar()
    return int(value or 0)


# Read fragments kept per Access: callers pass a few column pairs (facts, an alias).
_CLAUSES_KEPT = 8
# Access objects kept per loaded enforcer, one per subject.
_SUBJECTS_KEPT = 4096
# Decisions kept per Access (Access.can).
_DECISIONS_KEPT = 4096


@dataclass(frozen=True)
class Access:
    """What one subject may do, as seen by one loaded enforcer."""

    subject: str
    enforcer: casbin.Enforcer = field(repr=False)
    # The fragment is rendered once, in the SQL of the database it will run on.
    dialect: Dialect | None = field(default=None, repr=False, compare=False)
    # (fact_id, path_id, fragment) by the columns' ids: building a fragment costs ~1 ms.
    _clauses: dict[tuple[int, int], tuple[object, object, ColumnElement[bool]]] = field(
        default_factory=dict, repr=False, compare=False
    )
    # Statements built around this subject's fragments, kept for its next requests.
    statements: Statements = field(default_factory=Statements, repr=False, compare=False)
    # enforce()'s answers by (action, encoded resource): a pure function of the loaded
    # enforcer, which is never changed (a policy change loads a new one, and a new
    # Access). A batch stores many facts at one node, a page asks the same of its facts.
    _decisions: Statements = field(
        default_factory=lambda: Statements(kept=_DECISIONS_KEPT), repr=False, compare=False
    )

    @cached_property
    def principals(self) -> frozenset[str]:
        """The subject, `everyone`, and every role either holds (transitively)."""
        heads = (self.subject, EVERYONE)
        found: set[str] = set()
        for name in heads:
            found.update(self.enforcer.get_implicit_roles_for_user(name))
        # Keep only the roles the matcher's g() reaches: the role manager stops after
        # max_hierarchy_level links, while get_implicit_roles_for_user does not.
        links = self.enforcer.get_role_manager()
        reached = {r for r in found if any(links.has_link(h, r) for h in heads)}
        return frozenset({*heads, *reached})

    @cached_property
    def roles(self) -> list[str]:
        return sorted(self.principals - {self.subject})

    @property
    def is_admin(self) -> bool:
        return ADMIN in self.principals

    def holds(self, role: str) -> bool:
        """Whether a g line gives the subject `role` (its own name is not a role it holds)."""
        return role in self.principals and role != self.subject

    def rules(self, action: str) -> list[tuple[ObjectPattern, str]]:
        if action == "read":
            return list(self._read_rules)
        return self._rules(action)

    @cached_property
    def _read_rules(self) -> tuple[tuple[ObjectPattern, str], ...]:
        return tuple(self._rules("read"))

    def _rules(self, action: str) -> list[tuple[ObjectPattern, str]]:
        found = []
        for rule in self.enforcer.get_policy():
            sub, obj, act, eft = _fields(rule)
            if sub in self.principals and act == action:
                try:
                    found.append((parse_object(obj), eft))
                except Exception:
                    continue  # a malformed stored rule grants nothing (see object_match)
        return found

    def permissions(self) -> list[dict[str, str]]:
        rows = []
        for rule in self.enforcer.get_policy():
            sub, obj, act, eft = _fields(rule)
            if sub in self.principals:
                rows.append({"subject": sub, "object": obj, "action": act, "effect": eft})
        return rows

    def read_clause(
        self, fact_id: KeyedColumnElement[int], path_id: KeyedColumnElement[int]
    ) -> ColumnElement[bool]:
        """The WHERE fragment that keeps only the facts this subject may read."""
        key = (id(fact_id), id(path_id))
        kept = self._clauses.get(key)
        if kept is not None and kept[0] is fact_id and kept[1] is path_id:
            return kept[2]
        built = read_predicate(self._read_rules, fact_id, path_id)
        # Rendered once to SQL text: SQLAlchemy would otherwise walk the whole fragment
        # to make a cache key on every execute (most of a search's Python time). The
        # literals are policy objects that parse_object validated; the renderer quotes them.
        clause = _as_text(built, fact_id, self.dialect)
        if len(self._clauses) >= _CLAUSES_KEPT:
            self._clauses.clear()
        # Holding the columns keeps their ids from being reused by other objects.
        self._clauses[key] = (fact_id, path_id, clause)
        return clause

    def can(self, action: str, resource: Resource) -> bool:
        obj = resource.encode()

        def decide() -> bool:
            with _ENFORCE_LOCK:
                return bool(self.enforcer.enforce(self.subject, obj, action))

        return self._decisions.get((action, obj), decide)


def _as_text(
    clause: ColumnElement[bool], fact_id: KeyedColumnElement[int], dialect: Dialect | None
) -> Any:
    """Render the fragment once to SQL text. SQLAlchemy would otherwise walk the whole
    fragment to make a cache key on every execute: most of a search's Python time.

    It is rendered as the WHERE of a SELECT over the facts table (or alias) it filters,
    so that its correlated subqueries correlate to that table as they will in use. The
    literals are policy objects that parse_object validated; the renderer quotes them.
    """
    outer: Any = select(literal_column("1")).select_from(fact_id.table).where(clause)
    if dialect is None:
        from sqlalchemy.dialects import sqlite

        dialect = sqlite.dialect()
    sql = str(outer.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))
    head, sep, where = sql.partition("\nWHERE ")
    if not sep or "WHERE" in head:
        raise RuntimeError("could not render the read fragment")  # a SQLAlchemy change
    # text() reads ":name" as a bind parameter, and a tag value may start with ":"
    # (policy "tag:k=:x"); escaped colons are taken as they are.
    return text(f"({where})".replace(":", "\\:"))


class AccessControl:
    """Holds the enforcer; reloads it when casbin_rule changed since it was loaded."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._lock = threading.Lock()
        self._enforcer: casbin.Enforcer | None = None
        # (roles, the enforcer they were read from): swapped whole, so threads agree.
        self._roles_of: tuple[frozenset[str], casbin.Enforcer | None] = (frozenset(), None)
        self._version = -1
        self._subjects: dict[str, Access] = {}

    def for_subject(self, conn: Connection, subject: str) -> Access:
        """The subject's access under the current policies; SubjectIsRole for a role name."""
        enforcer = self.current(conn)
        if subject in self.roles(enforcer):
            refused = SubjectIsRole(subject)
            # Warning, not debug: an identity provider or a token issuer hands out a
            # role's name, which the operator must fix (or someone is trying it).
            log.warning("refused a request: %s", refused.reason)
            raise refused
        access = self._subjects.get(subject)
        if access is None or access.enforcer is not enforcer:
            # One Access per subject and enforcer, so its rules and fragments are reused.
            if len(self._subjects) >= _SUBJECTS_KEPT:
                self._subjects.clear()
            access = self._subjects[subject] = Access(subject, enforcer, self._engine.dialect)
        return access

    def roles(self, enforcer: casbin.Enforcer) -> frozenset[str]:
        """The role names of `enforcer` (computed once per loaded enforcer)."""
        roles, loaded_for = self._roles_of
        if loaded_for is not enforcer:
            roles = role_names(enforcer)
            self._roles_of = (roles, enforcer)
        return roles

    def current(self, conn: Connection) -> casbin.Enforcer:
        version = policy_version(conn)
        enforcer = self._enforcer
        if enforcer is not None and version == self._version:
            return enforcer
        with self._lock:
            if self._enforcer is None or version != self._version:
                # Build a fresh enforcer and swap it in whole: requests already
                # holding the old one finish with a consistent view.
                fresh = build_enforcer(conn)
                self._enforcer, self._version = fresh, version
            return self._enforcer
