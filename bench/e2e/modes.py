"""One run of one mode with one scheduler, on a fresh control plane.

Capacity: the measured pods (and the warm-up pod, whose PriorityClass puts it first in
both schedulers' queues) are created before the scheduler starts. The window runs from
the warm-up pod's bind (caches synced, first pod scheduled) to the moment the last
measured pod is bound AND, for a scheduler that posts events (kube-scheduler, policyd,
null-events), the last measured pod's Scheduled event has been seen on the benchmark's
event watch: work a scheduler defers past its last bind (posting events) is inside the
window. The null scheduler posts no events: its window ends at its last bind. Only pods
bound after the warm-up pod count in the rate; the scheduler's CPU time (and, for
policyd, each thread's) is read in the watch threads at those moments. Beside it:
start to done (the scheduler's process start to the same end, start-up, list and
cache sync included) and the same window ending at the last bind (the earlier protocol's
figure, for comparison).

Rate: the scheduler is started and warm (its warm-up pod bound) first; then pods are
created on a fixed schedule (pod i at t0 + i / rate) by a few creator threads, each
creation time recorded as its POST is sent (the achieved arrival rate). Bind latency
runs from the pod's first appearance on the benchmark's watch to its bind on the same
watch (from the POST too, in the JSON: that adds how long the API server queued it).

Pinned (`RunSpec.pinned`): the scheduler runs on SCHEDULER_CPUS only, etcd, the API
server and the benchmark's own process on CONTROL_PLANE_CPUS, so the scheduler's figure
is what one core gives it, whoever else is busy.

Every run ends with the placement checks over the listed nodes and pods, the placement
quality replay (bench/e2e/quality.py) and the scheduler's metrics scraped before and
after the window.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.e2e import pacing, placement, quality, schedulers, scrape, threads
from bench.e2e.cluster import (
    CLAIMS_PATH,
    PODS_PATH,
    BindWatch,
    ScheduledEventWatch,
    bench_client,
    each,
    list_all,
    populate,
)
from bench.e2e.shapes import DYNAMIC_RESOURCES, WARM_UP, measured_pod_name, pod_body
from policyd.devcluster import ControlPlane
from policyd.kube.client import KubeClient

CREATOR_THREADS = 8
# How long a scheduler may take from its start to binding the warm-up pod (caches
# synced): generous, a 15,000-node list on a busy 2-core machine takes a while.
SYNC_TIMEOUT = 300.0
# The pinned mode's cores: the scheduler alone on one, everything else on the other.
SCHEDULER_CPUS = frozenset({0})
CONTROL_PLANE_CPUS = frozenset({1})


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
    pinned: bool = False


@dataclass
class RunResult:
    spec: dict[str, Any]
    failed: bool = False
    failures: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    checks: dict[str, Any] = field(default_factory=dict)
    # The placement quality replay; for the null schedulers it is recorded, not a
    # check (they ignore scores by design; their rate is the API server's ceiling).
    quality: dict[str, Any] | None = None
    # policyd's CPU seconds per thread group over the window (bench/e2e/threads.py).
    cpu_split: dict[str, float] | None = None
    scheduler_config: dict[str, Any] = field(default_factory=dict)

    def fail(self, why: str) -> None:
        self.failed = True
        self.failures.append(why)


class CpuMarks:
    """The scheduler's (and the API server's) CPU seconds read at named moments, from
    whichever thread sees the moment happen; with `threads_of`, that process's
    per-thread CPU too."""

    def __init__(self, pids: dict[str, int], threads_of: int | None = None) -> None:
        self.pids = pids
        self.threads_of = threads_of
        self.marks: dict[str, dict[str, float]] = {}
        self.at: dict[str, float] = {}
        self.thread_marks: dict[str, dict[int, tuple[str, float]]] = {}
        self._lock = threading.Lock()

    def mark(self, moment: str) -> None:
        with self._lock:
            if moment in self.marks:
                return
            self.marks[moment] = {who: _cpu_or_nan(pid) for who, pid in self.pids.items()}
            self.at[moment] = time.monotonic()
            if self.threads_of is not None:
                self.thread_marks[moment] = threads.thread_cpu(self.threads_of)

    def split(self, start: str, end: str) -> dict[str, float] | None:
        if start not in self.thread_marks or end not in self.thread_marks:
            return None
        return threads.split(self.thread_marks[start], self.thread_marks[end])

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
def _own_cpus(cpus: frozenset[int] | None) -> Iterator[None]:
    """Every thread of this process on `cpus` for the block (None: unchanged); threads
    started inside it inherit the mask of the thread that starts them."""
    if cpus is None:
        yield
        return
    tids = [int(t) for t in os.listdir("/proc/self/task")]
    before = {tid: os.sched_getaffinity(tid) for tid in tids}
    for tid in tids:
        os.sched_setaffinity(tid, cpus)
    try:
        yield
    finally:
        for tid, mask in before.items():
            with suppress(OSError):  # that thread has ended
                os.sched_setaffinity(tid, mask)
        for tid in (int(t) for t in os.listdir("/proc/self/task")):
            if tid not in before:
                with suppress(OSError):
                    os.sched_setaffinity(tid, os.sched_getaffinity(0))


def scheduler_cpus(spec: RunSpec) -> frozenset[int] | None:
    return SCHEDULER_CPUS if spec.pinned else None


@contextmanager
def _fresh_cluster(spec: RunSpec) -> Iterator[tuple[ControlPlane, KubeClient, Path]]:
    # No kube-controller-manager: the workloads have no volumes, DynamicResources' claims
    # are created by the benchmark (not from templates), and its watches would load the
    # API server the schedulers are measured against (and change the figures).
    control = CONTROL_PLANE_CPUS if spec.pinned else None
    with (_own_cpus(control),
          tempfile.TemporaryDirectory(prefix="policyd-bench-") as tmp,
          ControlPlane(controller_manager=False, cpus=control) as cp):
        client = bench_client(cp)
        try:
            populate(client, spec.workload, schedulers.pod_flavour(spec.scheduler),
                     spec.nodes, spec.init_pods, measured=spec.pods)
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
            before: str, names: list[str], bound_at: dict[str, float] | None = None) -> None:
    """Peak RSS, metrics after the window, placement checks and, given when each pod
    was seen bound, the placement quality replay."""
    after = _safe_scrape(sched, result)
    if before and after:
        result.metrics = scrape.window_means_ms(before, after, _metrics_family(sched.name))
    result.figures["peak_rss_mb"] = round(scrape.peak_rss_mb(sched.pid), 1) \
        if sched.alive() else None
    if not sched.alive():
        result.fail(f"{sched.name} exited during the run:\n{sched.log_tail()}")
    nodes = list(list_all(client, "/api/v1/nodes"))
    pods = list(list_all(client, PODS_PATH))
    claims = (list(list_all(client, CLAIMS_PATH)) if spec.workload == DYNAMIC_RESOURCES
              else None)
    checks = placement.check_placements(spec.workload, nodes, pods, names,
                                        constraints=not schedulers.is_null(spec.scheduler),
                                        claims=claims)
    result.checks = {k: c.to_json() for k, c in checks.items()}
    for name, check in checks.items():
        if not check.held:
            result.fail(f"check {name}: {check.detail}; {check.problems[:3]}")
    if bound_at is not None and spec.workload in quality.QUALITY_WORKLOADS:
        order = sorted((n for n in names if n in bound_at), key=bound_at.__getitem__)
        replay = quality.placement_quality(nodes, pods, order)
        result.quality = replay.to_json()
        if not schedulers.is_null(spec.scheduler):
            result.checks["placement_quality"] = {
                "held": replay.held, "detail": replay.detail, "problems": [],
                "problem_count": 0 if replay.held else 1}
            if not replay.held:
                result.fail(f"check placement_quality: {replay.detail}")


def _metrics_family(name: str) -> str:
    return schedulers.KUBE_SCHEDULER if schedulers.is_kube_scheduler(name) else name


def capacity_run(spec: RunSpec) -> RunResult:
    result = RunResult(spec=vars(spec).copy())
    names = [measured_pod_name(i) for i in range(spec.pods)]
    posts_events = schedulers.posts_events(spec.scheduler)
    with _fresh_cluster(spec) as (cp, client, workdir):
        each(lambda i: client.request("POST", PODS_PATH, body=_measured_body(spec, i)),
             range(spec.pods))
        client.request("POST", PODS_PATH, body=_warm_up_body(spec))
        wanted = set(names)
        binds = events = 0
        count_lock = threading.Lock()
        cpu: CpuMarks | None = None

        def done_if_complete() -> None:
            # Called with count_lock held, after either count moved.
            if cpu is None:  # cannot happen: nothing binds before the scheduler exists
                return
            if binds == len(wanted):
                cpu.mark("last_bind")
                if events == len(wanted) or not posts_events:
                    cpu.mark("done")

        def on_bound(name: str, _at: float) -> None:
            nonlocal binds
            with count_lock:
                if name == WARM_UP and cpu is not None:
                    cpu.mark("warm")
                elif name in wanted:
                    binds += 1
                    done_if_complete()

        def on_event(name: str, _at: float) -> None:
            nonlocal events
            with count_lock:
                if name in wanted:
                    events += 1
                    done_if_complete()

        watch = BindWatch(client, on_bound)
        event_watch = ScheduledEventWatch(client, on_event) if posts_events else None
        t_start = time.monotonic()
        sched = schedulers.start(spec.scheduler, cp, workdir, qps=spec.qps, burst=spec.burst,
                                 policies=spec.workload == "PolicyMix",
                                 cpus=scheduler_cpus(spec))
        cpu = CpuMarks({"scheduler": sched.pid, "apiserver": _apiserver_pid(cp)},
                       threads_of=sched.pid if spec.scheduler == schedulers.POLICYD else None)
        cpu.mark("start")
        result.scheduler_config = sched.config
        result.figures.update(_affinities(sched.pid, _apiserver_pid(cp)))
        try:
            if not watch.wait_for([WARM_UP], SYNC_TIMEOUT, sched.alive):
                result.fail(f"warm-up pod not bound within {SYNC_TIMEOUT:.0f}s:\n"
                            f"{sched.log_tail()}")
                return result
            cpu.mark("warm")  # already set by the watch thread unless it raced us
            before = _safe_scrape(sched, result)
            deadline = time.monotonic() + spec.timeout
            if not watch.wait_for(names, spec.timeout, sched.alive):
                result.fail(f"{sum(n in watch.bound for n in names)}/{len(names)} bound "
                            f"within {spec.timeout:.0f}s")
            if event_watch is not None and not event_watch.wait_for(
                    names, max(1.0, deadline - time.monotonic()), sched.alive):
                result.fail(f"{sum(n in event_watch.bound for n in names)}/{len(names)} "
                            f"Scheduled events seen within {spec.timeout:.0f}s")
            cpu.mark("last_bind")
            cpu.mark("done")
            t_warm = watch.bound[WARM_UP]
            after_warm = [watch.bound[n] for n in names if watch.bound.get(n, 0) > t_warm]
            counted = len(after_warm)
            t_last_bind = max(after_warm) if after_warm else t_warm
            seen = [event_watch.bound[n] for n in names if n in event_watch.bound] \
                if event_watch is not None else []
            t_done = max([t_last_bind, *seen])
            window = t_done - t_warm
            to_last_bind = t_last_bind - t_warm
            from_start = t_done - t_start
            bound = sum(n in watch.bound for n in names)
            result.figures.update({
                "synced_s": round(t_warm - t_start, 2),
                "bound": bound,
                "bound_before_warm_up": bound - counted,
                "scheduled_events_seen": len(seen) if event_watch is not None else None,
                "window_s": round(window, 2),
                "pods_per_s": round(counted / window, 1) if window > 0 else 0.0,
                # The earlier protocol's window, ending at the last bind.
                "window_to_last_bind_s": round(to_last_bind, 2),
                "pods_per_s_to_last_bind":
                    round(counted / to_last_bind, 1) if to_last_bind > 0 else 0.0,
                "events_after_last_bind_s": round(t_done - t_last_bind, 2),
                # From the scheduler's process start: start-up and cache sync included.
                "start_to_last_bind_s": round(t_last_bind - t_start, 2),
                "start_to_done_s": round(from_start, 2),
                "pods_per_s_from_start": round(bound / from_start, 1) if from_start > 0 else 0.0,
                "cpu_from_start_ms_per_pod": round(
                    cpu.between("scheduler", "start", "done") * 1000 / bound, 3)
                if bound else None,
                **_cpu_figures(cpu, "warm", "done", counted),
            })
            result.cpu_split = cpu.split("warm", "done")
            _finish(result, spec, client, sched, before, names, watch.bound)
        finally:
            watch.stop()
            if event_watch is not None:
                event_watch.stop()
            sched.stop()
    return result


def _affinities(scheduler: int, apiserver: int) -> dict[str, list[int] | None]:
    """The CPUs each process may run on, as read back: what the pinned mode asked for
    is on the record, not assumed."""
    out: dict[str, list[int] | None] = {}
    for who, pid in (("scheduler_cpus", scheduler), ("apiserver_cpus", apiserver)):
        try:
            out[who] = sorted(os.sched_getaffinity(pid))
        except OSError:
            out[who] = None
    return out


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
                                 policies=spec.workload == "PolicyMix",
                                 cpus=scheduler_cpus(spec))
        cpu = CpuMarks({"scheduler": sched.pid, "apiserver": _apiserver_pid(cp)})
        result.scheduler_config = sched.config
        result.figures.update(_affinities(sched.pid, _apiserver_pid(cp)))
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
