"""The README shows only what this version does (issue 31): at most 400 lines, and
every command in it real.

Each fenced block is read as what it is. A shell line that runs `embornal` (also
`.venv/bin/embornal`, or inside `docker compose exec SERVICE`) must name commands of
the Typer app, each answering `--help`, with options they take; `make X` a target of
the Makefile; `python -m M` a module of the checkout; `pytest PATH` a file; `curl` a
route of openapi.json (or the console, MCP, /docs). A JSON block's `embornal` command
and args are checked the same way, a YAML block of config sections must load as
config.yaml, and every `EMBORNAL_<SECTION>__<KEY>` must name a key. The command table
and the route table are checked too: their `embornal ...` spans and their routes.

Nothing is run: `--help` has no side effects, and the home is a temporary directory.
The docs/ pages get the same check, but for docs/benchmarks.md, a dated log whose
commands are those of their day.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import typer.main
import yaml
from typer.testing import CliRunner

from app import cli
from app.dirs import resolve_dirs
from app.errors import ConfigError
from app.settings import SECTIONS, Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_README_LINES = 400
# A dated log: its commands are those of the day each figure was measured.
HISTORY = {"benchmarks.md"}

FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.M | re.S)
SHELL = {"sh", "bash", "shell", "console"}
HTTP_METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH")
# Served by the app but outside openapi.json: the console, MCP, the docs page.
UNLISTED_ROUTES = ("/ui", "/mcp", "/docs", "/openapi.json", "/.well-known/")
ENV_KEY = re.compile(r"\bEMBORNAL_([A-Z0-9]+)__([A-Z0-9_]+)")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
REDIRECTS = {">", ">>", "<", ">&", "&>"}
# A command of the app: typer vendors its own click, whose classes it does not export.
Command = Any


def is_group(command: Command) -> bool:
    return isinstance(getattr(command, "commands", None), dict)


def makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([\w.-]+)\s*:(?!=)", text, re.M))


def openapi_routes() -> set[tuple[str, str]]:
    """(METHOD, route) with every path parameter written `{}`."""
    document = json.loads((ROOT / "openapi.json").read_text(encoding="utf-8"))
    return {
        (method.upper(), re.sub(r"\{[^}]*\}", "{}", route))
        for route, operations in document["paths"].items()
        for method in operations
    }


def route_matches(template: str, path: str) -> bool:
    """Whether a concrete path fits a route whose parameters are `{}` (a `{}` that ends
    the route, as `{path}` does, takes the rest, slashes included)."""
    pattern = re.escape(template).replace(r"\{\}", "[^/]+")
    if template.endswith("{}"):
        pattern = pattern[: -len("[^/]+")] + ".*"
    return re.fullmatch(pattern, path.rstrip("/") or "/") is not None


@dataclass
class Checker:
    """Collects what is wrong with a page's commands, and counts what it checked."""

    home: Path
    problems: list[str] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)
    root: Command = field(init=False)
    targets: set[str] = field(default_factory=makefile_targets)
    routes: set[tuple[str, str]] = field(default_factory=openapi_routes)

    def __post_init__(self) -> None:
        self.root = typer.main.get_command(cli.app)
        assert is_group(self.root)

    def count(self, kind: str) -> None:
        self.checked[kind] = self.checked.get(kind, 0) + 1

    # --- embornal -----------------------------------------------------------------

    def embornal(self, args: list[str], shown: str) -> list[Command]:
        """Check one `embornal ...` (after the program); return the commands it names.

        A word `a|b|c` where a subcommand is due names each of them (as the command
        table writes `policy add|remove|list`)."""
        self.count("embornal")
        leaves: list[tuple[list[str], Command]] = [([], self.root)]
        rest = list(args)
        while rest and not rest[0].startswith("-"):
            if not any(is_group(cmd) for _, cmd in leaves):
                break
            word = rest.pop(0)
            found = []
            for path, cmd in leaves:
                for name in word.split("|"):
                    sub = cmd.commands.get(name)
                    if sub is None:
                        self.problems.append(
                            f"{shown}: `embornal {' '.join(path)}` has no command {name!r}"
                        )
                        return []
                    found.append(([*path, name], sub))
            leaves = found
        for path, _ in leaves:
            result = CliRunner().invoke(
                cli.app,
                [*path, "--help"],
                env={"EMBORNAL_HOME": str(self.home), "HOME": str(self.home)},
            )
            if result.exit_code != 0:
                self.problems.append(
                    f"{shown}: `embornal {' '.join(path)} --help` exits {result.exit_code}"
                )
        for word in rest:
            if word.startswith("--"):
                self.option(word, [cmd for _, cmd in leaves], shown)
        return [cmd for _, cmd in leaves]

    def option(self, word: str, commands: list[Command], shown: str) -> None:
        name = word.split("=", 1)[0]
        known = {"--help"} | {
            opt
            for cmd in commands
            for param in cmd.params
            for opt in (*param.opts, *param.secondary_opts)
        }
        if name not in known:
            names = ", ".join(cmd.name or "embornal" for cmd in commands)
            self.problems.append(f"{shown}: {names} takes no option {name}")

    # --- shell ----------------------------------------------------------------------

    def shell_block(self, code: str, where: str) -> None:
        code = code.replace("\\\n", " ")
        for line in code.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
                lexer.whitespace_split = True
                tokens = list(lexer)
            except ValueError as exc:
                self.problems.append(f"{where}: cannot read {line.strip()!r}: {exc}")
                continue
            for command in split_commands(tokens):
                self.command(command, f"{where}: {line.strip()}")

    def command(self, words: list[str], shown: str) -> None:
        while words and ASSIGNMENT.match(words[0]):
            words = words[1:]
        if not words:
            return
        program = words[0].rsplit("/", 1)[-1]
        if program == "embornal":
            self.embornal(words[1:], shown)
        elif program == "docker" and words[1:3] == ["compose", "exec"]:
            rest = [w for w in words[3:] if not w.startswith("-")]
            self.command(rest[1:], shown)  # after the service's name
        elif program == "make":
            self.count("make")
            for target in words[1:]:
                if not target.startswith("-") and "=" not in target and target not in self.targets:
                    self.problems.append(f"{shown}: the Makefile has no target {target!r}")
        elif program.startswith("python") and "-m" in words:
            self.count("python -m")
            module = words[words.index("-m") + 1]
            base = ROOT.joinpath(*module.split("."))
            if not (base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()):
                self.problems.append(f"{shown}: no module {module}")
        elif program == "pytest":
            self.count("pytest")
            for arg in words[1:]:
                if not arg.startswith("-") and not (ROOT / arg.split("::")[0]).exists():
                    self.problems.append(f"{shown}: no test file {arg}")
        elif program == "curl":
            self.curl(words[1:], shown)

    def curl(self, args: list[str], shown: str) -> None:
        self.count("curl")
        method, url, data = None, None, False
        words = iter(args)
        for word in words:
            if word in ("-X", "--request"):
                method = next(words, "").upper()
            elif word in ("-d", "--data", "--data-raw", "--json"):
                data = True
                next(words, None)
            elif word in ("-H", "--header", "-o", "--output", "-w", "--write-out", "-u"):
                next(words, None)
            elif not word.startswith("-"):
                url = word
        if url is None:
            self.problems.append(f"{shown}: curl without a URL")
            return
        method = method or ("POST" if data else "GET")
        path = urlsplit(url if "://" in url else f"http://{url}").path or "/"
        self.route(method, path, shown)

    def route(self, method: str, path: str, shown: str) -> None:
        if path.startswith(UNLISTED_ROUTES):
            return
        concrete = re.sub(r"\{[^}]*\}", "x", path)
        if not any(m == method and route_matches(r, concrete) for m, r in self.routes):
            self.problems.append(f"{shown}: openapi.json has no {method} {path}")

    # --- other blocks -------------------------------------------------------------

    def json_block(self, code: str, where: str) -> None:
        try:
            documents = [json.loads(code)]
        except json.JSONDecodeError:
            try:  # one JSON value a line, as a page shows tool calls
                documents = [json.loads(line) for line in code.splitlines() if line.strip()]
            except json.JSONDecodeError as exc:
                self.problems.append(f"{where}: not JSON: {exc}")
                return
        for document in documents:
            for value in walk(document):
                program = value.get("command")
                if isinstance(program, str) and program.rsplit("/", 1)[-1] == "embornal":
                    self.embornal([str(a) for a in value.get("args", [])], f"{where}: {value}")

    def yaml_block(self, code: str, where: str) -> None:
        try:
            data = yaml.safe_load(code)
        except yaml.YAMLError as exc:
            self.problems.append(f"{where}: not YAML: {exc}")
            return
        if not isinstance(data, dict) or not set(data) <= set(SECTIONS):
            return  # not a config.yaml (a compose or Prometheus file)
        self.count("config")
        config = self.home / "config.yaml"
        config.write_text(code, encoding="utf-8")
        try:
            load_settings(
                resolve_dirs({"EMBORNAL_HOME": str(self.home)}), env={}, config_file=config
            )
        except ConfigError as exc:
            self.problems.append(f"{where}: not a valid config.yaml: {exc}")

    def env_keys(self, text: str, where: str) -> None:
        for section, key in ENV_KEY.findall(text):
            self.count("env")
            fields = Settings.model_fields.get(section.lower())
            annotation = fields.annotation if fields is not None else None
            keys = getattr(annotation, "model_fields", {})
            if section.lower() not in SECTIONS or key.lower() not in keys:
                self.problems.append(f"{where}: EMBORNAL_{section}__{key} names no config key")

    # --- tables and prose -----------------------------------------------------------

    def tables(self, text: str, where: str) -> None:
        for row in re.findall(r"^\|(.+)\|\s*$", text, re.M):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)]
            if set("".join(cells)) <= set("-: "):
                continue
            first = cells[0]
            if re.match(rf"^({'|'.join(HTTP_METHODS)})\b", first):
                self.route_cell(first, f"{where}: | {first} |")
            for cell in cells[1:]:
                for method, path in re.findall(
                    rf"\b({'|'.join(HTTP_METHODS)}) (/[^\s,;`|]*)", cell
                ):
                    self.count("route")
                    self.route(method, path, f"{where}: | {cell} |")
            commands: list[Command] = []
            for span in re.findall(r"`([^`]+)`", first):
                if span.startswith("embornal "):
                    commands += self.span(span, f"{where}: `{span}`")
            if commands:  # the other cells' options belong to the row's commands
                for cell in cells[1:]:
                    for span in re.findall(r"`(--[\w-]+)", cell):
                        self.option(span, commands, f"{where}: `{span}`")

    def route_cell(self, cell: str, shown: str) -> None:
        for part in cell.split(";"):
            match = re.match(rf"^\s*((?:(?:{'|'.join(HTTP_METHODS)}),?\s*)+)\s(/.*)$", part)
            if match is None:
                self.problems.append(f"{shown}: cannot read the route {part.strip()!r}")
                continue
            methods = re.findall(r"[A-Z]+", match.group(1))
            for path in re.split(r",\s*", match.group(2).strip()):
                for method in methods:
                    self.count("route")
                    self.route(method, path, shown)

    def span(self, span: str, shown: str) -> list[Command]:
        """An inline `embornal ...`: [optional] parts count, `a\\|b` names each."""
        text = " ".join(span.replace("\\|", "|").replace("[", " ").replace("]", " ").split())
        try:
            words = shlex.split(text)
        except ValueError as exc:
            self.problems.append(f"{shown}: cannot read it: {exc}")
            return []
        return self.embornal(words[1:], shown)

    def page(self, text: str, where: str) -> None:
        for lang, code in FENCE.findall(text):
            line = text[: text.index(code)].count("\n") + 1
            at = f"{where}:{line}"
            if lang in SHELL:
                self.shell_block(code, at)
            elif lang == "json":
                self.json_block(code, at)
            elif lang == "yaml":
                self.yaml_block(code, at)
        self.env_keys(text, where)
        self.tables(text, where)
        prose = "\n".join(
            line for line in FENCE.sub("", text).splitlines() if not line.startswith("|")
        )
        for span in re.findall(r"`(embornal [^`]+)`", prose):
            self.span(span, f"{where}: `{' '.join(span.split())}`")


