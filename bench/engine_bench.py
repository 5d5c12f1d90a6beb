"""Engine-only benchmark (no API server): scheduler_perf's workloads, plus a mixed one.

    .venv/bin/python -m bench.engine_bench                 # the docs/performance.md table
    .venv/bin/python -m bench.engine_bench --nodes 5000 --workloads SchedulingBasic Mixed
    .venv/bin/python -m bench.engine_bench --nodes 5000 --workloads SchedulingBasic \\
        --gc-freeze                                        # what gc.freeze() would be worth
    .venv/bin/python -m bench.engine_bench --nodes 1000 5000 --workloads DynamicResources

Each (workload, node count) runs in a fresh subprocess so peak RSS is its own. Pods are
placed one after another, each placement counted before the next (as `simulate` does);
every pod is evaluated against all nodes (policyd does not sample nodes the way
kube-scheduler's percentageOfNodesToScore does).

So that caches are not flattered: by default every node's status is updated every 10 s
(`--churn-period`, 0 = static nodes) through the daemon's node-update path, interleaved
with the pods by elapsed CPU time (`bench.engine.churn`); and `Mixed` takes twelve pod
shapes in turn on heterogeneous nodes (`bench.engine.mixed`). `DynamicResources`
(not in the default run) gives every node a slice of 8 devices and every pod a claim
for one (`bench.engine.dra`), at most as many pods as devices.

Reports pods/s (wall) next to pods per CPU-second of the process (steady when other
processes share the cores), p50/p99 time per scheduling cycle, peak RSS, and the
collector's pauses during the run; as markdown and, with --json, as JSON rows that
`bench.engine.report.markdown` turns back into the table.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.engine import dra, mixed
from bench.engine.churn import HeartbeatSchedule, NodeHeartbeats
from bench.engine.report import markdown
from bench.engine.workloads import (
    SCHEDULER_PERF_WORKLOADS,
    WITH_POLICIES,
    scheduler_perf_node,
    scheduler_perf_pod,
)
from policyd.cli.schedule_cmds import load_policy_plugins
from policyd.config.plugins import default_framework
from policyd.engine.cycle import schedule_one
from policyd.framework.runtime import Framework
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod, node_from_dict, pod_from_dict

WORKLOADS = (*SCHEDULER_PERF_WORKLOADS, "Mixed")
# Chosen by name only: the default run (the docs' table) stays the workloads above.
CHOICES = (*WORKLOADS, dra.NAME)
POLICIES = Path(__file__).resolve().parent.parent / "policies"
CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.process_time, "wall": time.perf_counter}


class GcPauses:
    """CPU time the cyclic collector spends while installed, and its full collections
    (CPU, not wall: other processes on the machine must not lengthen the pauses)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full = 0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.process_time()
        else:
            self.seconds += time.process_time() - self._start
            self.full += info["generation"] == 2


def build(workload: str, nodes: int, init_pods: int, pods: int
          ) -> tuple[Framework, ClusterState, list[Pod]]:
    """The framework, the loaded cluster (existing pods placed) and the pods to place."""
    fw = default_framework(load_policy_plugins([POLICIES]) if workload in WITH_POLICIES
                           else [], seed=1)
    if workload == "Mixed":
        cluster = ClusterState([node_from_dict(mixed.node(i)) for i in range(nodes)])
        # Existing pods of every shape, placed by the engine itself so that they obey
        # their own constraints (a nodeSelector pod bound at random would not).
        for k in range(init_pods):
            p = pod_from_dict(mixed.pod(f"init-{k}", k))
            result = schedule_one(fw, p, cluster)
            if result.node is not None:
                cluster.assume(p, result.node)
        todo = [pod_from_dict(mixed.pod(f"pod-{k}", k)) for k in range(pods)]
    elif workload == dra.NAME:
        cluster = ClusterState(
            [node_from_dict(scheduler_perf_node(i)) for i in range(nodes)],
            [pod_from_dict(scheduler_perf_pod(f"init-{i}", workload, i, f"node-{i % nodes}"))
             for i in range(init_pods)])
        dra.add_devices(cluster, nodes)
        todo = [dra.pod_with_claim(cluster, f"pod-{i}", i) for i in range(pods)]
    else:
        cluster = ClusterState(
            [node_from_dict(scheduler_perf_node(i)) for i in range(nodes)],
            [pod_from_dict(scheduler_perf_pod(f"init-{i}", workload, i, f"node-{i % nodes}"))
             for i in range(init_pods)])
        todo = [pod_from_dict(scheduler_perf_pod(f"pod-{i}", workload, i))
                for i in range(pods)]
    return fw, cluster, todo


