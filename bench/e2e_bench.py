"""End-to-end benchmark: policyd (`policyd run`) and kube-scheduler side by side on the
local control plane, same nodes, same pods, same client QPS and burst.

    .venv/bin/python -m bench.e2e_bench                       # SchedulingBasic 5000/10000
    .venv/bin/python -m bench.e2e_bench --nodes 500 --pods 1000 --workloads \\
        SchedulingBasic,TopologySpreading,PodAntiAffinity,PolicyMix

For every workload and scheduler a fresh control plane (etcd + kube-apiserver v1.36,
built by the project) gets the nodes and the bound init pods; then the scheduler starts
(kube-scheduler built from the same Kubernetes version, or `policyd run` as a
subprocess), one warm-up pod proves its caches are synced, and the measured pods are
created by a pool of client threads while a watch records when each one is bound.

Measured the same way for both: throughput (measured pods / seconds from the first
pod's creation to the last bind), p50/p99 latency from creation (the POST) to bound
(seen on the watch), the scheduler process's CPU seconds while the measured pods were
placed, and its peak RSS (VmHWM). kube-scheduler samples nodes above 100
(percentageOfNodesToScore, adaptive by default: 10% of 5000); policyd scores every
node. The table is printed as markdown and JSON (`--json PATH` writes the JSON).

The shapes follow scheduler_perf (`bench.engine_bench`): 4 cpu / 32Gi / 110-pod nodes
in three zones, pods requesting 100m / 500Mi; TopologySpreading adds a zone constraint
(maxSkew 5), PodAntiAffinity a required hostname anti-affinity on every pod (init pods
included), PolicyMix the example policies with 30% of pods asking for hardware encryption
(for kube-scheduler, the same pods carry the equivalent nodeSelector instead).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from policyd.devcluster import ControlPlane
from policyd.devcluster.assets import K8S_VERSION
from policyd.kube.client import ApiError, ConnectionSettings, KubeClient

WORKLOADS = ("SchedulingBasic", "TopologySpreading", "PodAntiAffinity", "PolicyMix")
POLICIES = Path(__file__).resolve().parent.parent / "policies"
HW_ENCRYPT_LABEL = "node.kubernetes.io/hw-encrypt"
SCHEDULERS = ("kube-scheduler", "policyd")
SCHEDULER_NAME = "bench-scheduler"
NAMESPACE = "bench"
ZONES = ("zone-1", "zone-2", "zone-3")
CLIENT_THREADS = 16


def node_body(i: int) -> dict[str, Any]:
    resources = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    name = f"node-{i}"
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {
                "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": ZONES[i % 3],
                # A quarter of the nodes offer hardware encryption (PolicyMix).
                **({HW_ENCRYPT_LABEL: "true"} if i % 4 == 0 else {})}},
            "status": {"allocatable": resources, "capacity": resources}}


def pod_body(name: str, workload: str, node: str | None = None,
             scheduler: str = "policyd") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER_NAME, "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}
    labels = {"app": "bench"}
    if node is not None:
        spec["nodeName"] = node
    if workload == "PodAntiAffinity":
        labels = {"color": "green"}
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"color": "green"}},
             "topologyKey": "kubernetes.io/hostname"}]}}
    elif workload == "TopologySpreading" and node is None:
        spec["topologySpreadConstraints"] = [{
            "maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "bench"}}}]
    annotations: dict[str, str] = {}
    if workload == "PolicyMix" and node is None and name.startswith("pod-") \
            and int(name.rsplit("-", 1)[1]) % 10 < 3:
        # 30% of pods need hardware encryption: policyd reads the annotation through the
        # HwEncrypt example policy; kube-scheduler gets the equivalent built-in constraint.
        if scheduler == "policyd":
            annotations["myorg.io/require-hw-encrypt"] = "true"
        else:
            spec["nodeSelector"] = {HW_ENCRYPT_LABEL: "true"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels,
                         "annotations": annotations},
            "spec": spec}


@dataclass
class Result:
    workload: str
    scheduler: str
    nodes: int
    pods: int
    bound: int = 0
    throughput: float = 0.0  # pods/s
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    cpu_s: float = 0.0
    peak_rss_mb: float = 0.0
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def _each(pool: ThreadPoolExecutor, fn: Callable[[Any], Any], items: Iterable[Any]) -> None:
    list(pool.map(fn, list(items)))


def _proc_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


def _proc_peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


class BindWatch:
    """A watch on the benchmark namespace recording when each pod is first seen bound."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.bound: dict[str, float] = {}
        self._stream: Any = None
        self._stop = False
        listed = client.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")
        self._rv = listed["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop:
            try:
                self._stream = self.client.stream(
                    f"/api/v1/namespaces/{NAMESPACE}/pods",
                    query={"watch": True, "resourceVersion": self._rv,
                           "allowWatchBookmarks": True}, read_timeout=60)
                for event in self._stream.events():
                    obj = event.get("object", {})
                    rv = obj.get("metadata", {}).get("resourceVersion")
                    if rv:
                        self._rv = rv
                    if event.get("type") in ("ADDED", "MODIFIED") and \
                            obj.get("spec", {}).get("nodeName"):
                        self.bound.setdefault(obj["metadata"]["name"], time.monotonic())
            except ApiError:
                if self._stop:
                    return
                time.sleep(0.2)

    def stop(self) -> None:
        self._stop = True
        if self._stream is not None:
            self._stream.close()


class Scheduler:
    """The scheduler under test: its pid, how to stop it."""

    def __init__(self, pid: int, stop: Callable[[], None]) -> None:
        self.pid = pid
        self.stop = stop


def start_kube_scheduler(cp: ControlPlane, workdir: Path, qps: float, burst: int
                         ) -> Scheduler:
    config = workdir / "kube-scheduler.json"
    config.write_text(json.dumps({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"qps": qps, "burst": burst},
        "profiles": [{"schedulerName": SCHEDULER_NAME}]}))
    ks = cp.start_kube_scheduler(config)
    return Scheduler(ks.pid, ks.stop)


