"""What the MCP front end costs an agent's context: `tools/list`, and a search's answer.

    python -m bench.mcp_bench                  # now, and before issue 31 (b7a5248)
    python -m bench.mcp_bench --before REV     # now, and another revision of this repo
    python -m bench.mcp_bench --smoke          # now only: what `make test` runs

An agent's client sends `tools/list` to the model with every conversation, and each
tool result's text block with each call. Each side is measured in a fresh process on
a new memory (EMBORNAL_HOME in a temporary directory) through the SDK's in-process
client: the characters of the `tools/list` result as JSON, and for a hybrid search
that finds three facts of about 80 characters each (the deterministic fake embedder,
so no model is needed) the characters of its text block, of its structured content
(compact JSON), and of the three facts' contents. "before" is the same measurement
on a revision's `app/` and `migrations/` (git archive), imported instead of this
checkout's. The limit (tests/mcp/test_mcp_tools.py) is 12,000 characters for
`tools/list`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# main when issue 31 began: tools/list was ~45,000 characters.
BEFORE = "b7a5248"
WIDTH = 384
FACTS = [
    ("/home/kitchen", "The kettle is blue and stands to the left of the stove, by the window."),
    ("/home/garden", "The blue watering can hangs on the second hook inside the garden shed."),
    ("/home/car", "The spare car key is in the blue box on the shelf in the hall cupboard."),
]
QUERY = "where is the blue kettle, the watering can and the car key"


def compact(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


async def _measure(home: Path) -> dict[str, int]:
    # Imported here: in a child process these are the measured revision's modules.
    from mcp import Client

    from app.dirs import Dirs
    from app.embeddings.fake import FakeEmbedder
    from app.mcp.server import build_server
    from app.settings import load_settings
    from app.usecases.memory import NewFact, open_memory

    env = {"EMBORNAL_EMBEDDING__MODEL": "none", "EMBORNAL_EMBEDDING__WIDTH": str(WIDTH)}
    settings = load_settings(Dirs(home, home, home), env=env)
    with open_memory(settings) as memory:
        memory.runtime.embedder = FakeEmbedder(WIDTH)
        for path, content in FACTS:
            memory.store("default", NewFact(path, content, {}, None))
        server = build_server(lambda: memory, lambda: "default")
        async with Client(server) as client:
            listed = await client.list_tools()
            found = await client.call_tool(
                "search_facts", {"query": QUERY, "mode": "hybrid", "under": "/home", "peek": True}
            )
    structured = found.structured_content or {}
    return {
        "tools": len(listed.tools),
        "tools_list": len(listed.model_dump_json(by_alias=True, exclude_none=True)),
        "results": len(structured.get("results", [])),
        "text": sum(len(block.text) for block in found.content if block.type == "text"),
        "structured": len(compact(structured)) if structured else 0,
        "content": sum(len(r["fact"]["content"]) for r in structured.get("results", [])),
    }


def measure_in(source: Path | None) -> dict[str, int]:
    """The figures of `source`'s app/ (this checkout's when None), in a new process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EMBORNAL_", "XDG_"))}
    if source is not None:
        env["PYTHONPATH"] = str(source)
    with tempfile.TemporaryDirectory(prefix="embornal-mcp-bench-") as home:
        # Run as a script, so that `app` is the one PYTHONPATH names, not this checkout's.
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--measure", home],
            env=env,
            cwd=source or ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr else "failed")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def extract(revision: str, into: Path) -> Path:
    """The revision's app/ and migrations/, as git holds them, under `into`."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", revision, "app", "migrations"],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def row(label: str, m: dict[str, int]) -> str:
    share = m["text"] / m["content"] if m["content"] else 0.0
    return (
        f"| {label} | {m['tools']} | {m['tools_list']:,} | {m['results']} | {m['content']:,} "
        f"| {m['text']:,} | {m['structured']:,} | {share:.1f} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="this checkout only")
    parser.add_argument("--before", default=BEFORE, help="the revision to compare with")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.measure is not None:
        print(compact(asyncio.run(_measure(options.measure))))
        return 0

    from bench.machine import report_load

    rows = [("now", measure_in(None))]
    missing = None
    if not options.smoke:
        with tempfile.TemporaryDirectory(prefix="embornal-before-") as tree:
            try:
                before = measure_in(extract(options.before, Path(tree)))
                rows.insert(0, (f"before ({options.before})", before))
            except (subprocess.CalledProcessError, RuntimeError, OSError) as exc:
                missing = f"{options.before} not measured: {exc}"
    print(
        "| | tools | tools/list chars | results | their content chars | text block chars "
        "| structured chars | text / content |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, figures in rows:
        print(row(label, figures))
    if missing:
        print(missing)
    print(f"A hybrid search for {QUERY!r} over {len(FACTS)} facts; tools/list limit 12,000.")
    report_load()
    return 0


if __name__ == "__main__":
    sys.exit(main())
