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

.PHONY: serve test lint typecheck pytest browser bench-ui ui-screenshots bench-store bench-turn bench-instructions bench-api bench-soak bench-peers conformance clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,agui,mcp,otel,postgres,oauth]'
	touch $(STAMP)

serve: $(STAMP)
	$(BIN)/threadloom serve examples --host $(HOST) --port $(PORT)

test: $(STAMP) lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts examples
	$(BIN)/ruff format --check src tests bench scripts examples

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP) browser
	$(BIN)/pytest

# The web UI's browser tests (tests/ui) drive Debian's chromium: installed here when it is
# missing and we are root; otherwise those tests skip and say why (under CI=true they fail).
CHROMIUM ?= /usr/bin/chromium
browser:
	@if [ ! -x "$(CHROMIUM)" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium with apt-get (the browser tests need it)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "note: $(CHROMIUM) is missing and we are not root: the browser tests will be skipped"; \
	  fi; \
	fi

bench-store: $(STAMP)
	$(BIN)/python bench/store_bench.py

bench-turn: $(STAMP)
	$(BIN)/python bench/turn_bench.py

bench-instructions: $(STAMP)
	$(BIN)/python bench/instructions_bench.py

# make bench-api loads the server from wrk (Debian's package): installed here when it is
# missing and we are root; otherwise the benchmark falls back to a Python load generator
# in a process of its own and says so.
bench-api: $(STAMP)
	@if ! command -v wrk >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing wrk with apt-get (bench-api's load generator)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; \
	  else \
	    echo "note: wrk is missing and we are not root: bench-api uses a Python load generator"; \
	  fi; \
	fi
	$(BIN)/python bench/api_bench.py

bench-ui: $(STAMP) browser
	$(BIN)/python bench/ui_bench.py

ui-screenshots: $(STAMP) browser
	$(BIN)/python scripts/ui_screenshots.py

# SOAK_MINUTES=10 make bench-soak for a longer soak
SOAK_MINUTES ?= 2
bench-soak: $(STAMP)
	$(BIN)/python bench/soak_bench.py --minutes $(SOAK_MINUTES)

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
