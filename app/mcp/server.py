"""The MCP front end: the memory's verbs as tools, its tree as resources, and a prompt.

One low-level `mcp` Server serves both transports (streamable HTTP in app.mcp.http,
stdio in app.mcp.stdio). Every tool is one call on app.usecases.memory.Memory, run
in a worker thread (SQLite and the model block), as the subject the transport
names: the token's `sub` over HTTP, `default` over stdio. Checks, limits and
access rules all live behind that call; this module only shapes input and output.

The low-level Server rather than MCPServer: MCPServer neither refuses unknown
arguments nor lets an error reach the model as just its message (it prefixes
"Error executing tool ..." and drops the text of errors it did not expect). Here a
refused call is a tool error (isError) whose text is the one-line `detail` the
HTTP API's problem would carry; nothing else of an error leaves the server.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import anyio.to_thread
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from prometheus_client import CollectorRegistry, Counter, Histogram
from pydantic import BaseModel, ValidationError

from app import __version__
from app.errors import EmbornalError, InvalidInput, invalid_detail, is_public, problem_body
from app.mcp import briefs
from app.mcp import schemas as s
from app.schemas.facts import Fact, FactList, FactsOut, StoredFact, StoredFacts
from app.schemas.meta import WhoAmI
from app.schemas.paths import PathOut, PathWithFacts
from app.schemas.policies import Policy, PolicyList
from app.schemas.search import SearchOut
from app.usecases.memory import Memory, NewFact, SearchRequest, moment_of

log = logging.getLogger("embornal.mcp")

# Told to every client at connection (initialize instructions) and as the prompt below.
GUIDE = """\
This is your long-term memory: a tree of small facts that outlives this conversation.

- Search before you store (search_facts): the fact may already be there.
- Store one small, self-contained statement per fact (store_fact), under a topical
  path such as /projects/<name>/decisions or /people/<name>. Browse the tree
  (browse_path) to find the path a topic already has rather than inventing a new one.
- Never store the same thing twice. To correct or update a fact, store the new
  version with supersedes_id set to the old fact's id: searches then find only the
  new one, and fact_history keeps what was believed before. A store answers with
  `similar`, the facts you can read that say nearly the same: when one states the
  same thing, supersede it instead of keeping both. Many facts at once: store_facts.
- To see what the memory believed at a moment (why you acted as you did), pass
  as_of (e.g. 2026-12-01T09:30:00Z) to search_facts, list_facts, get_fact or
  fact_history.
- Delete (delete_fact) only what is wrong and has no replacement.
- Reading a fact by id or through search is a recall: it keeps useful facts strong.
  Pass peek=true to look without counting one.
