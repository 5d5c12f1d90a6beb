# The two set-up commands of the README. Each one creates the virtual environment on a
# fresh machine (Python 3.11+ and Go must be installed) and then does its job.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test check generate unit clean

$(BIN)/policyd: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

# The main job on the embedded default: the live scheduler on a local control plane
# (built from Go modules on first use), scheduling the demo pods.
demo: $(BIN)/policyd
	$(BIN)/policyd dev build --control-plane-only
	POLICYD=$(BIN)/policyd demo/run.sh

# Static checks, then the whole test suite (unit, integration and end-to-end). The
# local control plane (etcd, kube-apiserver, kube-scheduler, kubectl), the Prometheus
# server of the node-metrics tests, Karpenter's kwok provider of the autoscaler test and
# the helm CLI of the chart tests are built from Go modules first, with their own progress, or reused from
# ~/.cache/policyd when built before. The one system package: Debian's chromium, which
# the HTML page tests drive, installed by hack/ensure-chromium.sh when missing (root
# or sudo; it says what to install otherwise).
#
# The unit tests (plain objects, CPU only) run on every core (pytest-xdist). The
# integration and end-to-end tests run on every core too, a test file at a time per
# worker (--dist loadfile keeps a module's fixtures, its daemon or browser, on one
# worker), each worker with its own control plane: most of their time is waiting on
# the API server and daemons, not CPU (timings: docs/development.md).
test: $(BIN)/policyd check
	$(BIN)/policyd dev build
	bash hack/ensure-chromium.sh
	$(BIN)/pytest tests/unit -n auto
	$(BIN)/pytest --ignore=tests/unit -n auto --dist loadfile

# Every generated file, by the module that makes it (each run as `python -m MODULE`).
# WHOLE_FILES: FILE=MODULE, the module printing the whole file on stdout.
# IN_PLACE: modules that rewrite their files (or marked blocks) themselves and, with
# --check, only compare and exit 1 when one differs.
WHOLE_FILES := \
  schemas/policy.schema.json=policyd.policy.policy_schema \
  schemas/profile.schema.json=policyd.config.profile_schema \
  schemas/policytest.schema.json=policyd.policytest.schema \
  deploy/crd.yaml=policyd.policy.crd
IN_PLACE := \
  policyd.cli.doc_blocks \
  policyd.cli.commands_doc \
  bench.readme_tables \
  tools.gen_k8s_fields
# SCRIPTS: the same for scripts that are not importable modules (deploy/'s manifests).
SCRIPTS := hack/render-deploy.py

# Regenerate every generated file from its source (the k8s field table from the
# installed kubernetes client; the bench tables from the committed bench/results).
generate: $(BIN)/policyd
	@for g in $(WHOLE_FILES); do \
	  echo "$(BIN)/python -m $${g#*=} > $${g%%=*}"; \
	  $(BIN)/python -m $${g#*=} > $${g%%=*}.tmp && mv $${g%%=*}.tmp $${g%%=*} || exit 1; \
	done
	@for m in $(IN_PLACE); do echo "$(BIN)/python -m $$m"; $(BIN)/python -m $$m || exit 1; done
	@for f in $(SCRIPTS); do echo "$(BIN)/python $$f"; $(BIN)/python $$f || exit 1; done

# The package layers of ARCHITECTURE.md are contracts ([tool.importlinter] in
# pyproject.toml): an import that runs back up a layer fails here. Then every generated
# file must be what `make generate` writes: a hand edit or a stale file fails, naming it.
check: $(BIN)/policyd
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	@stale=0; \
	for g in $(WHOLE_FILES); do \
	  $(BIN)/python -m $${g#*=} | diff -u $${g%%=*} - || \
	    { echo "$${g%%=*} is stale: run make generate" >&2; stale=1; }; \
	done; \
	for m in $(IN_PLACE); do $(BIN)/python -m $$m --check || stale=1; done; \
	for f in $(SCRIPTS); do $(BIN)/python $$f --check || stale=1; done; \
	exit $$stale

unit: $(BIN)/policyd
	$(BIN)/pytest tests/unit -n auto

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .import_linter_cache
