"""Preemption with kube-scheduler and policyd on the same fresh local API server.

One run = one scheduler on a fresh control plane (bench/e2e's: etcd, kube-apiserver,
no controller manager): `nodes` full nodes (bench/preemption/shapes.py), the
scheduler started and warm (a warm-up pod that needs no room bound), then `singles`
preemptors one after another (each created once the previous one is bound), then a
burst of `burst` preemptors created at once. Each preemptor needs exactly one victim
deleted before it binds, so a preemptor's time runs from its POST to its bind (two
scheduling cycles, the dry runs, the victim's deletion, the bind), and the
scheduler's CPU (from /proc, read in the watch thread at the bind) over the same span,
per preemptor. Victims have terminationGracePeriodSeconds 0 and no kubelet runs: the
API server deletes them at once.

Ends with checks: every preemptor bound, no node holds more cpu than it has (4); and
counts the victims beyond one per preemptor (`extra_victims`).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.e2e import schedulers
from bench.e2e.cluster import PODS_PATH, BindWatch, bench_client, each, list_all
from bench.e2e.modes import CpuMarks
from bench.e2e.shapes import NAMESPACE, WARM_UP, node_name, pod_body, priority_class_body
from bench.preemption.shapes import (
    FILLERS_PER_NODE,
    filler_body,
    for_api,
    node_body,
    preemptor_body,
    priority_class_bodies,
)
from policyd.devcluster import ControlPlane

SYNC_TIMEOUT = 300.0
SETTLE_S = 2.0  # after the warm-up bind: the scheduler's start-up work is done
DEFAULT_SCHEDULERS = (schedulers.KUBE_SCHEDULER, schedulers.POLICYD)  # contention profiling off


def _warm_up(scheduler: str) -> dict[str, Any]:
    """The e2e bench's warm-up pod without requests: every node is full."""
    body = pod_body(WARM_UP, "SchedulingBasic", scheduler=schedulers.pod_flavour(scheduler))
    body["spec"]["containers"][0].pop("resources", None)
    return body


def _apiserver_pid(cp: ControlPlane) -> int:
    return next(p.pid for p in cp.processes if p.name == "kube-apiserver")