def run_one(workload: str, nodes: int, init_pods: int, pods: int, *,
            churn_period: float = 10.0, churn_clock: str = "cpu",
            gc_freeze: bool = False) -> dict[str, Any]:
    fw, cluster, todo = build(workload, nodes, init_pods, pods)
    cluster.table()  # build the columns outside the timed loop, as the daemon does at sync
    if gc_freeze:
        # What the daemon does once its caches first synced (`freeze_startup_heap`):
        # there it took the full collections of the 5000-node capacity window from
        # 0.96 s of CPU to 0.15 s. Off by default here, so the committed figures show
        # the engine with the collector walking the whole loaded cluster.
        gc.collect()
        gc.freeze()
    heartbeats = NodeHeartbeats(cluster)
    schedule = HeartbeatSchedule(nodes, churn_period)
    clock = CLOCKS[churn_clock]
    pauses = GcPauses()
    gc.callbacks.append(pauses)
    times = []
    # Mixed: each shape's cycle times, so a slow shape shows (its plugins' cost).
    by_shape: dict[str, list[float]] = {}
    shape_of = mixed.shape_name if workload == "Mixed" else None
    with_claims = workload == dra.NAME
    placed = 0
    update_seconds = 0.0
    clock_start = clock()
    cpu_start = time.process_time()
    start = time.perf_counter()
    for k, pod in enumerate(todo):
        t0 = time.perf_counter()
        result = schedule_one(fw, pod, cluster)
        if result.node is not None:
            cluster.assume(pod, result.node)
            if with_claims:  # Reserve, and the claims written as PreBind would
                result = dra.settle(fw, cluster, result, resource_version=k + 2)
                if result.node is None:
                    cluster.forget(pod)
            placed += result.node is not None
        t1 = time.perf_counter()
        times.append(t1 - t0)
        if shape_of is not None:
            by_shape.setdefault(shape_of(k), []).append(t1 - t0)
        # The heartbeats that arrived while that pod was scheduled, as the daemon's
        # informer thread would have applied them between two cycles.
        elapsed = clock() - clock_start
        due = schedule.due(elapsed)
        if due:
            heartbeats.apply(due, elapsed)
            update_seconds += time.perf_counter() - t1
    elapsed_wall = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    gc.callbacks.remove(pauses)
    times.sort()
    return {
        "workload": workload, "nodes": nodes, "initPods": init_pods, "pods": pods,
        "placed": placed, "seconds": round(elapsed_wall, 3),
        "podsPerSecond": round(pods / elapsed_wall, 1),
        # CPU time is what the engine itself costs: steadier than wall time when other
        # processes share the two cores.
        "podsPerCpuSecond": round(pods / cpu, 1),
        "cpuSeconds": round(cpu, 3),
        "p50ms": round(statistics.median(times) * 1000, 3),
        "p99ms": round(times[int(len(times) * 0.99) - 1] * 1000, 3),
        "peakRssMB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "churnPeriod": churn_period, "churnClock": churn_clock,
        "nodeUpdates": heartbeats.applied,
        "nodeUpdateUs": round(update_seconds / heartbeats.applied * 1e6, 1)
        if heartbeats.applied else 0.0,
        "nodeUpdateEvents": heartbeats.events,
        "gcFreeze": gc_freeze, "gcCpuMs": round(pauses.seconds * 1000, 1),
        "gcFullCollections": pauses.full,
        "shapeP50ms": {s: round(statistics.median(t) * 1000, 3) for s, t in by_shape.items()},
    }


def cell_sizes(workload: str, nodes: int, init_pods: int, pods: int,
               anti_affinity_pods: int) -> tuple[int, int]:
    if workload == "PodAntiAffinity":
        # Every pod needs a node of its own: scheduler_perf's 1000 init pods per
        # 5000 nodes, scaled to the cluster, and room left for the measured pods.
        init = min(init_pods, nodes // 5)
        return init, min(anti_affinity_pods, nodes - init)
    if workload == dra.NAME:
        return init_pods, min(pods, dra.capacity(nodes))
    return init_pods, pods


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[500, 5000, 15000])
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=CHOICES)
    ap.add_argument("--init-pods", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--anti-affinity-pods", type=int, default=1000,
                    help="measured pods for PodAntiAffinity (each needs its own node)")
    ap.add_argument("--churn-period", type=float, default=10.0, metavar="SECONDS",
                    help="update every node's status once per this many seconds of the "
                         "run (0: static nodes)")
    ap.add_argument("--churn-clock", choices=sorted(CLOCKS), default="cpu",
                    help="the clock that paces the updates: the process's CPU time "
                         "(same rate per unit of work on a busy machine) or wall time")
    ap.add_argument("--gc-freeze", action="store_true",
                    help="gc.freeze() the loaded cluster before placing pods, as the "
                         "daemon does once its caches synced")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # a JSON object: run_one's arguments
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(**json.loads(args.one))))
        return
    rows = []
    for nodes in args.nodes:
        for w in args.workloads:
            init, pods = cell_sizes(w, nodes, args.init_pods, args.pods,
                                    args.anti_affinity_pods)
            cell = {"workload": w, "nodes": nodes, "init_pods": init, "pods": pods,
                    "churn_period": args.churn_period, "churn_clock": args.churn_clock,
                    "gc_freeze": args.gc_freeze}
            out = subprocess.run([sys.executable, "-m", "bench.engine_bench", "--one",
                                  json.dumps(cell)],
                                 check=True, capture_output=True, text=True)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(f"  {w} {nodes} nodes: {row['podsPerSecond']} pods/s, "
                  f"{row['podsPerCpuSecond']} pods/CPU-s, {row['placed']}/{row['pods']} "
                  f"placed", file=sys.stderr)
    machine = (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
               f"Python {platform.python_version()}")
    print(f"machine: {machine}")
    print(markdown(rows), end="")
    if args.json:
        doc = {"date": time.strftime("%Y-%m-%d"), "machine": machine,
               "command": "python -m bench.engine_bench " + " ".join(sys.argv[1:]),
               "rows": rows}
        args.json.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