def start_policyd(cp: ControlPlane, workdir: Path, qps: float, burst: int,
                  policies: bool = False) -> Scheduler:
    profile = workdir / "policyd.yaml"
    profile.write_text(
        "apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
        "leaderElection:\n  leaderElect: false\n"
        + (f"policies:\n- {POLICIES}\n" if policies else "")
        + f"profiles:\n- schedulerName: {SCHEDULER_NAME}\n")
    log = (workdir / "policyd.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "policyd", "run", "--config", str(profile),
         "--kubeconfig", str(cp.kubeconfig_path), "--metrics-bind-address", "127.0.0.1:0",
         "--secure-port", "0", "--kube-api-qps", str(qps), "--kube-api-burst", str(burst)],
        stdout=log, stderr=subprocess.STDOUT)

    def stop() -> None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()

    return Scheduler(proc.pid, stop)


def run_one(workload: str, scheduler: str, nodes: int, pods: int, init_pods: int,
            qps: float, burst: int, timeout: float, backlog: bool = False) -> Result:
    result = Result(workload, scheduler, nodes, pods)
    if backlog:
        result.notes.append("backlog: pods created before the scheduler started; latency "
                            "and throughput count from its start")
    with tempfile.TemporaryDirectory(prefix="policyd-bench-") as tmp, \
            ControlPlane() as cp, ThreadPoolExecutor(CLIENT_THREADS) as pool:
        workdir = Path(tmp)
        client = KubeClient.connect(ConnectionSettings(
            kubeconfig=str(cp.kubeconfig_path), qps=1e6, burst=1_000_000, timeout=60))
        client.request("POST", "/api/v1/namespaces", body={
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        _each(pool, lambda i: client.request("POST", "/api/v1/nodes", body=node_body(i)),
              range(nodes))
        pods_path = f"/api/v1/namespaces/{NAMESPACE}/pods"
        _each(pool, lambda i: client.request("POST", pods_path, body=pod_body(
            f"init-{i}", workload, node=f"node-{i % nodes}")), range(init_pods))
        created: dict[str, float] = {}

        def create(i: int) -> None:
            name = f"pod-{i}"
            created[name] = time.monotonic()
            client.request("POST", pods_path, body=pod_body(name, workload,
                                                            scheduler=scheduler))

        names = [f"pod-{i}" for i in range(pods)]
        if backlog:
            _each(pool, create, range(pods))
        watch = BindWatch(client)
        t0 = time.monotonic()
        if scheduler == "kube-scheduler":
            sched = start_kube_scheduler(cp, workdir, qps, burst)
        else:
            sched = start_policyd(cp, workdir, qps, burst, policies=workload == "PolicyMix")
        if backlog:
            created = dict.fromkeys(names, t0)
        try:
            client.request("POST", pods_path, body=pod_body("warm-up", "SchedulingBasic"))
            deadline = time.monotonic() + 120 + (timeout if backlog else 0)
            while "warm-up" not in watch.bound:
                if time.monotonic() > deadline:
                    assert cp.workdir is not None
                    logs = sorted(workdir.glob("*.log")) + sorted(
                        cp.workdir.glob("kube-scheduler-*/kube-scheduler.log"))
                    tail = logs[0].read_text()[-3000:] if logs else ""
                    raise TimeoutError(f"{scheduler} did not bind the warm-up pod\n{tail}")
                time.sleep(0.05)
            cpu0 = 0.0 if backlog else _proc_cpu_seconds(sched.pid)
            if not backlog:
                t0 = time.monotonic()
                _each(pool, create, range(pods))
            deadline = time.monotonic() + timeout
            while sum(n in watch.bound for n in names) < pods:
                if time.monotonic() > deadline:
                    result.notes.append(f"timeout after {timeout:.0f}s")
                    break
                time.sleep(0.1)
            result.cpu_s = round(_proc_cpu_seconds(sched.pid) - cpu0, 2)
            result.peak_rss_mb = round(_proc_peak_rss_mb(sched.pid), 1)
            result.wall_s = round(time.monotonic() - t0, 2)
            watch.stop()
        finally:
            sched.stop()
            client.close()
        latencies = sorted((watch.bound[n] - created[n]) * 1000 for n in names
                           if n in watch.bound)
        result.bound = len(latencies)
        if latencies:
            last = max(watch.bound[n] for n in names if n in watch.bound)
            result.throughput = round(result.bound / (last - min(created.values())), 1)
            result.p50_ms = round(statistics.median(latencies), 1)
            result.p99_ms = round(latencies[min(len(latencies) - 1,
                                                int(len(latencies) * 0.99))], 1)
    return result


_FIGURES = (("throughput", "throughput (pods/s)", True), ("p50_ms", "p50 latency (ms)", False),
            ("p99_ms", "p99 latency (ms)", False), ("cpu_s", "scheduler CPU (s)", False),
            ("peak_rss_mb", "peak RSS (MiB)", False))


def markdown(results: list[Result]) -> str:
    """One table per workload: each figure for both schedulers and policyd/kube-scheduler."""
    out = []
    for workload in dict.fromkeys(r.workload for r in results):
        rows = {r.scheduler: r for r in results if r.workload == workload}
        k, p = rows.get("kube-scheduler"), rows.get("policyd")
        any_row = k or p
        assert any_row is not None
        out.append(f"### {workload}: {any_row.nodes} nodes, {any_row.pods} pods\n")
        out.append("| figure | kube-scheduler | policyd | policyd / kube-scheduler |")
        out.append("|---|---:|---:|---:|")
        for key, label, _ in _FIGURES:
            kv = getattr(k, key) if k else None
            pv = getattr(p, key) if p else None
            ratio = f"{pv / kv:.2f}x" if kv and pv is not None else "-"
            out.append(f"| {label} | {kv if kv is not None else '-'} | "
                       f"{pv if pv is not None else '-'} | {ratio} |")
        for r in rows.values():
            if r.bound < r.pods or r.notes:
                out.append(f"\n{r.scheduler}: {r.bound}/{r.pods} bound {' '.join(r.notes)}")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--init-pods", type=int, default=None,
                        help="bound pods created first (default: nodes / 5, as "
                             "scheduler_perf's 1000 for 5000 nodes)")
    parser.add_argument("--workloads", default="SchedulingBasic",
                        help=f"comma-separated, of {', '.join(WORKLOADS)}")
    parser.add_argument("--schedulers", default=",".join(SCHEDULERS))
    parser.add_argument("--qps", type=float, default=5000.0,
                        help="client QPS of both schedulers (clientConnection.qps)")
    parser.add_argument("--burst", type=int, default=5000)
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds the measured pods may take to be bound")
    parser.add_argument("--backlog", action="store_true",
                        help="create the measured pods before starting the scheduler: "
                             "its capacity, not the rate pods arrive at")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    init_pods = args.init_pods if args.init_pods is not None else args.nodes // 5
    results = []
    for workload in args.workloads.split(","):
        if workload not in WORKLOADS:
            parser.error(f"unknown workload {workload!r}")
        for scheduler in args.schedulers.split(","):
            if scheduler not in SCHEDULERS:
                parser.error(f"unknown scheduler {scheduler!r}")
            pods = args.pods
            if workload == "PodAntiAffinity" and pods > args.nodes - init_pods - 1:
                # One green pod per node: more would be unschedulable.
                pods = args.nodes - init_pods - 1
            print(f"# {workload} with {scheduler}: {args.nodes} nodes, {init_pods} init pods, "
                  f"{pods} pods", file=sys.stderr, flush=True)
            results.append(run_one(workload, scheduler, args.nodes, pods, init_pods,
                                   args.qps, args.burst, args.timeout, args.backlog))
            print(f"  {asdict(results[-1])}", file=sys.stderr, flush=True)
    machine = (f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
               f"{platform.python_version()}, Kubernetes {K8S_VERSION}")
    print(f"Machine: {machine}; qps/burst {args.qps:g}/{args.burst}\n")
    print(markdown(results))
    doc = {"machine": machine, "qps": args.qps, "burst": args.burst,
           "results": [asdict(r) for r in results]}
    text = json.dumps(doc, indent=2)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
