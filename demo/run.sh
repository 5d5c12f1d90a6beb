#!/usr/bin/env bash
# The main job on the embedded default (`make demo`): the live scheduler places the demo
# pods on a local API server (policyd demo), then `policyd explain` shows, offline, every
# plugin's verdict behind two of those decisions. Exit 1 from explain means "the pod
# fits no node", which the demo shows on purpose; anything else fails.
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

echo "\$ policyd demo"
"$policyd" demo || exit $?
run explain "${common[@]}" --pod data/payments-db
run explain "${common[@]}" --pod jobs/huge
