"""End-to-end benchmark: kube-scheduler, policyd and a null scheduler on the local
control plane, same nodes, same pods, same client QPS and burst.

    .venv/bin/python -m bench.e2e_bench --mode capacity --nodes 5000 --pods 10000 \\
        --workloads SchedulingBasic,MixedShapes --cores shared,pinned
    .venv/bin/python -m bench.e2e_bench --mode rate --rates 50,100,200 --nodes 5000
    .venv/bin/python -m bench.e2e_bench --mode sync15k
    ... --json bench/results/e2e-latest.json

Modes (bench/e2e/modes.py): `capacity` creates every measured pod before the scheduler
starts and measures from the warm-up pod's bind until the last measured pod is bound
and its Scheduled event seen (pods/s, the scheduler's CPU ms per pod and its split by
thread for policyd, start to synced, start to done, peak RSS); `rate` creates pods at a
fixed rate for a scheduler already warm (p50/p99 creation-to-bind latency and whether
it kept up); `sync15k` is the capacity mode at 15,000 nodes and 3,000 init pods.
`--cores pinned` runs each scheduler on core 0 alone and the API server, etcd and this
process on core 1. Each cell runs `--repeats` times (5 by default), interleaved
(kube-scheduler, policyd, null, null-events, kube-scheduler, ...), each run on a fresh
control plane, and every run ends with the placement checks (bench/e2e/placement.py)
and the placement quality replay (bench/e2e/quality.py): a run that fails one is marked
failed. The null scheduler (bench/e2e/null_scheduler.py) binds round-robin without
evaluating anything: its capacity is this API server's ceiling on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.e2e import report, schedulers
from bench.e2e.modes import RUNNERS, RunSpec
from bench.e2e.shapes import WORKLOADS, default_init_pods, measured_pods
from policyd.devcluster.assets import K8S_VERSION

MODES = ("capacity", "rate", "sync15k", "all")
CORES = ("shared", "pinned")
SYNC_NODES = 15_000
# What kube-scheduler runs with besides its config file (each run's JSON holds the
# effective file): its v1 defaults, read in pkg/scheduler/apis/config/v1/defaults.go.
KUBE_SCHEDULER_DEFAULTS = (
    "enableProfiling true; enableContentionProfiling false (set by the benchmark; its "
    "default is true with profiling, kept only in the kube-scheduler-contention-profiling "
    "row); --v=0; clientConnection.contentType application/vnd.kubernetes.protobuf; "
    "parallelism 16; percentageOfNodesToScore adaptive")
DEFAULT_SCHEDULERS = (schedulers.KUBE_SCHEDULER, schedulers.POLICYD, schedulers.NULL,
                      schedulers.NULL_EVENTS)
PROTOCOL = 2  # issue 27: events in the window, no contention profiling, -v=0, pinning


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else "",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", default="capacity",
                        help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000,
                        help="measured pods of a capacity run (PodAntiAffinity: at most "
                             "one per free node)")
    parser.add_argument("--init-pods", type=int, default=None,
                        help="bound pods created first (default: nodes / 5, as "
                             "scheduler_perf's 1000 for 5000 nodes)")
    parser.add_argument("--workloads", default="SchedulingBasic",
                        help=f"comma-separated, of {', '.join(WORKLOADS)}")
    parser.add_argument("--schedulers", default=",".join(DEFAULT_SCHEDULERS),
                        help="comma-separated, in the order each repeat runs them")
    parser.add_argument("--contention-profiling-row", action="store_true",
                        help="also run kube-scheduler with its v1 default "
                             "enableContentionProfiling: true, as a comparison row (every "
                             "other kube-scheduler run has it off)")
    parser.add_argument("--cores", default="shared",
                        help=f"comma-separated, of {', '.join(CORES)}: shared = every "
                             "process on every core; pinned = the scheduler alone on core 0, "
                             "API server, etcd and the benchmark on core 1")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rates", default="50,100,200",
                        help="arrival rates (pods/s) of the rate mode")
    parser.add_argument("--rate-seconds", type=float, default=30.0,
                        help="how long each rate is held (pods = rate x seconds)")
    parser.add_argument("--sync-nodes", type=int, default=SYNC_NODES,
                        help="node count of the sync15k mode")
    parser.add_argument("--qps", type=float, default=5000.0,
                        help="client QPS of every scheduler (clientConnection.qps)")
    parser.add_argument("--burst", type=int, default=5000)
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds the measured pods of one run may take to be bound")
    parser.add_argument("--json", type=Path, default=None,
                        help="write every run here (rewritten after each run)")
    parser.add_argument("--append", action="store_true",
                        help="keep the runs already in --json and add these (one results "
                             "file from several command lines)")
    args = parser.parse_args(argv)
    for workload in _csv(args.workloads):
        if workload not in WORKLOADS:
            parser.error(f"unknown workload {workload!r}")
    for scheduler in _csv(args.schedulers):
        if scheduler not in schedulers.SCHEDULERS:
            parser.error(f"unknown scheduler {scheduler!r}")
    for mode in _csv(args.mode):
        if mode not in MODES:
            parser.error(f"unknown mode {mode!r}")
    for cores in _csv(args.cores):
        if cores not in CORES:
            parser.error(f"unknown --cores {cores!r}")
    if "pinned" in _csv(args.cores) and not {0, 1} <= os.sched_getaffinity(0):
        parser.error("--cores pinned needs CPUs 0 and 1 available to this process")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    return args


def plan(args: argparse.Namespace) -> list[RunSpec]:
    """Every run, in the order they are made: per cell, the repeats interleaved."""
    order = _csv(args.schedulers)
    if args.contention_profiling_row and schedulers.KUBE_SCHEDULER_CONTENTION not in order:
        order.append(schedulers.KUBE_SCHEDULER_CONTENTION)
    modes = [m for m in MODES[:-1] if m in _csv(args.mode) or "all" in _csv(args.mode)]
    specs: list[RunSpec] = []

    def cell(mode: str, workload: str, nodes: int, pods: int, rate: float | None,
             init: int) -> None:
        count = measured_pods(workload, pods, nodes, init)
        for cores in _csv(args.cores):
            for repeat in range(args.repeats):
                for scheduler in order:
                    specs.append(RunSpec(mode=mode, workload=workload, scheduler=scheduler,
                                         nodes=nodes, init_pods=init, pods=count,
                                         qps=args.qps, burst=args.burst, timeout=args.timeout,
                                         repeat=repeat, rate=rate,
                                         pinned=cores == "pinned"))

    init = args.init_pods if args.init_pods is not None else default_init_pods(args.nodes)
    for mode in modes:
        for workload in _csv(args.workloads):
            if mode == "capacity":
                cell("capacity", workload, args.nodes, args.pods, None, init)
            elif mode == "rate":
                for rate in (float(r) for r in _csv(args.rates)):
                    cell("rate", workload, args.nodes, round(rate * args.rate_seconds), rate,
                         init)
            elif mode == "sync15k":
                # scheduler_perf's largest: 15,000 nodes with its init pods (nodes / 5).
                cell("capacity", workload, args.sync_nodes, args.pods, None,
                     default_init_pods(args.sync_nodes))
    return specs


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    specs = plan(args)
    machine = (f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
               f"{platform.python_version()}, Kubernetes {K8S_VERSION}")
    command = "python -m bench.e2e_bench " + shlex.join(sys.argv[1:] if argv is None else argv)
    runs: list[dict[str, Any]] = []
    commands = [command]
    if args.append and args.json is not None and args.json.exists():
        earlier = json.loads(args.json.read_text())
        runs, commands = list(earlier["runs"]), [*earlier["commands"], command]
    doc: dict[str, Any] = {}
    for n, spec in enumerate(specs, 1):
        print(f"# [{n}/{len(specs)}] {spec.mode} {spec.workload} {spec.scheduler} "
              f"repeat {spec.repeat + 1}: {spec.nodes} nodes, {spec.init_pods} init pods, "
              f"{spec.pods} pods" + (f", {spec.rate:g} pods/s" if spec.rate else "")
              + (", pinned" if spec.pinned else ""),
              file=sys.stderr, flush=True)
        began = time.monotonic()
        result = RUNNERS[spec.mode](spec)
        # The whole run, control plane and setup included: what a full session costs.
        runs.append({**asdict(result), "run_wall_s": round(time.monotonic() - began, 1)})
        print(f"  {'FAILED ' + '; '.join(result.failures) if result.failed else 'ok'} "
              f"{result.figures} {result.metrics}", file=sys.stderr, flush=True)
        doc = report.document(
            runs, machine=machine, date=datetime.now(UTC).strftime("%Y-%m-%d"),
            commands=commands, qps=args.qps, burst=args.burst, protocol=PROTOCOL,
            kube_scheduler_defaults=KUBE_SCHEDULER_DEFAULTS)
        if args.json is not None:  # after every run: a long session keeps what it has
            args.json.write_text(json.dumps(doc, indent=1) + "\n")
    print(report.markdown(doc))
    return 1 if any(r["failed"] for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
