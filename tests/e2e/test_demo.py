"""The README's main job, `policyd demo`, as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e


def test_policyd_demo_schedules_the_demo_pods_live() -> None:
    # As demo/run.sh (`make demo`) runs it: explain reads the cluster the daemon scheduled.
    r = subprocess.run([sys.executable, "-m", "policyd", "demo", "--explain",
                        "data/payments-db", "--explain", "jobs/huge"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    placed = {ln.split()[0]: ln.split()[-1] for ln in lines if "->" in ln}
    # The hw-encrypt pod only on a node with the label (node-a1 or node-b1 in the demo).
    assert placed["data/payments-db"] in ("node-a1", "node-b1")
    # EnvProd: the lowercase env=prod label; node-b1 has `Env` and must not be chosen.
    assert placed["shop/orders-api"] in ("node-a1", "node-a2")
    assert placed["jobs/huge"] == "(pending)"
    # The pod is bigger than any node: evicting cannot help anywhere.
    assert ("FailedScheduling: 0/6 nodes are available: 1 node(s) had untolerated taint(s), "
            "1 node(s) were unschedulable, 2 Insufficient memory, 4 Insufficient cpu. "
            "no new claims to deallocate, preemption: 0/6 nodes are available: 6 Preemption "
            "is not helpful for scheduling.") in r.stdout
    assert "Scheduled: Successfully assigned data/payments-db to " in r.stdout

    # The live FailedScheduling message for jobs/huge and the one explain prints right
    # after it are the same (issue 18: explain read the demo files before, whose
    # placements differ from the live ones).
    live = next(ln.split("FailedScheduling: ", 1)[1] for ln in lines
                if "FailedScheduling: " in ln)
    explained = r.stdout.split("Pod jobs/huge is unschedulable:\n", 1)[1].splitlines()[0]
    assert explained.strip() == live
    assert "$ policyd explain data/payments-db --kubeconfig " in r.stdout
    assert ("Pod data/payments-db -> node-a1" in r.stdout
            or "Pod data/payments-db -> node-b1" in r.stdout)
