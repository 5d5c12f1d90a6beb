# The two set-up commands of the README. Each one creates the virtual environment on a
# fresh machine (Python 3.11+ and Go must be installed) and then does its job.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test check unit clean

$(BIN)/policyd: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

# The main job on the embedded default: the live scheduler on a local control plane
# (built from Go modules on first use), scheduling the demo pods.
demo: $(BIN)/policyd
	$(BIN)/policyd dev build
	POLICYD=$(BIN)/policyd demo/run.sh

# Static checks, then the whole test suite (unit, integration and end-to-end). The
# local control plane (etcd, kube-apiserver, kube-scheduler, kubectl) and the Prometheus
# server of the node-metrics tests are built from Go modules first, with their own
# progress, or reused from ~/.cache/policyd when built before: no root, no apt-get.
test: $(BIN)/policyd check
	$(BIN)/policyd dev build
	$(BIN)/pytest

# The package layers of ARCHITECTURE.md are contracts ([tool.importlinter] in
# pyproject.toml): an import that runs back up a layer fails here.
check: $(BIN)/policyd
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: $(BIN)/policyd
	$(BIN)/pytest tests/unit

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .import_linter_cache