def run(scheduler: str, nodes: int, shape: str, singles: int, burst: int, *,
        qps: float, client_burst: int, timeout: float) -> dict[str, Any]:
    out: dict[str, Any] = {"bench": "side-by-side", "scheduler": scheduler, "nodes": nodes,
                           "shape": shape, "singles": singles, "burst": burst,
                           "failures": []}
    single_names = [f"single-{k}" for k in range(singles)]
    burst_names = [f"burst-{k}" for k in range(burst)]
    with (tempfile.TemporaryDirectory(prefix="policyd-preemption-bench-") as tmp,
          ControlPlane(controller_manager=False) as cp):
        client = bench_client(cp)
        try:
            client.request("POST", "/api/v1/namespaces", body={
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
            for body in [priority_class_body(), *priority_class_bodies()]:
                client.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                               body=body)
            each(lambda i: client.request("POST", "/api/v1/nodes", body=node_body(i)),
                 range(nodes))
            each(lambda i: client.request("POST", PODS_PATH, body=for_api(
                filler_body(i, node_name(i % nodes), shape))),
                range(nodes * FILLERS_PER_NODE))
            cpu: CpuMarks | None = None
            burst_left = set(burst_names)

            def on_bound(name: str, _at: float) -> None:
                if cpu is None:
                    return
                cpu.mark(f"bound:{name}")
                burst_left.discard(name)
                if name.startswith("burst-") and not burst_left:
                    cpu.mark("burst-end")

            watch = BindWatch(client, on_bound)
            sched = schedulers.start(scheduler, cp, Path(tmp), qps=qps, burst=client_burst,
                                     policies=False)
            cpu = CpuMarks({"scheduler": sched.pid, "apiserver": _apiserver_pid(cp)})
            out["scheduler_config"] = sched.config
            try:
                client.request("POST", PODS_PATH, body=_warm_up(scheduler))
                if not watch.wait_for([WARM_UP], SYNC_TIMEOUT, sched.alive):
                    out["failures"].append(f"warm-up not bound:\n{sched.log_tail()}")
                    return out
                time.sleep(SETTLE_S)
                single_cpu, single_wall = [], []
                for k, name in enumerate(single_names):
                    cpu.mark(f"start:{k}")
                    t0 = time.monotonic()
                    client.request("POST", PODS_PATH, body=for_api(preemptor_body(name, shape)))
                    if not watch.wait_for([name], timeout, sched.alive):
                        out["failures"].append(f"{name} not bound within {timeout:.0f}s")
                        return out
                    cpu.mark(f"bound:{name}")  # unless the watch thread got there first
                    single_cpu.append(cpu.between("scheduler", f"start:{k}", f"bound:{name}"))
                    single_wall.append(watch.bound[name] - t0)
                cpu.mark("burst-start")
                t0 = time.monotonic()
                each(lambda n: client.request("POST", PODS_PATH, body=for_api(
                    preemptor_body(n, shape))), burst_names)
                if not watch.wait_for(burst_names, timeout, sched.alive):
                    bound = sum(n in watch.bound for n in burst_names)
                    out["failures"].append(f"burst: {bound}/{burst} bound within "
                                           f"{timeout:.0f}s")
                    return out
                cpu.mark("burst-end")  # unless the watch thread got there first
                burst_cpu = cpu.between("scheduler", "burst-start", "burst-end")
                burst_wall = max(watch.bound[n] for n in burst_names) - t0
                out.update({
                    "single_cpu_ms_median": _ms(statistics.median(single_cpu)),
                    "single_cpu_ms": [_ms(c) for c in single_cpu],
                    "single_wall_ms_median": _ms(statistics.median(single_wall)),
                    "burst_cpu_s": round(burst_cpu, 3),
                    "burst_cpu_ms_per_preemptor": _ms(burst_cpu / burst),
                    "burst_wall_s": round(burst_wall, 3),
                    "burst_apiserver_cpu_s": round(
                        cpu.between("apiserver", "burst-start", "burst-end"), 3),
                })
                problems, out["extra_victims"] = _checks(client, nodes, singles + burst)
                out["failures"] += problems
                if problems or out["extra_victims"]:
                    out["log_tail"] = _decisions(sched.log_tail(400_000))
            finally:
                watch.stop()
                sched.stop()
        finally:
            client.close()
    return out


def _decisions(log: str) -> str:
    """The log lines that say who preempted and bound what, for a failed check."""
    keep = [line for line in log.splitlines() if "preempt" in line or "bound " in line]
    return "\n".join(keep)[-50_000:]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def _checks(client: Any, nodes: int, preemptors: int) -> tuple[list[str], int]:
    """Every node within its 4 cpu (else a failure), and how many fillers went beyond
    one per preemptor. Extra victims are a figure, not a failure: a preemptor retried
    while a peer of equal priority is nominated to its node and that peer's victim is
    not yet terminating preempts again, in kube-scheduler's logic as in policyd's; how
    often depends on timing."""
    problems = []
    pods = list(list_all(client, PODS_PATH))
    cpu: dict[str, float] = {}
    fillers = 0
    for p in pods:
        if (p.get("metadata") or {}).get("deletionTimestamp"):
            continue
        node = (p.get("spec") or {}).get("nodeName")
        if not node:
            continue
        fillers += p["metadata"]["name"].startswith("filler-")
        for c in p["spec"]["containers"]:
            req = ((c.get("resources") or {}).get("requests") or {}).get("cpu", "0")
            cpu[node] = cpu.get(node, 0.0) + (float(req[:-1]) / 1000 if req.endswith("m")
                                              else float(req))
    over = [n for n, used in cpu.items() if used > 4]
    if over:
        problems.append(f"nodes over their 4 cpu: {over[:5]}")
    gone = nodes * FILLERS_PER_NODE - fillers
    if gone < preemptors:
        problems.append(f"{gone} fillers gone for {preemptors} bound preemptors")
    return problems, max(0, gone - preemptors)
