"""The peer's side of bench/peer_bench.py, run by the PEER's python (its own virtualenv):

    .venv-peer/bin/python -m bench.peer_runner [--threads N] DB_PATH   # from the repo's root
    python -m bench.peer_runner --fake DB_PATH                  # the stand-in (bench/peer_fake.py)

Opens mcp-memory-service-lite's SQLite-vec storage (SqliteVecMemoryStorage, what its
MCP tools and HTTP API call) on DB_PATH and answers one JSON object per line on
stdin with one JSON object per line on stdout:

    {"op": "store", "content": "..."}                  storage.store(Memory(...))
    {"op": "preload", "contents": ["...", ...]}        storage.store_batch(...)
    {"op": "search", "query": "...", "mode": "semantic"|"hybrid"|"exact", "limit": 10}
                                                       storage.search_memories(...)
    {"op": "bm25", "query": "...", "limit": 10}        its hybrid's keyword half
    {"op": "get", "hash": "..."}                       storage.get_by_hash(...)
    {"op": "list", "limit": 10}                        storage.get_all_memories(limit=...)
    {"op": "delete", "hash": "..."}                    storage.delete(...)
    {"op": "embed", "text": "..."}                     its model's vector of a text
    {"op": "count"}  {"op": "info"}  {"op": "quit"}

Each answer is {"ok": true, "seconds": S, "stages": {...}, "result": ...} (S timed in
this process around the call alone: no pipe, no JSON) or {"ok": false, "error": "..."}.
Stages: "embed" (the model's encode), "dedup" (its semantic-duplicate check on store,
embedding included), "vector" (retrieve, the semantic half, embedding included),
"bm25" (_search_bm25) and "conflicts" (its post-commit conflict detection).

Standard library only (and the peer): this file must not import embornal or numpy.
The model is whatever the peer finds at its own path under $HOME: the bench points
$HOME at a directory holding embornal's model files (bench/peer_bench.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from bench.stages import Timers


class Peer:
    def __init__(self, db_path: str, fake: bool) -> None:
        if fake:
            from bench import peer_fake as models
            from bench.peer_fake import FakeStorage as Storage
            from bench.peer_fake import generate_content_hash
        else:  # pragma: no cover - needs the peer's virtualenv
            from mcp_memory_service.models import memory as models
            from mcp_memory_service.storage.sqlite_vec import SqliteVecMemoryStorage as Storage
            from mcp_memory_service.utils.hashing import generate_content_hash
        self.fake = fake
        self._memory = models.Memory
        self._hash = generate_content_hash
        self.storage: Any = Storage(db_path)
        self.timers = Timers()
        self.loop = asyncio.new_event_loop()

    def open(self) -> None:
        self.loop.run_until_complete(self.storage.initialize())
        s, timers = self.storage, self.timers
        timers.wrap(s.embedding_model, "encode", "embed")
        timers.wrap(s, "_check_semantic_duplicate", "dedup")
        timers.wrap(s, "retrieve", "vector")
        timers.wrap(s, "_search_bm25", "bm25")
        if hasattr(s, "_detect_conflicts"):
            timers.wrap(s, "_detect_conflicts", "conflicts")

    def memory(self, content: str) -> Any:
        return self._memory(content=content, content_hash=self._hash(content), tags=[])

    async def run(self, request: dict[str, Any]) -> Any:
        s, op = self.storage, request["op"]
        if op == "store":
            memory = self.memory(request["content"])
            stored, message = await s.store(memory)
            return {"stored": stored, "hash": memory.content_hash, "message": str(message)}
        if op == "preload":
            done = await s.store_batch([self.memory(text) for text in request["contents"]])
            return {"stored": sum(1 for ok, _ in done if ok)}
        if op == "search":
            found = await s.search_memories(
                query=request["query"], mode=request["mode"], limit=request.get("limit", 10)
            )
            if found.get("error"):
                raise RuntimeError(found["error"])
            return {"hashes": [m["content_hash"] for m in found["memories"]]}
        if op == "bm25":
            hits = await s._search_bm25(request["query"], request.get("limit", 10))
            return {"hashes": [content_hash for content_hash, _ in hits]}
        if op == "get":
            memory = await s.get_by_hash(request["hash"])
            return {"found": memory is not None}
        if op == "list":
            memories = await s.get_all_memories(limit=request.get("limit", 10))
            return {"hashes": [m.content_hash for m in memories]}
        if op == "delete":
            deleted, _ = await s.delete(request["hash"])
            return {"deleted": bool(deleted)}
        if op == "embed":  # the bench checks that both sides embed alike
            vector = s.embedding_model.encode([request["text"]])[0]
            return {"vector": [float(x) for x in vector]}
        if op == "count":
            return {"count": await s.count_all_memories()}
        if op == "info":
            return self.info()
        raise ValueError(f"unknown op {op!r}")

    def info(self) -> dict[str, Any]:
        if self.fake:
            return {"package": "bench.peer_fake (stand-in)", "version": "0", "model": "words"}
        from importlib.metadata import version  # pragma: no cover - the peer's venv

        model = self.storage.embedding_model  # pragma: no cover
        return {  # pragma: no cover
            "package": "mcp-memory-service-lite",
            "version": version("mcp-memory-service-lite"),
            "model": f"{type(model).__name__} {getattr(model, '_model_dir', '')}",
            "dimension": self.storage.embedding_dimension,
            "sqlite": __import__("sqlite3").sqlite_version,
            "onnxruntime": version("onnxruntime"),
        }

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        self.timers.take()
        t0 = time.perf_counter()
        try:
            result = self.loop.run_until_complete(self.run(request))
        except Exception as exc:  # the bench shows it; the runner keeps serving
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        seconds = time.perf_counter() - t0
        return {"ok": True, "seconds": seconds, "stages": self.timers.take(), "result": result}


def pin_onnx_threads(threads: int) -> None:  # pragma: no cover - the peer's venv
    """Every ONNX session the peer opens runs on `threads` threads: its code passes no
    options (onnxruntime's choice), so the session's constructor is given them."""
    import onnxruntime as ort

    opened = ort.InferenceSession

    def session(path: Any, sess_options: Any = None, *args: Any, **kwargs: Any) -> Any:
        options = sess_options or ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1  # as embornal's (app/embeddings/onnx_embedder.py)
        return opened(path, options, *args, **kwargs)

    ort.InferenceSession = session


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("db", help="the peer's database file")
    parser.add_argument("--fake", action="store_true", help="the stand-in, not the peer")
    parser.add_argument("--threads", type=int, default=0, help="ONNX threads; 0: its own choice")
    args = parser.parse_args(argv)
    # The answers own stdout: whatever the peer prints goes to stderr.
    out, sys.stdout = sys.stdout, sys.stderr
    if args.threads and not args.fake:
        pin_onnx_threads(args.threads)  # pragma: no cover - the peer's venv
    peer = Peer(args.db, args.fake)
    t0 = time.perf_counter()
    peer.open()
    ready = {"ok": True, "seconds": time.perf_counter() - t0, "stages": {}, "result": peer.info()}
    out.write(json.dumps(ready) + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "quit":
            break
        out.write(json.dumps(peer.answer(request)) + "\n")
        out.flush()
    peer.loop.run_until_complete(peer.storage.close())
    peer.loop.close()


if __name__ == "__main__":
    main()
