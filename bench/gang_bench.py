"""Gang benchmark (issue 30): one gang of `--pods` pods (a scheduling.k8s.io/v1alpha2
PodGroup with minCount = its size; every pod fits) on `--nodes` nodes, placed by
kube-scheduler v1.36.3 and by policyd, side by side in one run, both with
GenericWorkload and GangScheduling on (API server and scheduler).

    .venv/bin/python -m bench.gang_bench --nodes 5000 --pods 1000 \\
        --json bench/results/gang-latest.json

Each (scheduler, repeat) runs on a fresh control plane started with the gates (no
kube-controller-manager, as in the e2e bench), the nodes of the e2e bench's
SchedulingBasic workload and no other pod. The scheduler starts, its warm-up pod is
bound (caches synced), then the PodGroup is created and then its members, by
CREATOR_THREADS threads: GangScheduling's PreEnqueue holds every member until the
last one exists, so the group is tried in one pod group cycle. Measured per gang:
- wall: from the first member's creation (its POST sent) to the last member's bind
  (seen on a watch), and the part of it after the last member's creation;
- CPU: the scheduler's CPU seconds over the same window (read in the watch thread at
  the last bind), and the API server's;
- that the PodGroup ends PodGroupScheduled=True and every member is bound.

Runs interleave (kube-scheduler, policyd, kube-scheduler, ...) as in bench.e2e_bench.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.e2e import schedulers
from bench.e2e.cluster import PODS_PATH, BindWatch, bench_client, each, populate
from bench.e2e.modes import SYNC_TIMEOUT, CpuMarks
from bench.e2e.shapes import NAMESPACE, WARM_UP, measured_pod_name, pod_body
from policyd.devcluster import ControlPlane
from policyd.devcluster.assets import K8S_VERSION

GATES = {"GenericWorkload": True, "GangScheduling": True}
WORKLOAD = "SchedulingBasic"  # its nodes and pod shape (100m CPU, 500Mi each)
GROUP = "gang"
GROUPS_PATH = f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{NAMESPACE}/podgroups"
CREATOR_THREADS = 16
SCHEDULERS = (schedulers.KUBE_SCHEDULER, schedulers.POLICYD)


@dataclass
class GangRun:
    scheduler: str
    nodes: int
    pods: int
    repeat: int
    failed: bool = False
    failures: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    def fail(self, why: str) -> None:
        self.failed = True
        self.failures.append(why)


def member(i: int, flavour: str) -> dict[str, Any]:
    body = pod_body(measured_pod_name(i), WORKLOAD, scheduler=flavour, index=i)
    body["spec"]["schedulingGroup"] = {"podGroupName": GROUP}
    return body


def pod_group(min_count: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": GROUP, "namespace": NAMESPACE},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}


def run_one(scheduler: str, nodes: int, pods: int, repeat: int, timeout: float,
            qps: float, burst: int) -> GangRun:
    run = GangRun(scheduler, nodes, pods, repeat)
    names = [measured_pod_name(i) for i in range(pods)]
    flavour = schedulers.pod_flavour(scheduler)
    with (tempfile.TemporaryDirectory(prefix="policyd-gang-bench-") as tmp,
          ControlPlane(controller_manager=False, feature_gates=GATES) as cp):
        client = bench_client(cp)
        populate(client, WORKLOAD, flavour, nodes, init_pods=0)
        apiserver = next(p.pid for p in cp.processes if p.name == "kube-apiserver")
        cpu: CpuMarks | None = None
        wanted = set(names)
        bound = 0
        lock = threading.Lock()

        def on_bound(name: str, _at: float) -> None:
            nonlocal bound
            with lock:
                if name in wanted and cpu is not None:
                    bound += 1
                    if bound == len(wanted):
                        cpu.mark("last_bind")

        watch = BindWatch(client, on_bound)
        sched = schedulers.start(scheduler, cp, Path(tmp), qps=qps, burst=burst,
                                 policies=False)
        cpu = CpuMarks({"scheduler": sched.pid, "apiserver": apiserver})
        try:
            client.request("POST", PODS_PATH, body=pod_body(WARM_UP, WORKLOAD,
                                                            scheduler=flavour))
            if not watch.wait_for([WARM_UP], SYNC_TIMEOUT, sched.alive):
                run.fail(f"warm-up pod not bound within {SYNC_TIMEOUT:.0f}s:\n"
                         f"{sched.log_tail()}")
                return run
            client.request("POST", GROUPS_PATH, body=pod_group(pods))
            created: dict[int, float] = {}

            def create(i: int) -> None:
                if i == 0:
                    cpu.mark("first_created")
                created[i] = time.monotonic()
                client.request("POST", PODS_PATH, body=member(i, flavour))
                created[i] = min(created[i], time.monotonic())

            # Member 0 first (it starts the clock), then the rest in parallel.
            create(0)
            each(create, range(1, pods), threads=CREATOR_THREADS)
            t_created = time.monotonic()
            if not watch.wait_for(names, timeout, sched.alive):
                run.fail(f"{sum(n in watch.bound for n in names)}/{pods} bound within "
                         f"{timeout:.0f}s:\n{sched.log_tail()}")
                return run
            cpu.mark("last_bind")  # set by the watch thread already, unless it raced us
            t_first, t_last = created[0], max(watch.bound[n] for n in names)
            group = client.request("GET", f"{GROUPS_PATH}/{GROUP}")
            conds = {c["type"]: c for c in (group.get("status") or {}).get("conditions", [])}
            scheduled = conds.get("PodGroupScheduled", {})
            if scheduled.get("status") != "True":
                run.fail(f"PodGroupScheduled is {scheduled or 'missing'}")
            sched_cpu = cpu.between("scheduler", "first_created", "last_bind")
            run.figures = {
                "wall_s": round(t_last - t_first, 2),
                "create_s": round(t_created - t_first, 2),
                "after_last_creation_s": round(t_last - t_created, 2),
                "first_bind_after_last_creation_s": round(
                    min(watch.bound[n] for n in names) - t_created, 2),
                "cpu_s": round(sched_cpu, 2),
                "cpu_ms_per_pod": round(sched_cpu * 1000 / pods, 3),
                "apiserver_cpu_s": round(cpu.between("apiserver", "first_created",
                                                     "last_bind"), 2),
                "pod_group_scheduled": scheduled.get("status"),
            }
        finally:
            watch.stop()
            sched.stop()
            client.close()
    return run


def markdown(runs: list[dict[str, Any]]) -> str:
    lines = ["| scheduler | nodes | pods | repeat | wall s (first creation to last bind) "
             "| after last creation s | scheduler CPU s | CPU ms/pod | API server CPU s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        f = r["figures"]
        if r["failed"]:
            lines.append(f"| {r['scheduler']} | {r['nodes']} | {r['pods']} | "
                         f"{r['repeat'] + 1} | FAILED: {'; '.join(r['failures'])[:200]} "
                         "| | | | |")
            continue
        lines.append(f"| {r['scheduler']} | {r['nodes']} | {r['pods']} | {r['repeat'] + 1} "
                     f"| {f['wall_s']} | {f['after_last_creation_s']} | {f['cpu_s']} "
                     f"| {f['cpu_ms_per_pod']} | {f['apiserver_cpu_s']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=1000, help="the gang's size and minCount")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--schedulers", default=",".join(SCHEDULERS))
    parser.add_argument("--qps", type=float, default=5000.0)
    parser.add_argument("--burst", type=int, default=5000)
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds the gang may take to be bound")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    order = [s.strip() for s in args.schedulers.split(",") if s.strip()]
    for s in order:
        if s not in SCHEDULERS:
            parser.error(f"unknown scheduler {s!r} (of {', '.join(SCHEDULERS)})")
    if args.pods < 1 or args.nodes < 1:
        parser.error("--pods and --nodes must be at least 1")
    command = "python -m bench.gang_bench " + shlex.join(sys.argv[1:] if argv is None else argv)
    runs: list[dict[str, Any]] = []
    for repeat in range(args.repeats):
        for scheduler in order:
            print(f"# {scheduler} repeat {repeat + 1}: a {args.pods}-pod gang on "
                  f"{args.nodes} nodes", file=sys.stderr, flush=True)
            began = time.monotonic()
            run = run_one(scheduler, args.nodes, args.pods, repeat, args.timeout,
                          args.qps, args.burst)
            runs.append({**asdict(run), "run_wall_s": round(time.monotonic() - began, 1)})
            print(f"  {'FAILED ' + '; '.join(run.failures) if run.failed else 'ok'} "
                  f"{run.figures}", file=sys.stderr, flush=True)
            if args.json is not None:
                args.json.write_text(json.dumps({
                    "command": command, "date": datetime.now(UTC).strftime("%Y-%m-%d"),
                    "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
                               f"{platform.python_version()}, Kubernetes {K8S_VERSION}",
                    "feature_gates": GATES, "runs": runs}, indent=1) + "\n")
    print(markdown(runs))
    return 1 if any(r["failed"] for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
