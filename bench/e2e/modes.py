"""One run of one mode with one scheduler, on a fresh control plane.

Capacity: the measured pods (and the warm-up pod, whose PriorityClass puts it first in
both schedulers' queues) are created before the scheduler starts; the window runs from
the warm-up pod's bind (caches synced, first pod scheduled) to the last measured bind.
Only pods bound after the warm-up pod count in the rate, and the scheduler's CPU time is
read in the watch thread at those two binds.

Rate: the scheduler is started and warm (its warm-up pod bound) first; then pods are
created on a fixed schedule (pod i at t0 + i / rate) by a few creator threads, each
creation time recorded as its POST is sent (the achieved arrival rate). Bind latency
runs from the pod's first appearance on the benchmark's watch to its bind on the same
watch (from the POST too, in the JSON: that adds how long the API server queued it).

Every run ends with the placement checks over the listed nodes and pods and the
scheduler's metrics scraped before and after the window.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.e2e import pacing, placement, schedulers, scrape
from bench.e2e.cluster import PODS_PATH, BindWatch, bench_client, each, list_all, populate
from bench.e2e.shapes import WARM_UP, measured_pod_name, pod_body
from policyd.devcluster import ControlPlane
from policyd.kube.client import KubeClient

CREATOR_THREADS = 8
# How long a scheduler may take from its start to binding the warm-up pod (caches
# synced): generous, a 15,000-node list on a busy 2-core machine takes a while.
SYNC_TIMEOUT = 300.0


@dataclass
class RunSpec:
    mode: str  # "capacity" | "rate"
    workload: str
    scheduler: str
    nodes: int
    init_pods: int
    pods: int
    qps: float
    burst: int
    timeout: float
    repeat: int = 0
    rate: float | None = None
    creator_threads: int = CREATOR_THREADS


@dataclass
class RunResult:
    spec: dict[str, Any]
    failed: bool = False
    failures: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    checks: dict[str, Any] = field(default_factory=dict)
    scheduler_config: dict[str, Any] = field(default_factory=dict)

    def fail(self, why: str) -> None:
        self.failed = True
        self.failures.append(why)


class CpuMarks:
    """The scheduler's (and the API server's) CPU seconds read at named moments, from
    whichever thread sees the moment happen."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.marks: dict[str, dict[str, float]] = {}

    def mark(self, moment: str) -> None:
        if moment not in self.marks:
            self.marks[moment] = {who: _cpu_or_nan(pid) for who, pid in self.pids.items()}

    def between(self, who: str, start: str, end: str) -> float:
        return self.marks[end][who] - self.marks[start][who]


def _cpu_or_nan(pid: int) -> float:
    try:
        return scrape.cpu_seconds(pid)
    except OSError:  # exited meanwhile: the run fails on its own account
        return float("nan")


def _apiserver_pid(cp: ControlPlane) -> int:
    return next(p.pid for p in cp.processes if p.name == "kube-apiserver")


@contextmanager
def _fresh_cluster(spec: RunSpec) -> Iterator[tuple[ControlPlane, KubeClient, Path]]:
    # No kube-controller-manager: the workloads have no volumes, and its watches would
    # load the API server the schedulers are measured against (and change the figures).
    with (tempfile.TemporaryDirectory(prefix="policyd-bench-") as tmp,
          ControlPlane(controller_manager=False) as cp):
        client = bench_client(cp)
        try:
            populate(client, spec.workload, schedulers.pod_flavour(spec.scheduler),
                     spec.nodes, spec.init_pods)
            yield cp, client, Path(tmp)
        finally:
            client.close()


def _measured_body(spec: RunSpec, i: int) -> dict[str, Any]:
    return pod_body(measured_pod_name(i), spec.workload,
                    scheduler=schedulers.pod_flavour(spec.scheduler), index=i)


def _warm_up_body(spec: RunSpec) -> dict[str, Any]:
    return pod_body(WARM_UP, spec.workload, scheduler=schedulers.pod_flavour(spec.scheduler))


def _safe_scrape(sched: schedulers.Running, result: RunResult) -> str:
    if sched.metrics_url is None:
        return ""
    try:
        return scrape.fetch_metrics(sched.metrics_url)
    except OSError as exc:
        result.fail(f"metrics scrape failed: {exc}")
        return ""


def _finish(result: RunResult, spec: RunSpec, client: KubeClient, sched: schedulers.Running,
            before: str, names: list[str]) -> None:
    """Peak RSS, metrics after the window, placement checks."""
    after = _safe_scrape(sched, result)
    if before and after:
        result.metrics = scrape.window_means_ms(before, after, _metrics_family(sched.name))
    result.figures["peak_rss_mb"] = round(scrape.peak_rss_mb(sched.pid), 1) \
        if sched.alive() else None
    if not sched.alive():
        result.fail(f"{sched.name} exited during the run:\n{sched.log_tail()}")
    nodes = list(list_all(client, "/api/v1/nodes"))
    pods = list(list_all(client, PODS_PATH))
    checks = placement.check_placements(spec.workload, nodes, pods, names,
                                        constraints=not schedulers.is_null(spec.scheduler))
    result.checks = {k: c.to_json() for k, c in checks.items()}
    for name, check in checks.items():
        if not check.held:
            result.fail(f"check {name}: {check.detail}; {check.problems[:3]}")


def _metrics_family(name: str) -> str:
    return schedulers.KUBE_SCHEDULER if schedulers.is_kube_scheduler(name) else name


