# GPU Tutor: `make serve` sets everything up and serves the tutor; `make test` sets up and tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install serve ingest test lint typecheck unit bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch is pinned to the CPU build in pyproject.toml (an unpinned torch pulls a CUDA build).
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

ingest: install
	$(BIN)/tutor ingest

serve: ingest
	$(BIN)/tutor serve --host $(HOST) --port $(PORT)

lint: install
	$(BIN)/ruff check .

typecheck: install
	$(BIN)/mypy

unit: install
	$(BIN)/pytest

test: lint typecheck unit

bench: install
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) data/tutor.db* data/index .pytest_cache .mypy_cache .ruff_cache
