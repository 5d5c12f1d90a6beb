"""Engine-only gang benchmark (no API server): one pod group cycle of a `--pods`-pod gang
(minCount = its size, every pod fits) on `--nodes` scheduler_perf nodes, as the daemon
runs it: the trial (`try_pod_group`: every member scheduled, assumed, reserved and
permitted on one snapshot, then undone), then every member placed for real (`place`),
with GenericWorkload and GangScheduling on.

    .venv/bin/python -m bench.gang_engine --nodes 5000 --pods 1000
    .venv/bin/python -m bench.gang_engine --nodes 1000 --pods 200 --profile 25

Reports the wall and CPU seconds of the trial and of the placement; `--profile N`
runs the whole cycle under cProfile and prints the N functions with the most
cumulative time and the N with the most own time (py-spy is not installed here).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from typing import Any

from bench.engine.workloads import scheduler_perf_node, scheduler_perf_pod
from policyd.config.plugins import default_framework
from policyd.engine.cycle import place
from policyd.engine.pod_group import try_pod_group
from policyd.features import with_settings
from policyd.framework.runtime import Framework
from policyd.model.cluster import ClusterState
from policyd.model.pod_groups import WORKLOAD_API, pod_group_from_dict
from policyd.model.records import Pod, node_from_dict, pod_from_dict

GATES = with_settings([("GenericWorkload", True), ("GangScheduling", True)])
GROUP = "gang"


def build(nodes: int, pods: int) -> tuple[Framework, ClusterState, list[Pod]]:
    members = []
    for i in range(pods):
        raw: dict[str, Any] = scheduler_perf_pod(f"member-{i}", "SchedulingBasic", i)
        raw["spec"]["schedulingGroup"] = {"podGroupName": GROUP}
        members.append(pod_from_dict(raw))
    cluster = ClusterState([node_from_dict(scheduler_perf_node(i)) for i in range(nodes)],
                           members)
    cluster.pod_groups.upsert(pod_group_from_dict({
        "apiVersion": WORKLOAD_API, "kind": "PodGroup",
        "metadata": {"name": GROUP, "namespace": "default", "uid": "uid-gang",
                     "generation": 1},
        "spec": {"schedulingPolicy": {"gang": {"minCount": pods}}}}))
    return default_framework(features=GATES), cluster, members


def cycle(fw: Framework, cluster: ClusterState, members: list[Pod]
          ) -> dict[str, float]:
    """One group cycle; the wall and CPU seconds of its two halves."""
    w0, c0 = time.perf_counter(), time.process_time()
    attempt = try_pod_group(fw, members, cluster)
    w1, c1 = time.perf_counter(), time.process_time()
    placed = [place(fw, cluster, r) for r in attempt.placed]
    w2, c2 = time.perf_counter(), time.process_time()
    if not attempt.schedulable or sum(r.node is not None for r in placed) != len(members):
        raise SystemExit(f"the gang was not placed whole: {attempt.condition}")
    return {"trial_wall_s": round(w1 - w0, 3), "trial_cpu_s": round(c1 - c0, 3),
            "place_wall_s": round(w2 - w1, 3), "place_cpu_s": round(c2 - c1, 3),
            "cpu_ms_per_pod": round((c2 - c0) * 1000 / len(members), 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="run under cProfile and print the top N functions")
    args = parser.parse_args(argv)
    if args.pods < 1 or args.nodes < 1:
        parser.error("--pods and --nodes must be at least 1")
    fw, cluster, members = build(args.nodes, args.pods)
    if not args.profile:
        print({"nodes": args.nodes, "pods": args.pods, **cycle(fw, cluster, members)})
        return 0
    profiler = cProfile.Profile()
    profiler.enable()
    figures = cycle(fw, cluster, members)
    profiler.disable()
    print({"nodes": args.nodes, "pods": args.pods, "profiled": True, **figures})
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("cumulative").print_stats(args.profile)
    stats.sort_stats("tottime").print_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
