# The two set-up commands of the README. Each one creates the virtual environment on a
# fresh machine (Python 3.11+ and Go must be installed) and then does its job.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test check unit clean prometheus

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
# local control plane (etcd, kube-apiserver, kube-scheduler, kubectl) is built from Go
# modules first, with its own progress, or reused from ~/.cache/policyd when built before.
test: $(BIN)/policyd check prometheus
	$(BIN)/policyd dev build
	$(BIN)/pytest

# The node-metrics integration tests scrape through a real Prometheus server (Debian's
# package); install it when missing.
prometheus:
	command -v prometheus >/dev/null || \
	  (apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus)

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
