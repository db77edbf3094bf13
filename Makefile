# Two commands on a fresh machine: `make demo` (replay the bundled transcript) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HARNESS ?= .venv-harness

.PHONY: demo test lint bench

demo: $(VENV)/.installed
	$(BIN)/stenograph replay examples/demo-session.jsonl

test: $(VENV)/.installed
	$(BIN)/python -m pytest

lint: $(VENV)/.installed
	$(BIN)/ruff check stenograph tests benchmarks examples setup.py

bench: $(VENV)/.installed $(HARNESS)/bin/python
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python benchmarks/engine_overhead.py
	$(BIN)/python benchmarks/clearing_peers.py --harness-python $(HARNESS)/bin/python

# pydantic-ai-harness pins its own pydantic-ai-slim: its benchmark lane runs in this venv
$(HARNESS)/bin/python:
	$(PYTHON) -m venv $(HARNESS)
	$(HARNESS)/bin/pip install -q pydantic-ai-harness

$(VENV)/.installed: pyproject.toml setup.py stenograph/_speedups.c  # the C twins rebuilt too
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@
