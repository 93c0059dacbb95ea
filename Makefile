# The two commands a newcomer needs: `make chat` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-dev

.PHONY: chat test lint soak bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

chat: $(STAMP)
	$(VENV)/bin/chatbot chat

test: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

lint: $(STAMP)
	$(VENV)/bin/ruff check bot memory_worker tests benchmarks
	$(VENV)/bin/ruff format --check bot memory_worker
	$(VENV)/bin/mypy

soak: $(STAMP)
	$(PY) -m pytest -m slow

bench: $(STAMP)
	$(PY) benchmarks/memory_latency.py
	$(PY) benchmarks/locomo_recall.py --data ../shared/locomo/locomo-dev.json
	$(PY) benchmarks/pipeline.py
	$(PY) benchmarks/compaction_cost.py
	$(PY) benchmarks/load.py
	$(PY) benchmarks/load_bot.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
