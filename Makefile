# Two commands for a fresh machine: `make demo` and `make test`. Both create or reuse .venv.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test torture fuzz lint bench asv clean docs

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# interop/js/node_modules (Apache Arrow JS, protobufjs) for tests/test_interop_js.py, from the lock file;
# without npm the demo still runs and that test fails saying what is missing.
$(STAMP): pyproject.toml interop/js/package-lock.json Makefile | $(PY)
	$(PY) -m pip install --quiet -e ".[dev,spark,fuzz]"
	@if command -v npm >/dev/null; then npm ci --prefix interop/js --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null; \
	else echo "npm not found: Node.js 18+ is needed by tests/test_interop_js.py (then: npm ci --prefix interop/js)" >&2; fi
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m adaptive_arrow.demo

test: $(STAMP)
	$(PY) -m pytest -q -m "not torture"

torture: $(STAMP)
	$(PY) -m pytest -q -m "torture"

# Coverage-guided fuzzing (atheris) of every reader, 120 s per target: FUZZ_ARGS="--seconds 600 otlp"
fuzz: $(STAMP)
	$(PY) -m fuzz $(FUZZ_ARGS)

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
