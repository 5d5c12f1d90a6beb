"""Engine-only benchmark (no API server), shaped like scheduler_perf's workloads.

    .venv/bin/python -m bench.engine_bench                 # the README table
    .venv/bin/python -m bench.engine_bench --nodes 5000 --workloads SchedulingBasic

Each (workload, node count) runs in a fresh subprocess so peak RSS is its own. Pods are
placed one after another, each placement counted before the next (as `simulate` does);
every pod is evaluated against all nodes (policyd does not sample nodes the way
kube-scheduler's percentageOfNodesToScore does). Reports pods/s, p50/p99 time per pod
and peak RSS, as markdown and JSON.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

WORKLOADS = ("SchedulingBasic", "TopologySpreading", "PodAntiAffinity", "PolicyMix")
ZONES = ("zone-1", "zone-2", "zone-3")


def _node(i: int) -> dict[str, Any]:
    # scheduler_perf's node-default.yaml: 4 cpu, 32Gi, 110 pods.
    return {"kind": "Node", "metadata": {"name": f"node-{i}", "labels": {
        "kubernetes.io/hostname": f"node-{i}", "topology.kubernetes.io/zone": ZONES[i % 3],
        **({"node.kubernetes.io/hw-encrypt": "true"} if i % 4 == 0 else {}),
        "env": "prod" if i % 2 else "staging"},
        "annotations": {"myorg.io/latency-ms": str(1 + i % 50)}},
        "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}}}


def _pod(name: str, workload: str, i: int, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "policyd", "containers": [{
        "name": "c", "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": name,
                            "labels": {"app": "bench"}}
    if node:
        spec["nodeName"] = node
    if workload == "PodAntiAffinity":
        # As scheduler_perf's SchedulingPodAntiAffinity: init pods carry the same
        # anti-affinity, so every existing pod also repels the measured ones.
        meta["labels"] = {"color": "green"}
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"color": "green"}},
             "topologyKey": "kubernetes.io/hostname"}]}}
    elif node:
        pass
    elif workload == "TopologySpreading":
        spec["topologySpreadConstraints"] = [{
            "maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "bench"}}}]
    elif workload == "PolicyMix" and i % 10 < 3:
        meta["annotations"] = {"myorg.io/require-hw-encrypt": "true"}
    return {"kind": "Pod", "metadata": meta, "spec": spec,
            "status": {"phase": "Running" if node else "Pending"}}


def run_one(workload: str, nodes: int, init_pods: int, pods: int) -> dict[str, Any]:
    from policyd.cli.schedule_cmds import load_policy_plugins
    from policyd.config.plugins import default_framework
    from policyd.engine.cycle import schedule_one
    from policyd.model.cluster import ClusterState
    from policyd.model.records import node_from_dict, pod_from_dict

    policies = (load_policy_plugins([Path(__file__).resolve().parent.parent / "policies"])
                if workload == "PolicyMix" else [])
    fw = default_framework(policies, seed=1)
    cluster = ClusterState([node_from_dict(_node(i)) for i in range(nodes)],
                           [pod_from_dict(_pod(f"init-{i}", workload, i, f"node-{i % nodes}"))
                            for i in range(init_pods)])
    todo = [pod_from_dict(_pod(f"pod-{i}", workload, i)) for i in range(pods)]
    cluster.table()  # build the columns outside the timed loop, as the daemon does at sync
    # Move the loaded cluster out of the collector's way (the daemon does this after its
    # initial sync): a full collection would otherwise walk every record again and again.
    gc.collect()
    gc.freeze()
    times = []
    placed = 0
    cpu_start = time.process_time()
    start = time.perf_counter()
    for pod in todo:
        t0 = time.perf_counter()
        result = schedule_one(fw, pod, cluster)
        if result.node is not None:
            cluster.assume(pod, result.node)
            placed += 1
        times.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    times.sort()
    return {
        "workload": workload, "nodes": nodes, "initPods": init_pods, "pods": pods,
        "placed": placed, "seconds": round(elapsed, 3),
        "podsPerSecond": round(pods / elapsed, 1),
        # CPU time is what the engine itself costs: steadier than wall time when other
        # processes share the two cores.
        "podsPerCpuSecond": round(pods / cpu, 1),
        "p50ms": round(statistics.median(times) * 1000, 3),
        "p99ms": round(times[int(len(times) * 0.99) - 1] * 1000, 3),
        "peakRssMB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[500, 5000, 15000])
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    ap.add_argument("--init-pods", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--anti-affinity-pods", type=int, default=1000,
                    help="measured pods for PodAntiAffinity (each needs its own node)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--one", nargs=4, metavar=("WORKLOAD", "NODES", "INIT", "PODS"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        w, n, i, p = args.one
        print(json.dumps(run_one(w, int(n), int(i), int(p))))
        return
    rows = []
    for nodes in args.nodes:
        for w in args.workloads:
            init, pods = args.init_pods, args.pods
            if w == "PodAntiAffinity":
                # Every pod needs a node of its own: scheduler_perf's 1000 init pods per
                # 5000 nodes, scaled to the cluster, and room left for the measured pods.
                init = min(args.init_pods, nodes // 5)
                pods = min(args.anti_affinity_pods, nodes - init)
            out = subprocess.run([sys.executable, "-m", "bench.engine_bench", "--one", w,
                                  str(nodes), str(init), str(pods)],
                                 check=True, capture_output=True, text=True)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(f"  {w} {nodes} nodes: {row['podsPerSecond']} pods/s", file=sys.stderr)
    print(f"machine: {platform.processor() or platform.machine()}, "
          f"{__import__('os').cpu_count()} cores, Python {platform.python_version()}")
    print("| workload | nodes | pods | placed | pods/s | pods/CPU-s | p50 ms | p99 ms "
          "| peak RSS MB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['workload']} | {r['nodes']} | {r['pods']} | {r['placed']} | "
              f"{r['podsPerSecond']} | {r['podsPerCpuSecond']} | {r['p50ms']} | "
              f"{r['p99ms']} | {r['peakRssMB']} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
