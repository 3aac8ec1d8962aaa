"""What a tool result's text block says: per fact what an agent acts on, no more.

A language model reads the text block; programs read the structured content, which
holds the full records as the REST API gives them. The text used to repeat the
structured content: three search results came to 2,300 characters of JSON for 240
characters of facts, twice (issue 31, bench/mcp_bench.py). Here each fact is its
id, path and content (a search result adds its score); a state an agent must not
miss (superseded, deleted) is named only when it holds. A store answers with ids
and paths (the agent just wrote the content) and the `similar` facts to supersede.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Data = Mapping[str, Any]


def fact(f: Data) -> dict[str, Any]:
    out: dict[str, Any] = {"id": f["id"], "path": f["path"], "content": f["content"]}
    if f.get("superseded_by_id") is not None:
        out["superseded_by_id"] = f["superseded_by_id"]
    elif f.get("superseded"):
        out["superseded"] = True
    if f.get("deleted_at") is not None:
        out["deleted_at"] = f["deleted_at"]
    return out


def stored(f: Data) -> dict[str, Any]:
    out: dict[str, Any] = {"id": f["id"], "path": f["path"]}
    if f.get("similar"):
        out["similar"] = [
            {"id": s["id"], "path": s["path"], "cosine": round(s["cosine"], 2)}
            for s in f["similar"]
        ]
    return out


def stored_batch(data: Data) -> dict[str, Any]:
    return {"facts": [stored(f) for f in data["facts"]]}


def search(data: Data) -> dict[str, Any]:
    results = []
    for result in data["results"]:
        f = result["fact"]
        # The score after the path, before the content: a model reads the ranking first.
        ranked = {"id": f["id"], "path": f["path"], "score": round(result["score"], 4)}
        results.append(ranked | fact(f))
    return {"mode": data["mode"], "results": results}


def page(data: Data) -> dict[str, Any]:
    out: dict[str, Any] = {"facts": [fact(f) for f in data["facts"]]}
    if data.get("next_cursor"):
        out["next_cursor"] = data["next_cursor"]
    return out


def history(data: Data) -> dict[str, Any]:
    # When each version was written is what a history is read for.
    return {"facts": [fact(f) | {"created_at": f["created_at"]} for f in data["facts"]]}


def node(data: Data) -> dict[str, Any]:
    out: dict[str, Any] = {"path": data["path"], "tags": data["tags"]}
    if data["effective_tags"] != data["tags"]:
        out["effective_tags"] = data["effective_tags"]
    if data["children"]:
        out["children"] = [
            {"path": c["path"], "fact_count": c["fact_count"]} for c in data["children"]
        ]
    if "facts" in data:
        out |= page(data)
    return out


def tagged(data: Data) -> dict[str, Any]:
    return {"path": data["path"], "tags": data["tags"], "effective_tags": data["effective_tags"]}


def policies(data: Data) -> dict[str, Any]:
    return {"policies": [p["line"] for p in data["policies"]]}


def policy(data: Data) -> dict[str, Any]:
    return {"line": data["line"]}


def whole(data: Data) -> Data:
    """A result with no fact in it (whoami, a deletion): small already, said whole."""
    return data