- The facts under /memory explain this memory (resource embornal://memory).
"""

MEMORY_URI = "embornal://memory"
PATH_URI = "embornal://path/"
INTERNAL_DETAIL = "The server failed to handle the request."

# What a tool gets: the memory, the subject, the checked arguments.
Handler = Callable[[Memory, str, Any], Any]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    input: type[s.ToolInput]
    # Checks and shapes the use case's result: the structured content, REST's records.
    output: type[BaseModel]
    run: Handler
    # What the text block says, from the structured content (app.mcp.briefs).
    brief: Callable[[dict[str, Any]], Any]
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False

    def describe(self) -> types.Tool:
        # No output schema: the model reads the text block (the brief), and the records
        # in the structured content are REST's (openapi.json), described there. Output
        # schemas were two thirds of a 45,000-character tools/list (bench/mcp_bench.py).
        return types.Tool(
            name=self.name,
            title=self.title,
            description=self.description,
            input_schema=s.compact(self.input.model_json_schema()),
            annotations=types.ToolAnnotations(
                read_only_hint=self.read_only,
                destructive_hint=self.destructive,
                idempotent_hint=self.idempotent,
                # The memory is a closed world: a tool touches nothing outside it.
                open_world_hint=False,
            ),
        )


def _new(a: s.FactItem) -> NewFact:
    return NewFact(a.path, a.content, a.tags, a.supersedes_id)


def _store(memory: Memory, subject: str, a: s.StoreFactIn) -> Any:
    return memory.store(subject, _new(a), on_duplicate=a.on_duplicate)


def _store_many(memory: Memory, subject: str, a: s.StoreFactsIn) -> Any:
    items = [_new(item) for item in a.facts]
    stored = memory.store_batch(subject, items, error_prefix=["facts"], on_duplicate=a.on_duplicate)
    return {"facts": stored}


def _list_policies(memory: Memory, subject: str, _a: s.NoInput) -> Any:
    return {"policies": memory.list_policies(subject)}


def _add_policy(memory: Memory, subject: str, a: s.PolicyLineIn) -> Any:
    return memory.add_policy(subject, a.line)


def _remove_policy(memory: Memory, subject: str, a: s.PolicyLineIn) -> Any:
    return memory.remove_policy(subject, a.line)


def _search(memory: Memory, subject: str, a: s.SearchIn) -> Any:
    tags = tuple(f"{key}={value}" for key, value in a.tags.items())
    request = SearchRequest(
        q=a.query,
        mode=a.mode,
        under=a.under,
        tags=tags,
        min_strength=a.min_strength,
        limit=a.limit,
        peek=a.peek,
        as_of=a.as_of,
    )
    return memory.search(subject, request)


def _get(memory: Memory, subject: str, a: s.GetFactIn) -> Any:
    return memory.get(
        subject, a.fact_id, peek=a.peek, include_deleted=a.include_deleted, as_of=a.as_of
    )


def _history(memory: Memory, subject: str, a: s.HistoryIn) -> Any:
    return {"facts": memory.history(subject, a.fact_id, as_of=a.as_of), "as_of": moment_of(a.as_of)}


def _delete(memory: Memory, subject: str, a: s.FactIdIn) -> Any:
    memory.delete(subject, a.fact_id)
    return {"deleted_id": a.fact_id}


def _browse(memory: Memory, subject: str, a: s.BrowseIn) -> Any:
    return memory.browse(subject, a.path, sort=a.sort, limit=a.limit, cursor=a.cursor)


def _list(memory: Memory, subject: str, a: s.ListIn) -> Any:
    tags = [f"{key}={value}" for key, value in a.tags.items()]
    return memory.list_facts(
        subject,
        under=a.under,
        tags=tags,
        sort=a.sort,
        limit=a.limit,
        cursor=a.cursor,
        as_of=a.as_of,
    )


def _tag(memory: Memory, subject: str, a: s.TagPathIn) -> Any:
    return memory.tag_path(subject, a.path, set_tags=a.tags, remove=a.remove)


def _whoami(memory: Memory, subject: str, _a: s.NoInput) -> Any:
    return memory.whoami(subject)


TOOLS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec(
            "store_fact",
            "Store a fact",
            "Store one small fact under a topical path. To correct a fact, store the new "
            "version with supersedes_id set to its id, never both. The answer's `similar` "
            "lists facts you can read that say nearly the same: supersede one instead of "
            "repeating it. on_duplicate='refuse' stores nothing then; the refusal's "
            "structured content lists them as `similar`.",
            s.StoreFactIn,
            StoredFact,
            _store,
            briefs.stored,
        ),
        ToolSpec(
            "store_facts",
            "Store several facts",
            "Store up to 1000 facts in one call, all or nothing; each item as store_fact "
            "takes it. `similar` per fact: supersede one instead of repeating it.",
            s.StoreFactsIn,
            StoredFacts,
            _store_many,
            briefs.stored_batch,
        ),
        ToolSpec(
            "search_facts",
            "Search facts",
            "Find current facts by keyword, by meaning, or both, best first with a score. "
            "Each result is a recall (it keeps the fact strong) unless peek.",
            s.SearchIn,
            SearchOut,
            _search,
            briefs.search,
        ),
        ToolSpec(
            "get_fact",
            "Read a fact",
            "Read one fact by id; its tags, links and strength are in the structured "
            "content. A recall unless peek.",
            s.GetFactIn,
            Fact,
            _get,
            briefs.fact,
        ),
        ToolSpec(
            "fact_history",
            "History of a fact",
            "The versions of a fact, each superseding the one before, oldest first, with "
            "when each was written.",
            s.HistoryIn,
            FactsOut,
            _history,
            briefs.history,
            read_only=True,
        ),
        ToolSpec(
            "delete_fact",
            "Delete a fact",
            "Delete a wrong fact that has no replacement (its history keeps it). To "
            "correct a fact, supersede it instead.",
            s.FactIdIn,
            s.DeletedOut,
            _delete,
            briefs.whole,
            destructive=True,
        ),
        ToolSpec(
            "browse_path",
            "Browse a path",
            "One node of the tree: its tags, child paths with their fact counts, and the "
            "facts at the node. Start at / to see the topics. Not a recall.",
            s.BrowseIn,
            PathWithFacts,
            _browse,
            briefs.node,
            read_only=True,
        ),
        ToolSpec(
            "list_facts",
            "List facts",
            "The current facts of a subtree, newest or strongest first, a page at a time: "
            "what you know of a topic without a query. Not a recall.",
            s.ListIn,
            FactList,
            _list,
            briefs.page,
            read_only=True,
        ),
        ToolSpec(
            "tag_path",
            "Tag a path",
            "Set or remove a node's tags; facts below inherit them, the nearest tag wins. "
            "visibility=public lets every subject read them.",
            s.TagPathIn,
            PathOut,
            _tag,
            briefs.tagged,
            idempotent=True,
        ),
        ToolSpec(
            "whoami",
            "Who am I",
            "The subject this memory knows you as, your roles, and the access rules that "
            "apply to you.",
            s.NoInput,
            WhoAmI,
            _whoami,
            briefs.whole,
            read_only=True,
        ),
        ToolSpec(
            "list_policies",
            "List policies",
            "The access policy lines: who may read, write, delete or tag what, and role "
            "memberships. Admin role only.",
            s.NoInput,
            PolicyList,
            _list_policies,
            briefs.policies,
            read_only=True,
        ),
        ToolSpec(
            "add_policy",
            "Add a policy",
            "Add an access policy line, e.g. `p, alice, path:/work/*, read, allow`; it "
            "holds from the next request. Admin role only.",
            s.PolicyLineIn,
            Policy,
            _add_policy,
            briefs.policy,
        ),
        ToolSpec(
            "remove_policy",
            "Remove a policy",
            "Remove an access policy line, written as list_policies shows it; it holds "
            "from the next request. Admin role only; the last line giving anyone admin "
            "is refused (add another admin first).",
            s.PolicyLineIn,
            Policy,
            _remove_policy,
            briefs.policy,
            destructive=True,
            idempotent=True,
        ),
    )
}


def result_of(spec: ToolSpec, data: dict[str, Any]) -> types.CallToolResult:
    """A tool's answer: its brief as compact JSON for the model to read, the full
    records as structured content for programs."""
    text = json.dumps(spec.brief(data), ensure_ascii=False, separators=(",", ":"))
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=data
    )


def serialize(model: type[BaseModel], data: Any) -> dict[str, Any]:
    """A use case's result as JSON, shaped (and checked) by the tool's output model:
    the one place results are converted, as FastAPI's response_model does for HTTP."""
    return model.model_validate(data, from_attributes=True).model_dump(mode="json")


class ToolMetrics:
    """Tool calls by tool and outcome, and their duration, in the app's registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry or CollectorRegistry()
        self.calls = Counter(
            "embornal_mcp_tool_calls",
            "MCP tool calls by tool and outcome (ok, error)",
            ["tool", "outcome"],
            registry=registry,
        )
        self.latency = Histogram(
            "embornal_mcp_tool_duration_seconds",
            "MCP tool call latency by tool",
            ["tool"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=registry,
        )


def arguments_of(spec: ToolSpec, raw: Mapping[str, Any]) -> s.ToolInput:
    """The call's arguments checked against the tool's input model, or InvalidInput with
    the detail REST gives the same fault ("Invalid value for limit: ...")."""
    try:
        return spec.input.model_validate(raw)
    except ValidationError as exc:
        errors = [
            {"loc": ["arguments", *e["loc"]], "msg": e["msg"]}
            for e in exc.errors(include_input=False, include_url=False)
        ]
        raise InvalidInput(invalid_detail(errors), errors=errors) from None


def error_text(exc: Exception) -> str:
    """The one line a refused call gives: the HTTP problem's `detail`, never internals."""
    if is_public(exc):
        return exc.detail
    return INTERNAL_DETAIL


def build_server(
    get_memory: Callable[[], Memory],
    subject: Callable[[], str],
    *,
    metrics: ToolMetrics | None = None,
) -> Server[Any]:
    """The MCP server over a memory; `subject()` names the caller of the current request
    (it raises when there is none, so a request can never run as someone else)."""
    metrics = metrics or ToolMetrics()

    async def list_tools(
        _ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[spec.describe() for spec in TOOLS.values()])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        spec = TOOLS.get(params.name)
        if spec is None:
            # A protocol error, as the MCP spec has it: no tool ran.
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name!r}")
        started = time.perf_counter()
        outcome = "error"
        try:
            arguments = arguments_of(spec, params.arguments or {})
            who = subject()
            memory = get_memory()
            # One worker thread runs the whole use case, transaction included (app.api.deps).
            result = await anyio.to_thread.run_sync(lambda: spec.run(memory, who, arguments))
            data = serialize(spec.output, result)
            outcome = "ok"
            return result_of(spec, data)
        except Exception as exc:
            # As the REST handlers do: the log gets what went wrong, the caller one line.
            if not isinstance(exc, EmbornalError):
                log.error("mcp tool %s failed", spec.name, exc_info=exc)
            elif exc.status >= 500:
                log.error("mcp tool %s failed: %s: %s", spec.name, type(exc).__name__, exc.detail)
            text = error_text(exc)
            # A refusal with data to act on (a duplicate's `similar`) carries the problem
            # REST would answer as structured content; its text stays the one line.
            problem = problem_body(exc) if is_public(exc) and exc.extensions else None
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=text)],
                structured_content=problem,
                is_error=True,
            )
        finally:
            elapsed = time.perf_counter() - started
            metrics.calls.labels(spec.name, outcome).inc()
            metrics.latency.labels(spec.name).observe(elapsed)
            # The tool and how it went; never its arguments (content, queries) or the token.
            # Over HTTP the line carries the request's id (the logging filter reads it); the
            # JSON-RPC id names the call over stdio too, where there is no HTTP request.
            log.info(
                "mcp tool %s %s %.1fms (call %s)",
                spec.name,
                outcome,
                elapsed * 1000,
                ctx.request_id,
                extra={
                    "tool": spec.name,
                    "outcome": outcome,
                    "duration_ms": round(elapsed * 1000, 2),
                },
            )

    async def list_resources(
        _ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        who = subject()
        memory = get_memory()
        root = await anyio.to_thread.run_sync(lambda: memory.describe_path(who, "/"))
        resources = [
            types.Resource(
                uri=MEMORY_URI,
                name="memory-guide",
                title="How this memory works",
                description="The facts under /memory: how to use this memory. Read it first.",
                mime_type="text/markdown",
            ),
            _path_resource("/"),
        ]
        children = serialize(PathOut, root)["children"]
        resources += [_path_resource(child["path"]) for child in children]
        return types.ListResourcesResult(resources=resources)

    async def list_templates(
        _ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(
            uri_template=PATH_URI + "{+path}",
            name="path",
            title="A path of the memory",
            description=(
                "One node of the tree (e.g. embornal://path/projects/embornal): its tags, "
                "children and the facts stored at it, as JSON. Reading is not a recall."
            ),
            mime_type="application/json",
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def read_resource(
        _ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        who = subject()
        memory = get_memory()
        try:
            if uri == MEMORY_URI:
                listing = await anyio.to_thread.run_sync(
                    lambda: memory.list_facts(who, under="/memory", limit=100)
                )
                text = _guide_markdown(serialize(FactList, listing)["facts"])
                mime = "text/markdown"
            elif uri.startswith(PATH_URI):
                path = "/" + unquote(uri.removeprefix(PATH_URI)).lstrip("/")
                node = await anyio.to_thread.run_sync(lambda: memory.browse(who, path))
                text = json.dumps(serialize(PathWithFacts, node), ensure_ascii=False)
                mime = "application/json"
            else:
                raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown resource: {uri}")
        except EmbornalError as exc:
            raise MCPError(
                code=types.INVALID_PARAMS, message=error_text(exc), data={"uri": uri}
            ) from None
        contents: list[types.TextResourceContents | types.BlobResourceContents] = [
            types.TextResourceContents(uri=uri, text=text, mime_type=mime)
        ]
        return types.ReadResourceResult(contents=contents)

    async def list_prompts(
        _ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[_PROMPT])

    async def get_prompt(
        _ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        if params.name != _PROMPT.name:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {params.name!r}")
        text = types.TextContent(type="text", text=GUIDE)
        message = types.PromptMessage(role="user", content=text)
        return types.GetPromptResult(description=_PROMPT.description, messages=[message])

    return Server(
        "embornal",
        version=__version__,
        title="embornal memory",
        instructions=GUIDE,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


_PROMPT = types.Prompt(
    name="use_memory",
    title="Use your memory",
    description="How to keep a long-term memory of small facts with these tools",
)


def _path_resource(path: str) -> types.Resource:
    return types.Resource(
        uri=PATH_URI + path.lstrip("/"),
        name=f"path:{path}",
        title=path,
        description=f"The node {path}: tags, children and facts",
        mime_type="application/json",
    )


def _guide_markdown(facts: list[Mapping[str, Any]]) -> str:
    if not facts:
        return "# This memory\n\nNo facts under /memory are visible to you.\n"
    lines = ["# This memory", ""]
    lines += [f"- {fact['content']} (#{fact['id']}, {fact['path']})" for fact in facts]
    return "\n".join(lines) + "\n"
