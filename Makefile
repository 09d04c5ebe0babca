# Two commands for a fresh machine: `make demo` and `make test`. Both create or reuse .venv.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test torture lint bench asv clean docs

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[dev,spark]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m adaptive_arrow.demo

test: $(STAMP)
	$(PY) -m pytest -q -m "not torture"

torture: $(STAMP)
	$(PY) -m pytest -q -m "torture"

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

docs: $(STAMP)
	$(PY) -m otap_model.docgen > docs/data-model.md

bench: $(STAMP)
	$(PY) -m benchmarks.run

asv: $(STAMP)
	$(VENV)/bin/asv machine --yes
	$(VENV)/bin/asv run --python=same --quick --show-stderr

clean:
	rm -rf $(VENV) .asv .pytest_cache .hypothesis build *.egg-info
