#!/usr/bin/env bash
# The main job on the embedded default (`make demo`): the live scheduler places the demo
# pods on a local API server (policyd demo), then `policyd explain` reads that same
# cluster while the daemon still runs and shows every plugin's verdict behind two of
# those decisions (its message for jobs/huge is the daemon's FailedScheduling message).
# Exit 1 from explain means "the pod fits no node", which the demo shows on purpose;
# `policyd demo` fails only when the demo itself (or explain, with exit 2+) does.
set -uo pipefail
cd "$(dirname "$0")/.."
policyd=${POLICYD:-.venv/bin/policyd}
echo "\$ policyd demo --explain data/payments-db --explain jobs/huge"
"$policyd" demo --explain data/payments-db --explain jobs/huge || exit $?
