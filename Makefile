# Baton: `make run` starts the bot, `make test` runs every test. Both create .venv when missing.
# python3.11 when it is on PATH, else python3 (checked to be 3.11 or newer below)
# The development venv holds requirements-dev.lock (which includes the runtime's requirements.lock);
# a production install takes requirements.lock alone: docs/operations.md, "Installing for production".
PY ?= $(shell command -v python3.11 >/dev/null 2>&1 && echo python3.11 || echo python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SOURCES := core bot adapters
CHECK_PY = $(PY) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { echo "Baton needs Python 3.11 or newer ($(PY) is missing or older); set PY=/path/to/python3"; exit 1; }

.PHONY: run test lint bench lock clean

$(STAMP): requirements.lock requirements-dev.lock pyproject.toml
	@$(CHECK_PY)
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.lock -r requirements-dev.lock
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -e .
	@$(BIN)/python -m compileall -q $(SOURCES) >/dev/null  # bytecode up front: a restart skips compiling
	@$(BIN)/python -m bot.compile_cache >/dev/null  # and the code generated at import (bot/compile_cache.py)
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/baton run

# Test processes: the suite mostly waits (on spawned processes, leases, sockets), not computes:
# on a 2-core machine 2 workers kept 1.2 cores busy and took 6 min 33 s, 4 took 4 min 56 s.
JOBS ?= 4

test: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) -q $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check core bot adapters tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

# The bench environment holds DBOS and Prefect (bench/requirements.lock), never the project's venv.
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed

$(BENCH_STAMP): bench/requirements.lock requirements.lock pyproject.toml
	@$(CHECK_PY)
	@test -x $(BENCH_VENV)/bin/python || { $(PY) -m venv $(BENCH_VENV) && echo '*' > $(BENCH_VENV)/.gitignore; }
	$(BENCH_VENV)/bin/pip install --quiet --disable-pip-version-check -r bench/requirements.lock
	$(BENCH_VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps -e .
	@touch $(BENCH_STAMP)

# `make bench` regenerates bench/RESULTS.md (about 10 minutes); `make bench ARGS=--quick` for a smoke run.
bench: $(BENCH_STAMP)
	@$(BENCH_VENV)/bin/python -m compileall -q $(SOURCES) bench >/dev/null  # as a deployed install has it
	@$(BENCH_VENV)/bin/python -m bot.compile_cache >/dev/null
	$(BENCH_VENV)/bin/python -m bench $(ARGS)

# requirements.in -> requirements.lock (runtime), then requirements-dev.in (constrained by it) ->
# requirements-dev.lock: the pins the runtime lock does not already hold.
LOCK_VENV := /tmp/baton-lock
lock:
	rm -rf $(LOCK_VENV) && $(PY) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install -q -r requirements.in
	$(LOCK_VENV)/bin/pip freeze --exclude-editable \
	  | sed '1i # Exact pins resolved from requirements.in (`make lock`): what Baton needs to run, nothing of its tests. Python 3.11+.' > requirements.lock
	$(LOCK_VENV)/bin/pip install -q -r requirements-dev.in
	{ printf '%s\n' '# Exact pins resolved from requirements-dev.in (`make lock`): tests, linters and type stubs, on top of' \
	    '# the runtime pins it includes. `make test` installs this file; a production install does not.' '-r requirements.lock'; \
	  $(LOCK_VENV)/bin/pip freeze --exclude-editable | grep -vxFf requirements.lock; } > requirements-dev.lock

clean:
	rm -rf $(VENV) .baton .pytest_cache
