"""A stand-in for the peer's storage (mcp-memory-service-lite's SqliteVecMemoryStorage):
the same method names and signatures bench/peer_runner.py calls, in memory, with a
word-count "embedding". `python -m bench.peer_runner --fake` drives it, so the
runner and the bench's client of it run in `make test` without the peer installed.

Standard library only, like the runner. Its figures mean nothing.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

WIDTH = 16


def generate_content_hash(content: str) -> str:
    return hashlib.sha256(content.strip().lower().encode()).hexdigest()


@dataclass
class Memory:
    content: str
    content_hash: str
    tags: list[str] = field(default_factory=list)


@dataclass
class MemoryQueryResult:
    memory: Memory
    relevance_score: float


class WordModel:
    """Words hashed into a few buckets, normalized: a model with the peer's encode()."""

    embedding_dimension = WIDTH

    def encode(self, texts: list[str], convert_to_numpy: bool = True) -> list[list[float]]:
        out = []
        for text in texts:
            vector = [0.0] * WIDTH
            for word in text.lower().split():
                vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % WIDTH] += 1.0
            norm = math.sqrt(sum(x * x for x in vector)) or 1.0
            out.append([x / norm for x in vector])
        return out


class FakeStorage:
    """In memory; the peer's defaults kept where the runner's figures depend on them:
    a store is refused as a near duplicate from cosine 0.85."""

    semantic_dedup_threshold = 0.85

    def __init__(self, db_path: str, embedding_model: str = "all-MiniLM-L6-v2") -> None:
        self.db_path = db_path
        self.embedding_model_name = embedding_model
        self.embedding_model = WordModel()
        self.embedding_dimension = WIDTH
        self.rows: dict[str, tuple[Memory, list[float]]] = {}

    async def initialize(self) -> None:
        return None

    def _generate_embedding(self, text: str) -> list[float]:
        return self.embedding_model.encode([text])[0]

    async def _check_semantic_duplicate(self, content: str) -> tuple[bool, str | None]:
        vector = self._generate_embedding(content)
        for content_hash, (_, other) in self.rows.items():
            if _cosine(vector, other) >= self.semantic_dedup_threshold:
                return True, content_hash
        return False, None

    async def store(self, memory: Memory) -> tuple[bool, str]:
        if memory.content_hash in self.rows:
            return False, "Duplicate content detected (exact match)"
        duplicate, existing = await self._check_semantic_duplicate(memory.content)
        if duplicate:
            return False, f"Duplicate content detected (semantically similar to {existing})"
        self.rows[memory.content_hash] = (memory, self._generate_embedding(memory.content))
        return True, "Memory stored successfully"

    async def store_batch(self, memories: list[Memory]) -> list[tuple[bool, str]]:
        out = []
        for memory in memories:
            stored = memory.content_hash not in self.rows
            if stored:
                self.rows[memory.content_hash] = (memory, self._generate_embedding(memory.content))
            out.append((stored, "stored" if stored else "duplicate"))
        return out

    async def retrieve(self, query: str, n_results: int = 5) -> list[MemoryQueryResult]:
        vector = self._generate_embedding(query)
        scored = [
            MemoryQueryResult(memory, _cosine(vector, other))
            for memory, other in self.rows.values()
        ]
        return sorted(scored, key=lambda r: -r.relevance_score)[:n_results]

    async def _search_bm25(self, query: str, n_results: int = 5) -> list[tuple[str, float]]:
        words = set(query.lower().split())
        hits = []
        for content_hash, (memory, _) in self.rows.items():
            shared = len(words & set(memory.content.lower().split()))
            if shared:
                hits.append((content_hash, -float(shared)))
        return sorted(hits, key=lambda hit: hit[1])[:n_results]

    async def search_memories(
        self, query: str | None = None, mode: str = "semantic", limit: int = 10
    ) -> dict[str, Any]:
        if mode == "exact":
            needle = (query or "").lower()
            found = [m for m, _ in self.rows.values() if needle in m.content.lower()]
        elif mode == "hybrid":
            keyword = dict(await self._search_bm25(query or "", limit * 2))
            semantic = await self.retrieve(query or "", limit * 2)
            ranked = {r.memory.content_hash: r.relevance_score for r in semantic}
            for content_hash in keyword:
                ranked[content_hash] = ranked.get(content_hash, 0.0) + 0.3
            order = sorted(ranked, key=lambda h: -ranked[h])
            found = [self.rows[h][0] for h in order]
        else:
            found = [r.memory for r in await self.retrieve(query or "", limit)]
        memories = [{"content_hash": m.content_hash, "content": m.content} for m in found[:limit]]
        return {"memories": memories, "total": len(memories), "query": query, "mode": mode}

    async def get_by_hash(self, content_hash: str) -> Memory | None:
        row = self.rows.get(content_hash)
        return row[0] if row else None

    async def get_all_memories(self, limit: int | None = None) -> list[Memory]:
        newest = [memory for memory, _ in reversed(self.rows.values())]
        return newest[:limit] if limit else newest

    async def count_all_memories(self) -> int:
        return len(self.rows)

    async def delete(self, content_hash: str) -> tuple[bool, str]:
        return (self.rows.pop(content_hash, None) is not None), "deleted"

    async def close(self) -> None:
        self.rows.clear()


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))
