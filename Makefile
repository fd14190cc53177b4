# GPU Tutor: `make serve` sets everything up and serves the tutor; `make test` sets up and tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install test-tools serve ingest test lint typecheck unit bench clean worker gpu-check

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch is pinned to the CPU build in pyproject.toml (an unpinned torch pulls a CUDA build).
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Only the tests need these (serving needs Python alone): the widget's browser tests drive Debian's
# Chromium (Playwright never downloads a browser), and docker-compose validates docker-compose.yml
# (no engine is needed). Installed with apt when missing.
test-tools:
	(command -v chromium && command -v docker-compose) >/dev/null || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium docker-compose)

ingest: install
	$(BIN)/tutor ingest

# The embedded default: SQLite, local index, and a local demo worker sharing a random token.
serve: ingest
	@export TUTOR_WORKER_TOKEN="$${TUTOR_WORKER_TOKEN:-$$(head -c16 /dev/urandom | od -An -tx1 | tr -d ' \n')}"; \
	$(BIN)/tutor worker --port 8100 & worker=$$!; trap 'kill $$worker' EXIT INT TERM; \
	$(BIN)/tutor serve --host $(HOST) --port $(PORT)

worker: install
	$(BIN)/tutor worker --host $(HOST) --port 8100

gpu-check: install
	scripts/gpu_check

lint: install
	$(BIN)/ruff check .

typecheck: install
	$(BIN)/mypy

unit: install test-tools
	$(BIN)/pytest

test: lint typecheck unit

bench: ingest
	# wrk (Debian) drives the HTTP load: a C client leaves the 2 cores to the service.
	command -v wrk >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk)
	cd bench && ../$(BIN)/python run_all.py

clean:
	rm -rf $(VENV) data/tutor.db* data/index .pytest_cache .mypy_cache .ruff_cache
