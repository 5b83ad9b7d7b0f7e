# Threadloom — the two commands of the README (`make serve` and `make test`) work on a
# fresh machine with only Python 3.11+ and make.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# two stamps: serving needs the package alone (`make serve`); the tests add the dev extra
# and every optional extra (`make test`, and every target below that runs the tests' tools)
SERVE_STAMP := $(VENV)/.installed-serve
STAMP  := $(VENV)/.installed
# the peers of bench/peers live in a venv of their own, never in the project's
BENCH_VENV  := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed

HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: serve image deploy-tools test lint typecheck pytest browser bench-ui ui-screenshots bench-store bench-turn bench-instructions bench-pg-instructions bench-startup bench-api bench-soak bench-peers conformance clean

define make_venv
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
endef

# what serving examples/ needs: the package and its runtime dependencies, nothing else
$(SERVE_STAMP): pyproject.toml
	$(make_venv)
	$(BIN)/python -m pip install --quiet -e .
	touch $(SERVE_STAMP)

$(STAMP): pyproject.toml
	$(make_venv)
	$(BIN)/python -m pip install --quiet -e '.[dev,agui,mcp,otel,postgres,oauth,gemini]'
	touch $(STAMP) $(SERVE_STAMP)

serve: $(SERVE_STAMP)
	$(BIN)/threadloom serve examples --host $(HOST) --port $(PORT)

# The container image (docs/deploy.md, "The container image"): a wheelhouse made here with
# `pip wheel`, then `podman build` (ENGINE=docker for Docker). BASE, TAG, EXTRAS and
# PACKAGES (more requirements: a project's own imports) pass on.
ENGINE ?= podman
TAG    ?= localhost/threadloom:latest
image: $(SERVE_STAMP)
	$(BIN)/python scripts/image.py build --engine $(ENGINE) --tag $(TAG) \
	  $(if $(BASE),--base $(BASE)) $(if $(EXTRAS),--extras $(EXTRAS)) \
	  $(if $(PACKAGES),--packages "$(PACKAGES)")

test: $(STAMP) lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts examples
	$(BIN)/ruff format --check src tests bench scripts examples

typecheck: $(STAMP)
	$(BIN)/mypy

# TEST_WORKERS=N runs the suite on N processes (pytest-xdist, a file's tests on one worker);
# CI runs it in one (docs/testing.md says why).
TEST_WORKERS ?= 0
pytest: $(STAMP) browser deploy-tools
	$(BIN)/pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

# The web UI's browser tests (tests/ui) drive Debian's chromium, and its page logic has unit
# tests for Node's test runner (tests/ui/js): both installed here when missing and we are
# root; otherwise those tests skip and say why (under CI=true they fail).
CHROMIUM ?= /usr/bin/chromium
browser:
	@if ! command -v node >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing nodejs with apt-get (the UI's unit tests need it)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs >/dev/null; \
	  else \
	    echo "note: node is missing and we are not root: the UI's unit tests will be skipped"; \
	  fi; \
	fi
	@if [ ! -x "$(CHROMIUM)" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium with apt-get (the browser tests need it)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "note: $(CHROMIUM) is missing and we are not root: the browser tests will be skipped"; \
	  fi; \
	fi

# The deploy tests (tests/deploy) build the image with podman from a Debian base made with
# debootstrap, check compose.yaml's proxy with nginx and the systemd unit with
# systemd-analyze: installed here when missing and we are root; otherwise those tests skip
# and say why (under CI=true they fail).
DEPLOY_TOOLS := podman:podman debootstrap:debootstrap fuse-overlayfs:fuse-overlayfs \
                newuidmap:uidmap nginx:nginx systemd-analyze:systemd ip:iproute2
deploy-tools:
	@missing=""; for pair in $(DEPLOY_TOOLS); do \
	  command -v "$${pair%%:*}" >/dev/null 2>&1 || [ -x "/usr/sbin/$${pair%%:*}" ] \
	    || missing="$$missing $${pair#*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing$$missing with apt-get (the deploy tests need them)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "note:$$missing missing and we are not root: the deploy tests will be skipped"; \
	  fi; \
	fi

bench-store: $(STAMP)
	$(BIN)/python bench/store_bench.py

bench-turn: $(STAMP)
	$(BIN)/python bench/turn_bench.py

bench-instructions: $(STAMP)
	$(BIN)/python bench/instructions_bench.py

# PostgreSQL's instructions a turn, counted under callgrind on a private cluster of the
# installed server (issue 40's server goal, without the VM's noise)
bench-pg-instructions: $(STAMP)
	$(BIN)/python bench/pg_server_instructions.py

# make bench-api loads the server from wrk (Debian's package): installed here when it is
# missing and we are root; otherwise the benchmark falls back to a Python load generator
# in a process of its own and says so.
bench-startup: $(STAMP)
	$(BIN)/python bench/startup_bench.py

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
	rm -rf $(VENV) $(BENCH_VENV) .pytest_cache .mypy_cache .ruff_cache build dist
