#!/usr/bin/env bash
# The main job on the embedded default (`make demo`): schedule the demo pods on the demo
# cluster with the example policies, then explain two decisions. Exit 1 from policyd
# means "some pod does not fit", which the demo shows on purpose; anything else fails.
set -uo pipefail
cd "$(dirname "$0")/.."
policyd=${POLICYD:-.venv/bin/policyd}
common=(--cluster demo/cluster.yaml --pods demo/pods.yaml --policies policies/ --seed 1)

run() {
  echo
  echo "\$ policyd $*"
  "$policyd" "$@"
  local rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
    echo "demo: policyd exited $rc" >&2
    exit "$rc"
  fi
}

run simulate "${common[@]}"
run explain "${common[@]}" --pod data/payments-db
run explain "${common[@]}" --pod jobs/huge