def split_commands(tokens: list[str]) -> Iterator[list[str]]:
    """Simple commands of one shell line: split at `|`, `&&`, `;`, `$(`, `)` (so
    `TOKEN=$(embornal ...)` gives `TOKEN=$` and the command); the word after a
    redirection is a file, not a command."""
    current: list[str] = []
    skip = False
    for token in tokens:
        if skip:
            skip = False
        elif token and set(token) <= set("();|&<>"):
            skip = token in REDIRECTS
            if current:
                yield current
                current = []
        else:
            current.append(token)
    if current:
        yield current


def walk(value: object) -> Iterator[dict]:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)


def check(text: str, where: str, home: Path) -> Checker:
    checker = Checker(home)
    checker.page(text, where)
    return checker


def test_the_readme_fits_ten_minutes() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines"


def test_every_block_of_the_readme_says_what_it_holds() -> None:
    text = README.read_text(encoding="utf-8")
    unlabelled = [code.splitlines()[0] for lang, code in FENCE.findall(text) if not lang]
    assert unlabelled == [], "give each fenced block a language (sh, json, yaml ...)"


def test_every_command_in_the_readme_is_real(tmp_path: Path) -> None:
    checker = check(README.read_text(encoding="utf-8"), "README.md", tmp_path)
    assert checker.problems == []
    # Not vacuous: the page's commands, routes and config were found and checked.
    assert checker.checked["embornal"] >= 40
    assert checker.checked["curl"] >= 4
    assert checker.checked["make"] >= 5
    assert checker.checked["route"] >= 20
    assert checker.checked["config"] >= 1
    assert checker.checked["env"] >= 1