def capacity_run(spec: RunSpec) -> RunResult:
    result = RunResult(spec=vars(spec).copy())
    names = [measured_pod_name(i) for i in range(spec.pods)]
    with _fresh_cluster(spec) as (cp, client, workdir):
        each(lambda i: client.request("POST", PODS_PATH, body=_measured_body(spec, i)),
             range(spec.pods))
        client.request("POST", PODS_PATH, body=_warm_up_body(spec))
        wanted = set(names)
        seen = 0
        cpu: CpuMarks | None = None

        def on_bound(name: str, _at: float) -> None:
            nonlocal seen
            if name in wanted:
                seen += 1
            if cpu is None:  # cannot happen: nothing binds before the scheduler exists
                return
            if name == WARM_UP:
                cpu.mark("warm")
            elif name in wanted and seen == len(wanted):
                cpu.mark("last")

        watch = BindWatch(client, on_bound)
        t_start = time.monotonic()
        sched = schedulers.start(spec.scheduler, cp, workdir, qps=spec.qps, burst=spec.burst,
                                 policies=spec.workload == "PolicyMix")
        cpu = CpuMarks({"scheduler": sched.pid, "apiserver": _apiserver_pid(cp)})
        result.scheduler_config = sched.config
        try:
            if not watch.wait_for([WARM_UP], SYNC_TIMEOUT, sched.alive):
                result.fail(f"warm-up pod not bound within {SYNC_TIMEOUT:.0f}s:\n"
                            f"{sched.log_tail()}")
                return result
            cpu.mark("warm")  # already set by the watch thread unless it raced us
            before = _safe_scrape(sched, result)
            if not watch.wait_for(names, spec.timeout, sched.alive):
                result.fail(f"{sum(n in watch.bound for n in names)}/{len(names)} bound "
                            f"within {spec.timeout:.0f}s")
            cpu.mark("last")
            t_warm = watch.bound[WARM_UP]
            after_warm = [watch.bound[n] for n in names if watch.bound.get(n, 0) > t_warm]
            window = (max(after_warm) - t_warm) if after_warm else 0.0
            counted = len(after_warm)
            result.figures.update({
                "synced_s": round(t_warm - t_start, 2),
                "bound": sum(n in watch.bound for n in names),
                "bound_before_warm_up": sum(n in watch.bound for n in names) - counted,
                "window_s": round(window, 2),
                "pods_per_s": round(counted / window, 1) if window > 0 else 0.0,
                **_cpu_figures(cpu, "warm", "last", counted),
            })
            _finish(result, spec, client, sched, before, names)
        finally:
            watch.stop()
            sched.stop()
    return result


def _cpu_figures(cpu: CpuMarks, first: str, last: str, pods: int) -> dict[str, Any]:
    """The scheduler's and the API server's CPU between two marks, and each per pod,
    the same for every mode."""
    sched_cpu = cpu.between("scheduler", first, last)
    api_cpu = cpu.between("apiserver", first, last)
    return {"cpu_s": round(sched_cpu, 2),
            "cpu_ms_per_pod": round(sched_cpu * 1000 / pods, 3) if pods else None,
            "apiserver_cpu_s": round(api_cpu, 2),
            "apiserver_cpu_ms_per_pod": round(api_cpu * 1000 / pods, 3) if pods else None}


def rate_run(spec: RunSpec) -> RunResult:
    assert spec.rate is not None
    result = RunResult(spec=vars(spec).copy())
    names = [measured_pod_name(i) for i in range(spec.pods)]
    with _fresh_cluster(spec) as (cp, client, workdir):
        watch = BindWatch(client)
        t_start = time.monotonic()
        sched = schedulers.start(spec.scheduler, cp, workdir, qps=spec.qps, burst=spec.burst,
                                 policies=spec.workload == "PolicyMix")
        cpu = CpuMarks({"scheduler": sched.pid, "apiserver": _apiserver_pid(cp)})
        result.scheduler_config = sched.config
        try:
            client.request("POST", PODS_PATH, body=_warm_up_body(spec))
            if not watch.wait_for([WARM_UP], SYNC_TIMEOUT, sched.alive):
                result.fail(f"warm-up pod not bound within {SYNC_TIMEOUT:.0f}s:\n"
                            f"{sched.log_tail()}")
                return result
            result.figures["synced_s"] = round(watch.bound[WARM_UP] - t_start, 2)
            before = _safe_scrape(sched, result)
            cpu.mark("start")
            created = _create_paced(client, spec, spec.rate)
            if not watch.wait_for(names, spec.timeout, sched.alive):
                result.fail(f"{sum(n in watch.bound for n in names)}/{len(names)} bound "
                            f"within {spec.timeout:.0f}s")
            cpu.mark("end")
            outcome = pacing.rate_outcome(created, watch.bound, spec.rate, watch.added)
            from_post = pacing.rate_outcome(created, watch.bound)
            bound = sum(n in watch.bound for n in names)
            result.figures.update(vars(outcome))
            result.figures.update({"p50_from_post_ms": from_post.p50_ms,
                                   "p99_from_post_ms": from_post.p99_ms})
            result.figures.update(_cpu_figures(cpu, "start", "end", bound))
            _finish(result, spec, client, sched, before, names)
        finally:
            watch.stop()
            sched.stop()
    return result


def _create_paced(client: KubeClient, spec: RunSpec, rate: float) -> dict[str, float]:
    """Create the measured pods on schedule; returns when each POST was sent."""
    due = pacing.due_times(rate, spec.pods, time.monotonic() + 0.5)
    sent: dict[str, float] = {}

    def creator(thread: int) -> None:
        for i in pacing.creator_share(spec.pods, spec.creator_threads, thread):
            delay = due[i] - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            sent[measured_pod_name(i)] = time.monotonic()
            client.request("POST", PODS_PATH, body=_measured_body(spec, i))

    each(creator, range(spec.creator_threads), threads=spec.creator_threads)
    return sent


RUNNERS: dict[str, Callable[[RunSpec], RunResult]] = {
    "capacity": capacity_run, "rate": rate_run}
