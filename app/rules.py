"""The rules of the product that more than one layer checks, each defined once.

The HTTP schemas declare these bounds to clients (and OpenAPI), the services
enforce them for every front end, and the ACL parses policy objects with the same
path and tag rules that user input is folded by (SPEC: Paths, Tags, Search).
"""

from __future__ import annotations

import re
from typing import Literal, get_args

# The subject the local command line acts as; it owns the /memory facts (seed).
LOCAL_SUBJECT = "default"

# SQLite integers are signed 64-bit: a larger fact id is refused as input, not overflowed.
MAX_ID = 2**63 - 1

# --- paths -------------------------------------------------------------------
MAX_SEGMENTS = 32
MAX_SEGMENT_CHARS = 64
# One segment, folded: a letter or digit, then letters, digits, '.', '_' or '-'.
SEGMENT = rf"[a-z0-9][a-z0-9._-]{{0,{MAX_SEGMENT_CHARS - 1}}}"
SEGMENT_RE = re.compile(rf"^{SEGMENT}$")

# --- tags --------------------------------------------------------------------
TAG_KEY = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
TAG_VALUE = re.compile(r"^[^\s=,]{1,256}$")
# The tag the memory writes on every fact from its writer (seed: "Who owns a fact").
OWNER_KEY = "owner"
# A node's own tags, and so a request that sets them (SPEC: "more than 32 tags" is a
# 4xx): every fact beneath carries them among its effective tags.
MAX_PATH_TAGS = 32

# --- listing and search ------------------------------------------------------
MAX_LIMIT = 100  # a page of facts or of search results (SPEC: "limit ... at most 100")
MAX_QUERY_CHARS = 4000
Mode = Literal["keyword", "semantic", "hybrid"]
MODES: tuple[Mode, ...] = get_args(Mode)
ListSort = Literal["created", "strength"]
LIST_SORTS: tuple[ListSort, ...] = get_args(ListSort)
SearchSort = Literal["relevance", "strength"]
SEARCH_SORTS: tuple[SearchSort, ...] = get_args(SearchSort)
# What a store does when an existing fact the writer can read is `similar`: store it
# anyway and say so, or refuse (409) and write nothing.
OnDuplicate = Literal["allow", "refuse"]
ON_DUPLICATE: tuple[OnDuplicate, ...] = get_args(OnDuplicate)
MAX_SIMILAR = 3

# --- memory over time ----------------------------------------------------------
# What an `as_of` read shows as it is today, not as it was: the schema records when
# each fact was created, deleted and superseded, but no history of recalls, of path
# tags or of policies. Named in every `as_of` answer and in docs/api.md.
AS_OF_TODAY: tuple[str, ...] = (
    "strength",
    "recall_count",
    "last_recall_at",
    "stability_days",
    "effective_tags (path tags have no history)",
    "links",
    "access rules",
)

# --- tokens ------------------------------------------------------------------
# A token id (`jti`) as this memory signs it or an identity provider may; a label.
MAX_JTI_CHARS = 256
MAX_LABEL_CHARS = 200
TokenStatus = Literal["active", "revoked", "expired"]

# --- the activity record ---------------------------------------------------------
# The front end a change came through, as the activity record names it.
FrontEnd = Literal["rest", "mcp", "cli", "ui"]
FRONT_ENDS: tuple[FrontEnd, ...] = get_args(FrontEnd)
# Every kind of change the record holds (a recall is not a change).
ActivityAction = Literal[
    "store",
    "supersede",
    "delete",
    "tag_set",
    "tag_remove",
    "policy_add",
    "policy_remove",
    "token_issue",
    "token_revoke",
    "import",
    "restore",
]
ACTIVITY_ACTIONS: tuple[ActivityAction, ...] = get_args(ActivityAction)