@pytest.mark.parametrize(
    "page",
    sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.name not in HISTORY),
)
def test_every_command_in_the_docs_is_real(page: str, tmp_path: Path) -> None:
    path = ROOT / "docs" / page
    checker = check(path.read_text(encoding="utf-8"), f"docs/{page}", tmp_path)
    assert checker.problems == []


MISSPELLED = """
```sh
.venv/bin/embornal memory serch "when do we deploy"
TOKEN=$(.venv/bin/embornal token isue --subject default)
embornal memory store /a "b" --tags kind=x
docker compose exec embornal embornal polcy list
make rn
.venv/bin/python -m bench.search_benchh --facts 10
curl -s localhost:8420/v1/fact/8 -H "Authorization: Bearer $TOKEN"
curl -s -X PATCH localhost:8420/v1/facts/8
.venv/bin/pytest tests/test_nothing_here.py
```

```json
{"mcpServers": {"e": {"command": "/x/.venv/bin/embornal", "args": ["mpc"]}}}
```

```yaml
server:
  prot: 8420
```

Set `EMBORNAL_SERVER__PROT=9000`.

| command | what |
|---|---|
| `embornal memroy list` | list |
| `embornal token list` | tokens (`--every`) |

| method and route | what |
|---|---|
| GET /v1/serch | search |
| GET, PUT /v1/whoami | who |
"""


def test_the_check_finds_each_misspelling(tmp_path: Path) -> None:
    problems = check(MISSPELLED, "sample", tmp_path).problems
    wanted = [
        "has no command 'serch'",
        "has no command 'isue'",
        "takes no option --tags",
        "has no command 'polcy'",
        "no target 'rn'",
        "no module bench.search_benchh",
        "no GET /v1/fact/8",
        "no PATCH /v1/facts/8",
        "no test file tests/test_nothing_here.py",
        "has no command 'mpc'",
        "unknown key 'server.prot'",
        "EMBORNAL_SERVER__PROT names no config key",
        "has no command 'memroy'",
        "takes no option --every",
        "no GET /v1/serch",
        "no PUT /v1/whoami",
    ]
    for words in wanted:
        assert any(words in problem for problem in problems), (words, problems)
    assert len(problems) == len(wanted), problems
