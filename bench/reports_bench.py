"""How long the daemon's OpenReports round holds the scheduler's state lock: the audit
of every bound pod (`engine.audit`, under the lock) and the building of the reports
(`engine.openreports`, outside it), on `bench.diff_bench`'s cluster and new policies.

    .venv/bin/python -m bench.reports_bench            # 5,000 nodes, 50,000 pods
    .venv/bin/python -m bench.reports_bench --nodes 500 --pods 5000

Prints each run's wall and CPU seconds and writes them to bench/results/reports-latest.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.diff_bench import NEW_POLICIES, write_cluster, write_policies

RESULTS = Path(__file__).parent / "results" / "reports-latest.json"


def main() -> None:
    from policyd.cli.schedule_cmds import frameworks_for
    from policyd.engine.audit import audit, by_scheduler
    from policyd.engine.openreports import findings, reports
    from policyd.model.cluster_files import load_snapshot
    from policyd.policy.compiler import profile_policies

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, default=RESULTS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="policyd-reports-bench-") as tmp:
        work = Path(tmp)
        write_cluster(args.nodes, args.pods, 100, work / "cluster.json")
        policies = write_policies(NEW_POLICIES, work / "policies")
        snap = load_snapshot(work / "cluster.json")
        frameworks = frameworks_for(None, [policies], None, None, [])
    state = snap.cluster()
    pods = state.assigned_pods()
    every = tuple({p.policy_name: p for fw in frameworks.values()
                   for p in profile_policies(fw)}.values())
    runs = []
    for _ in range(args.runs):
        wall, cpu = time.perf_counter(), time.process_time()
        result = audit(state, pods, by_scheduler({}, every))
        locked = (time.perf_counter() - wall, time.process_time() - cpu)
        wall = time.perf_counter()
        objects = reports(findings(result), lambda _: 0.0)
        runs.append({"auditSeconds": round(locked[0], 3), "auditCpuSeconds": round(locked[1], 3),
                     "reportsSeconds": round(time.perf_counter() - wall, 3),
                     "reports": len(objects),
                     "results": sum(len(o["results"]) for o in objects.values())})
    doc = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                   f"Python {platform.python_version()}",
        "command": " ".join(["python -m bench.reports_bench", *sys.argv[1:]]),
        "nodes": args.nodes, "boundPods": len(pods), "policies": len(every),
        "auditSecondsMedian": statistics.median(r["auditSeconds"] for r in runs),
        "runs": runs,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))
    print(f"the reports' audit of {len(pods):,} bound pods on {args.nodes:,} nodes holds the "
          f"state lock {doc['auditSecondsMedian']} s (median of {args.runs}); reproduce: "
          f"{doc['command']}", file=sys.stderr)


if __name__ == "__main__":
    main()
