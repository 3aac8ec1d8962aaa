"""What a new memory holds: the /memory facts and the default policies.

The migrations write them, and an import reads them to tell a fresh memory
(one that holds only this) from one with the user's own content. One definition,
imported by both.
"""

from __future__ import annotations

from app.rules import LOCAL_SUBJECT

# The /memory facts are the local subject's.
SEED_OWNER = LOCAL_SUBJECT
# Where the migration writes them. The nodes a new memory has: the root and /memory.
SEED_PATH = "/memory"
SEED_PATHS = frozenset({"/", SEED_PATH})

# What an agent learns by reading /memory (seed: "The migration writes /memory").
MEMORY_FACTS = [
    "This memory is a wiki of small facts. Store one small statement at a time under a "
    "path such as /projects/embornal; find facts again by keyword, by meaning, or by strength.",
    "Paths are folded to lowercase. Each segment starts with a letter or digit and holds "
    "letters, digits, '.', '_' and '-'. A path holds structure only: text about a path is a "
    "fact of that path.",
    "A fact never changes. To correct one, store a new fact with supersedes_id set to the old "
    "fact's id; to remove one, delete it. The history of the chain stays readable.",
    "Every fact has a strength, exp(-days since last recall / stability). Reading a fact by id "
    "or through search is a recall and makes it stronger, most of all when it was almost "
    "forgotten. Pass peek=true to read without a recall.",
    "Tags are key=value pairs on facts and on paths. A fact inherits the tags of the paths "
    "above it, the nearest winning, and its own tags beat inherited ones. The memory writes "
    "the owner tag itself; a store that sets owner is refused.",
    "Link to another topic by writing [[/some/path]] in a fact; the memory shows links parsed "
    "when it shows the fact. Start exploring at [[/memory]].",
    "Access is decided by policies such as 'p, alice, path:/work/*, read, allow' or "
    "'p, alice, tag:owner=alice, read, allow'. A deny beats every allow; no policy means no "
    "access. Facts tagged visibility=public are readable by every authenticated subject.",
]


def is_seed_fact(fact_id: int, path: str, content: str, owner: str) -> bool:
    """Whether a fact is one the migration wrote, told by the id it gives each text.

    Every memory writes them at its own creation, so two memories' copies differ in
    created_at; ids are never reused, and a restore keeps them, so the id tells them
    from the same text stored by hand.
    """
    return (
        1 <= fact_id <= len(MEMORY_FACTS)
        and MEMORY_FACTS[fact_id - 1] == content
        and path == SEED_PATH
        and owner == SEED_OWNER
    )


DEFAULT_POLICIES = [
    ("p", "default", "path:/*", "read", "allow"),
    ("p", "default", "path:/*", "write", "allow"),
    ("p", "default", "path:/*", "delete", "allow"),
    ("p", "everyone", "tag:visibility=public", "read", "allow"),
    ("g", "default", "admin", None, None),
]

# Added by migration 0002 (the `tag` action), to new and upgraded memories alike.
TAG_POLICY = ("p", "default", "path:/*", "tag", "allow")

# What a memory fresh from its migrations holds: the lines of 0001, then of 0002.
FRESH_POLICIES = [*DEFAULT_POLICIES, TAG_POLICY]
