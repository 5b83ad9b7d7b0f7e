# Threadloom — the two commands of the README (`make serve` and `make test`) work on a
# fresh machine with only Python 3.11+ and make.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# the peers of bench/peers live in a venv of their own, never in the project's
BENCH_VENV  := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed

HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: serve test lint typecheck pytest bench-store bench-turn bench-instructions bench-api bench-peers conformance clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,agui,postgres]'
	touch $(STAMP)

serve: $(STAMP)
	$(BIN)/threadloom serve examples --host $(HOST) --port $(PORT)

test: $(STAMP) lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts examples
	$(BIN)/ruff format --check src tests bench scripts examples

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest

bench-store: $(STAMP)
	$(BIN)/python bench/store_bench.py

bench-turn: $(STAMP)
	$(BIN)/python bench/turn_bench.py

bench-instructions: $(STAMP)
	$(BIN)/python bench/instructions_bench.py

bench-api: $(STAMP)
	$(BIN)/python bench/api_bench.py

$(BENCH_STAMP): bench/peers/requirements.txt
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -r bench/peers/requirements.txt
	touch $(BENCH_STAMP)

bench-peers: $(STAMP) $(BENCH_STAMP)
	$(BIN)/python bench/peers/bench_peers.py --peer-python $(BENCH_VENV)/bin/python

conformance: $(STAMP)
	$(BIN)/python scripts/conformance.py

clean:
	rm -rf $(VENV) $(BENCH_VENV) .pytest_cache .mypy_cache .ruff_cache
