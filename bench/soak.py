"""Chaos soak: two leader-elected `policyd run` replicas schedule a steady stream of
pods on the real local control plane while faults hit them, then invariants are read
from the API server (never from policyd's logs).

    .venv/bin/python -m bench.soak                  # full size: 10,000 pods
    .venv/bin/python -m bench.soak --size ci        # the CI size (tests/e2e/test_soak.py)
    .venv/bin/python -m bench.soak --pods 2000 --apiserver-restarts 2 --json out.json

Set-up: etcd + kube-apiserver on loopback with an audit policy that records binding
creates and writes of the Lease; Nodes created with status.allocatable (no kubelets);
each replica process runs as its own ServiceAccount (a TokenRequest token, so the audit
log names who posted each binding) through its own `FaultProxy`.

Pods (all `schedulerName: soak-scheduler`): mixed cpu/memory shapes; some that fit
nowhere (1000 cpus); some under the example policies (hardware encryption, env=prod; the
memory-headroom policy applies to every pod); required hostname anti-affinity within
groups of 8; a zone spread with maxSkew 1; an extended resource; host ports.

Faults, spread over the stream: proxy cuts and freezes (both replicas at once), a share
of bind and other requests answered with 429/500/503 or a swallowed response, `kill -9`
of the lease holder (a new replica with a new identity replaces it), kube-apiserver
killed with SIGKILL and restarted, the first restart after an etcd compaction (every
watch resumes from a compacted resourceVersion: 410 Gone), and a stale takeover: the
standby's open connections go silent (new ones work, so it can win the Lease) and the
leader is killed.

Invariants, after a settle period: every pod that fits is bound; no node holds more than
its allocatable (cpu, memory, pods, extended resource, host ports); every pod that fits
nowhere has PodScheduled=False/Unschedulable and a FailedScheduling event; no placement
breaks its spread, anti-affinity or policy filter; every successful binding create was
posted by the replica whose Lease write came last (audit log); no replica crashed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from policyd.devcluster import ControlPlane
from policyd.devcluster.assets import K8S_VERSION
from policyd.devcluster.faultproxy import FaultProxy
from policyd.devcluster.kubeconfig import kubeconfig_dict, write_kubeconfig
from policyd.devcluster.process import ManagedProcess
from policyd.kube.client import ApiError, ConnectionSettings, KubeClient

REPO = Path(__file__).resolve().parent.parent
SCHEDULER = "soak-scheduler"
NAMESPACE = "soak"
LEASE = "soak-scheduler"
LEASE_NS = "kube-system"
# What a replica logs once it runs (daemon.run.Daemon.start), at any verbosity.
STARTED_LINE = " starting: profiles "
ZONES = ("zone-1", "zone-2", "zone-3")
GPU = "example.com/gpu"
HW_LABEL = "node.kubernetes.io/hw-encrypt"
NODE_CPU_M, NODE_MEM_MI, NODE_PODS, NODE_GPUS = 16_000, 64 * 1024, 110, 8
ANTI_GROUP = 8
HOST_PORTS = 50
SPREAD_SKEW = 1
HEADROOM = 0.9  # policies/memory-headroom.yaml keeps 10% of memory free
# Shares of pod kinds (the rest are plain pods).
KINDS = (("huge", 0.02), ("hw", 0.10), ("prod", 0.10), ("spread", 0.05), ("anti", 0.05),
         ("gpu", 0.02), ("hostport", 0.05))

Obj = dict[str, Any]


@dataclass
class SoakConfig:
    pods: int = 10_000
    nodes: int = 300
    rate: float = 30.0  # pods created per second
    leader_kills: int = 2
    apiserver_restarts: int = 3
    compactions: int = 1  # the first restarts come after an etcd compaction
    cuts: int = 3
    freezes: int = 2
    freeze_seconds: float = 5.0
    # The standby's open connections frozen (its watches go silent, its new requests
    # work), then the leader killed: the standby takes the lease with a stale cache.
    stale_takeovers: int = 1
    stale_seconds: float = 45.0
    bind_error_share: float = 0.05
    request_error_share: float = 0.01
    settle: float = 240.0  # seconds after the stream for the last pods to be bound
    seed: int = 13
    lease_duration: int = 6
    renew_deadline: int = 4

    @classmethod
    def ci(cls) -> SoakConfig:
        return cls(pods=300, nodes=12, rate=6.0, leader_kills=1, apiserver_restarts=1,
                   compactions=1, cuts=1, freezes=1, freeze_seconds=4.0,
                   stale_takeovers=1, stale_seconds=20.0,
                   bind_error_share=0.10, request_error_share=0.02, settle=60.0)


@dataclass
class PodSpec:
    name: str
    kind: str
    cpu_m: int
    mem_mi: int
    gpu: int = 0
    host_port: int = 0
    group: str = ""


@dataclass
class Result:
    config: Obj
    pods: int = 0
    fitting: int = 0
    bound: int = 0
    unschedulable: int = 0
    wall_s: float = 0.0
    stream_s: float = 0.0
    settle_s: float = 0.0
    bind_latency_s: dict[str, float] = field(default_factory=dict)
    """Pod creation (POST sent) to its binding create received (audit log)."""
    faults: Obj = field(default_factory=dict)
    invariants: dict[str, Obj] = field(default_factory=dict)
    replicas: list[Obj] = field(default_factory=list)
    machine: str = ""

    @property
    def held(self) -> bool:
        return all(v["held"] for v in self.invariants.values())


# -- the workload ------------------------------------------------------------------


def node_body(i: int) -> Obj:
    name = f"node-{i}"
    labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": ZONES[i % 3]}
    if i % 4 == 0:
        labels[HW_LABEL] = "true"
    if i % 5 in (0, 1):
        labels["env"] = "prod"
    alloc = {"cpu": f"{NODE_CPU_M}m", "memory": f"{NODE_MEM_MI}Mi", "pods": str(NODE_PODS)}
    if i % 4 == 1:
        alloc[GPU] = str(NODE_GPUS)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"capacity": alloc, "allocatable": alloc,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod_specs(count: int, seed: int) -> list[PodSpec]:
    rng = random.Random(seed)
    specs = []
    counts: Counter[str] = Counter()
    for i in range(count):
        r = rng.random()
        kind = "plain"
        for k, share in KINDS:
            if r < share:
                kind = k
                break
            r -= share
        spec = PodSpec(f"pod-{i}", kind, rng.choice((50, 100, 250, 500)),
                       rng.choice((64, 128, 256, 512)))
        if kind == "huge":
            spec.cpu_m = 1_000_000
        elif kind == "gpu":
            spec.gpu = 1
        elif kind == "hostport":
            spec.host_port = 8000 + counts[kind] % HOST_PORTS
        elif kind == "anti":
            spec.group = f"anti-{counts[kind] // ANTI_GROUP}"
        counts[kind] += 1
        specs.append(spec)
    return specs


def pod_body(spec: PodSpec) -> Obj:
    requests: dict[str, str] = {"cpu": f"{spec.cpu_m}m", "memory": f"{spec.mem_mi}Mi"}
    resources: Obj = {"requests": requests}
    if spec.gpu:
        requests[GPU] = str(spec.gpu)
        resources["limits"] = {GPU: str(spec.gpu)}
    container: Obj = {"name": "c", "image": "registry.k8s.io/pause:3.10",
                      "resources": resources}
    labels: dict[str, str] = {"soak-kind": spec.kind}
    annotations: dict[str, str] = {}
    pod_spec: Obj = {"schedulerName": SCHEDULER, "terminationGracePeriodSeconds": 0,
                     "containers": [container]}
    if spec.host_port:
        container["ports"] = [{"containerPort": spec.host_port, "hostPort": spec.host_port,
                               "protocol": "TCP"}]
    if spec.kind == "hw":
        annotations["myorg.io/require-hw-encrypt"] = "true"
    elif spec.kind == "prod":
        labels["env"] = "prod"
    elif spec.kind == "anti":
        labels["anti-group"] = spec.group
        pod_spec["affinity"] = {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"anti-group": spec.group}},
                "topologyKey": "kubernetes.io/hostname"}]}}
    elif spec.kind == "spread":
        pod_spec["topologySpreadConstraints"] = [{
            "maxSkew": SPREAD_SKEW, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"soak-kind": "spread"}}}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": spec.name, "namespace": NAMESPACE, "labels": labels,
                         "annotations": annotations},
            "spec": pod_spec}


def profile_text(cfg: SoakConfig) -> str:
    return "\n".join([
        "apiVersion: policyd.io/v1alpha1", "kind: PolicydConfiguration",
        f"policies: [{REPO / 'policies'}]",
        "podInitialBackoffSeconds: 1", "podMaxBackoffSeconds: 5",
        "leaderElection:", "  leaderElect: true",
        f"  leaseDuration: {cfg.lease_duration}s", f"  renewDeadline: {cfg.renew_deadline}s",
        "  retryPeriod: 1s", f"  resourceName: {LEASE}", f"  resourceNamespace: {LEASE_NS}",
        # Short call timeouts: a swallowed response must not hold a binder for 30 s.
        "clientConnection:", "  qps: 500", "  burst: 1000", "  timeout: 5s",
        "profiles:", f"- schedulerName: {SCHEDULER}", ""])


AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create]
  resources: [{group: "", resources: [pods/binding]}]
- level: Metadata
  verbs: [create, update, patch]
  resources: [{group: coordination.k8s.io, resources: [leases]}]
- level: None
"""


# -- the soak ----------------------------------------------------------------------


def _retry(fn: Any, what: str, timeout: float = 120.0) -> Any:
    """Call `fn` until it stops failing transiently (the API server may be restarting)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except ApiError as exc:
            if exc.status == 409:
                return None  # created by an earlier attempt whose reply was lost
            if not exc.transient or time.monotonic() > deadline:
                raise RuntimeError(f"{what}: {exc}") from exc
            time.sleep(0.3)


class Replica:
    """One `policyd run` process with its own ServiceAccount and fault proxy."""

    def __init__(self, name: str, proc: subprocess.Popen[bytes], log: Path, user: str,
                 slot: int) -> None:
        self.name = name
        self.proc = proc
        self.log = log
        self.user = user
        self.slot = slot
        self.killed = False


class Soak:
    def __init__(self, cfg: SoakConfig, workdir: Path, log: Any = None) -> None:
        self.cfg = cfg
        self.workdir = workdir
        self.say = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.specs = pod_specs(cfg.pods, cfg.seed)
        self.replicas: list[Replica] = []
        self.proxies: list[FaultProxy] = []
        self.faults: Counter[str] = Counter()
        self.fault_log: list[str] = []
        self.created = 0
        self.created_at: dict[str, float] = {}
        self._generation = 0
        self._stream_error: BaseException | None = None

    # set-up

    def control_plane(self) -> ControlPlane:
        """Not started yet: `with` starts it."""
        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(AUDIT_POLICY)
        self.audit_log = self.workdir / "audit.log"
        return ControlPlane(self.workdir / "cp", extra_apiserver_args=[
            f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}",
            "--audit-log-maxsize=0"])

    def setup(self, cp: ControlPlane, client: KubeClient) -> None:
        self.cp = cp
        self.client = client
        client.request("POST", "/api/v1/namespaces", body={
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        for i in range(self.cfg.nodes):
            client.request("POST", "/api/v1/nodes", body=node_body(i))
        assert cp.apiserver_port is not None and cp.certs is not None
        for slot in range(2):
            proxy = FaultProxy(cp.apiserver_port, cp.certs.serving_cert, cp.certs.serving_key,
                               cp.certs.ca_cert, seed=self.cfg.seed + slot)
            proxy.bind_error_share = self.cfg.bind_error_share
            proxy.request_error_share = self.cfg.request_error_share
            self.proxies.append(proxy)
        self.profile = self.workdir / "profile.yaml"
        self.profile.write_text(profile_text(self.cfg))

    def _token(self, sa: str) -> str:
        c = self.client
        c.request("POST", f"/api/v1/namespaces/{LEASE_NS}/serviceaccounts", body={
            "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}})
        c.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", body={
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": sa},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": LEASE_NS}]})
        tr = c.request("POST", f"/api/v1/namespaces/{LEASE_NS}/serviceaccounts/{sa}/token",
                       body={"apiVersion": "authentication.k8s.io/v1",
                             "kind": "TokenRequest", "spec": {"expirationSeconds": 86400}})
        return str(tr["status"]["token"])

    def start_replica(self, slot: int) -> Replica:
        """A new replica (new identity, new ServiceAccount) behind proxy `slot`."""
        self._generation += 1
        name = f"replica-{'ab'[slot]}{self._generation}"
        token = _retry(lambda: self._token(name), f"token for {name}")
        assert self.cp.certs is not None
        kubeconfig = write_kubeconfig(self.workdir / f"{name}.kubeconfig", kubeconfig_dict(
            f"https://127.0.0.1:{self.proxies[slot].port}",
            self.cp.certs.ca_cert.read_bytes(), token=token, user=name))
        log = self.workdir / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "policyd", "run", "--config", str(self.profile),
                 "--kubeconfig", str(kubeconfig), "--metrics-bind-address", "",
                 # Replicas share this host: no secure port (10259) for either.
                 "--secure-port", "0", "--identity", name, "-v", "1",
                 "--shutdown-grace-period", "10"],
                stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        replica = Replica(name, proc, log, f"system:serviceaccount:{LEASE_NS}:{name}", slot)
        self.replicas.append(replica)
        self.say(f"started {name} (pid {proc.pid}) behind proxy {slot}")
        return replica

    # faults

    def lease_holder(self) -> str:
        try:
            lease = self.client.request(
                "GET", f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NS}/leases/{LEASE}")
        except ApiError:
            return ""
        return str((lease.get("spec") or {}).get("holderIdentity") or "")

    def wait_for_leader(self, timeout: float = 60.0) -> Replica:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            holder = self.lease_holder()
            for r in self.replicas:
                if r.name == holder and r.proc.poll() is None:
                    return r
            time.sleep(0.2)
        raise RuntimeError("no live replica holds the lease")

    def kill_leader(self) -> None:
        leader = self.wait_for_leader()
        os.kill(leader.proc.pid, signal.SIGKILL)
        leader.proc.wait()
        leader.killed = True
        self.note("leader_kill", f"kill -9 {leader.name}")
        time.sleep(1.0)
        self.start_replica(leader.slot)

    def stale_takeover(self) -> None:
        leader = self.wait_for_leader()
        standby = next((r for r in self.replicas if r is not leader and not r.killed
                        and r.proc.poll() is None), None)
        if standby is None:
            raise RuntimeError("no standby replica to freeze")
        self.proxies[standby.slot].freeze_open(self.cfg.stale_seconds)
        self.note("stale_takeover", f"{standby.name}'s open connections frozen "
                  f"{self.cfg.stale_seconds:g}s, then the leader killed")
        time.sleep(3.0)  # the leader binds pods the standby does not hear of
        os.kill(leader.proc.pid, signal.SIGKILL)
        leader.proc.wait()
        leader.killed = True
        self.note("leader_kill", f"kill -9 {leader.name}")
        new = self.wait_for_leader()
        self.say(f"{new.name} took the lease")
        self.start_replica(leader.slot)

    def restart_apiserver(self, compact: bool) -> None:
        cp = self.cp
        if compact:
            for i in range(20):  # writes no informer watches: their RVs fall behind
                _retry(lambda i=i: self.client.request(
                    "POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps",
                    body={"metadata": {"name": f"cm-{self.faults['compaction']}-{i}"}}),
                    "configmap")
            cp.compact_etcd()
            self.note("compaction", "etcd compacted at its head revision")
        apiserver = next(p for p in cp.processes if p.name == "kube-apiserver")
        os.kill(apiserver.pid, signal.SIGKILL)
        apiserver.stop(1.0)  # reaps it
        time.sleep(1.0)
        restarted = ManagedProcess.start(apiserver.name, apiserver.argv, apiserver.log_path)
        cp.processes[cp.processes.index(apiserver)] = restarted
        deadline = time.monotonic() + 90
        while not cp.safe_ready():
            if time.monotonic() > deadline:
                raise RuntimeError("kube-apiserver did not come back")
            time.sleep(0.2)
        self.note("apiserver_restart", "kube-apiserver killed (SIGKILL) and restarted")

    def cut(self) -> None:
        for p in self.proxies:
            p.cut()
        self.note("cut", "every proxied connection reset")

    def freeze(self) -> None:
        for p in self.proxies:
            p.freeze(self.cfg.freeze_seconds)
        self.note("freeze", f"every proxied connection frozen {self.cfg.freeze_seconds:g}s")
        time.sleep(self.cfg.freeze_seconds)

    def note(self, kind: str, text: str) -> None:
        self.faults[kind] += 1
        self.fault_log.append(f"{time.strftime('%H:%M:%S')} {text}")
        self.say(f"fault: {text} (created {self.created}/{self.cfg.pods})")

    def schedule(self) -> list[tuple[float, Callable[[], None]]]:
        """(fraction of the stream, action) for every fault, interleaved."""
        c = self.cfg
        actions: list[Callable[[], None]] = []
        restarts: list[Callable[[], None]] = [
            lambda k=k: self.restart_apiserver(k < c.compactions)  # type: ignore[misc]
            for k in range(c.apiserver_restarts)]
        kills: list[Callable[[], None]] = [self.kill_leader] * c.leader_kills
        cuts: list[Callable[[], None]] = [self.cut] * c.cuts
        freezes: list[Callable[[], None]] = [self.freeze] * c.freezes
        stale: list[Callable[[], None]] = [self.stale_takeover] * c.stale_takeovers
        pools = [cuts, kills, restarts, freezes, stale]
        while any(pools):
            for pool in pools:
                if pool:
                    actions.append(pool.pop(0))
        n = len(actions)
        return [((k + 1) / (n + 1), a) for k, a in enumerate(actions)]

    # the stream

    def stream(self) -> None:
        try:
            t0 = time.monotonic()
            path = f"/api/v1/namespaces/{NAMESPACE}/pods"
            for i, spec in enumerate(self.specs):
                delay = t0 + i / self.cfg.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                body = pod_body(spec)
                self.created_at[spec.name] = time.time()
                _retry(lambda body=body: self.client.request("POST", path, body=body),
                       f"create {spec.name}")
                self.created = i + 1
        except BaseException as exc:  # reported by run()
            self._stream_error = exc

    def run(self) -> Result:
        cfg = self.cfg
        result = Result(config=asdict(cfg))
        t_start = time.monotonic()
        with self.control_plane() as cp:
            client = KubeClient.connect(ConnectionSettings(
                kubeconfig=str(cp.kubeconfig_path), qps=-1, timeout=30))
            try:
                self.setup(cp, client)
                self.start_replica(0)
                self.start_replica(1)
                self.wait_for_leader(90)
                stream = threading.Thread(target=self.stream, daemon=True)
                t0 = time.monotonic()
                stream.start()
                duration = cfg.pods / cfg.rate
                for fraction, action in self.schedule():
                    delay = t0 + fraction * duration - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                    action()
                stream.join()
                if self._stream_error is not None:
                    raise self._stream_error
                result.stream_s = round(time.monotonic() - t0, 1)
                t1 = time.monotonic()
                self.settle()
                result.settle_s = round(time.monotonic() - t1, 1)
                result.wall_s = round(time.monotonic() - t0, 1)
                self.check(result)
                self.stop_replicas(result)
                self.check_audit(result)
            finally:
                for r in self.replicas:
                    if r.proc.poll() is None:
                        r.proc.kill()
                        r.proc.wait()
                for p in self.proxies:
                    p.close()
                client.close()
        result.faults = {**dict(self.faults), "injected_by_proxies": dict(
            sum((p.injected for p in self.proxies), Counter())), "log": self.fault_log}
        result.machine = (f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
                          f"{platform.python_version()}, Kubernetes {K8S_VERSION}")
        self.say(f"soak done in {time.monotonic() - t_start:.0f}s")
        return result

    def pods(self) -> dict[str, Obj]:
        items = _retry(lambda: self.client.request(
            "GET", f"/api/v1/namespaces/{NAMESPACE}/pods"), "list pods")["items"]
        return {p["metadata"]["name"]: p for p in items}

    def settle(self) -> None:
        fitting = {s.name for s in self.specs if s.kind != "huge"}
        huge = {s.name for s in self.specs if s.kind == "huge"}
        deadline = time.monotonic() + self.cfg.settle
        while True:
            pods = self.pods()
            unbound = [n for n in fitting if not (pods.get(n) or {}).get("spec", {}).get(
                "nodeName")]
            marked = _failed_scheduling(self.client)
            waiting = [n for n in huge if n not in marked or
                       _pod_scheduled(pods.get(n)) != ("False", "Unschedulable")]
            if not unbound and not waiting:
                return
            if time.monotonic() > deadline:
                self.say(f"settle timeout: {len(unbound)} unbound, {len(waiting)} unmarked")
                return
            time.sleep(1.0)

    # invariants

    def check(self, result: Result) -> None:
        pods = self.pods()
        specs = {s.name: s for s in self.specs}
        nodes = {f"node-{i}": node_body(i) for i in range(self.cfg.nodes)}
        placed = {n: p["spec"].get("nodeName") for n, p in pods.items()
                  if n in specs and p["spec"].get("nodeName")}
        fitting = [s for s in self.specs if s.kind != "huge"]
        huge = [s for s in self.specs if s.kind == "huge"]
        result.pods = len(self.specs)
        result.fitting = len(fitting)
        result.bound = len(placed)
        result.unschedulable = len(huge)
        inv = result.invariants

        unbound = sorted(s.name for s in fitting if s.name not in placed)
        inv["every_fitting_pod_bound"] = _held(unbound, f"{len(placed)} bound")

        by_node: dict[str, list[PodSpec]] = defaultdict(list)
        for name, node in placed.items():
            by_node[node].append(specs[name])
        over = []
        for node, members in by_node.items():
            alloc = nodes[node]["status"]["allocatable"]
            cpu = sum(s.cpu_m for s in members)
            mem = sum(s.mem_mi for s in members)
            gpu = sum(s.gpu for s in members)
            ports = Counter(s.host_port for s in members if s.host_port)
            if cpu > NODE_CPU_M or mem > NODE_MEM_MI or len(members) > NODE_PODS \
                    or gpu > int(alloc.get(GPU, "0")) or any(v > 1 for v in ports.values()):
                over.append(f"{node}: cpu {cpu}m mem {mem}Mi pods {len(members)} gpu {gpu} "
                            f"ports {dict(ports)}")
        inv["no_node_over_allocatable"] = _held(over, f"{len(by_node)} nodes used")

        marked = _failed_scheduling(self.client)
        bad_huge = [f"{s.name}: bound to {placed[s.name]}" if s.name in placed
                    else f"{s.name}: PodScheduled {_pod_scheduled(pods.get(s.name))}, "
                    f"FailedScheduling event {s.name in marked}"
                    for s in huge if s.name in placed or s.name not in marked
                    or _pod_scheduled(pods.get(s.name)) != ("False", "Unschedulable")]
        inv["unfitting_pods_marked_unschedulable"] = _held(bad_huge, f"{len(huge)} pods")

        broken = []
        zone_counts: Counter[str] = Counter()
        anti: dict[str, list[str]] = defaultdict(list)
        for name, node in placed.items():
            s, labels = specs[name], nodes[node]["metadata"]["labels"]
            if s.kind == "hw" and labels.get(HW_LABEL) != "true":
                broken.append(f"{name} (hw-encrypt) on {node}")
            if s.kind == "prod" and labels.get("env") != "prod":
                broken.append(f"{name} (env=prod) on {node}")
            if s.kind == "spread":
                zone_counts[labels["topology.kubernetes.io/zone"]] += 1
            if s.kind == "anti":
                anti[s.group].append(node)
        for group, group_nodes in anti.items():
            if len(set(group_nodes)) < len(group_nodes):
                broken.append(f"anti-affinity group {group} shares nodes: {group_nodes}")
        counts = [zone_counts.get(z, 0) for z in ZONES]
        if max(counts) - min(counts) > SPREAD_SKEW:
            broken.append(f"zone spread {counts} exceeds maxSkew {SPREAD_SKEW}")
        for node, members in by_node.items():
            if sum(s.mem_mi for s in members) > HEADROOM * NODE_MEM_MI:
                broken.append(f"{node}: memory headroom policy broken")
        inv["constraints_respected"] = _held(
            broken, f"spread by zone {counts}, {len(anti)} anti-affinity groups")

    def stop_replicas(self, result: Result) -> None:
        crashed = []
        # A replica started by the last fault may still be importing: give it time to
        # say it started, so that the SIGTERM tests a running daemon's graceful stop.
        deadline = time.monotonic() + 60
        for r in self.replicas:
            while (not r.killed and r.proc.poll() is None and time.monotonic() < deadline
                   and STARTED_LINE not in r.log.read_text(errors="replace")):
                time.sleep(0.2)
        for r in self.replicas:
            if not r.killed:
                if r.proc.poll() is not None:
                    crashed.append(f"{r.name} exited {r.proc.returncode} on its own")
                else:
                    r.proc.send_signal(signal.SIGTERM)
        for r in self.replicas:
            if r.killed:
                code = -9
            else:
                try:
                    code = r.proc.wait(30)
                except subprocess.TimeoutExpired:
                    r.proc.kill()
                    code = r.proc.wait()
                    crashed.append(f"{r.name} did not stop within 30s of SIGTERM")
                if code != 0:
                    crashed.append(f"{r.name} exit code {code}")
            text = r.log.read_text(errors="replace")
            if "Traceback" in text:
                crashed.append(f"{r.name} logged a traceback (see {r.log})")
            result.replicas.append({"name": r.name, "exit": code, "killed": r.killed,
                                    "binds_logged": text.count(" bound ")})
        result.invariants["no_replica_crashed"] = _held(
            sorted(set(crashed)), f"{len(self.replicas)} replicas")

    def check_audit(self, result: Result) -> None:
        binds: list[tuple[str, str, str, int]] = []
        leases: list[tuple[str, str]] = []
        users = {r.user for r in self.replicas}
        for line in self.audit_log.read_text().splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            ref, code = ev.get("objectRef") or {}, (ev.get("responseStatus") or {}).get("code")
            user = (ev.get("user") or {}).get("username", "")
            if ev.get("stage") != "ResponseComplete":
                continue
            if ref.get("subresource") == "binding" and ref.get("namespace") == NAMESPACE:
                # Every binding posted counts, refused ones (409) included.
                binds.append((ev["requestReceivedTimestamp"], user, ref.get("name", ""),
                              int(code or 0)))
            elif ref.get("resource") == "leases" and ref.get("name") == LEASE and \
                    user in users and code in (200, 201):
                # A successful write of the Lease by a replica: it holds the lease from
                # then on (a standby only writes to acquire it).
                leases.append((ev["stageTimestamp"], user))
        leases.sort()
        bad = []
        for received, user, pod, code in sorted(binds):
            holder = ""
            for stamp, writer in leases:
                if _ts(stamp) > _ts(received):
                    break
                holder = writer
            if user != holder:
                bad.append(f"{pod}: binding ({code}) posted by {user} at {received} while "
                           f"{holder!r} held the lease")
        per_user = Counter(u.rsplit(":", 1)[-1] for _, u, _, _ in binds)
        result.invariants["only_lease_holder_bound"] = _held(
            bad, f"{len(binds)} binding creates, {len(leases)} lease writes; "
                 f"binds per replica {dict(per_user)}")
        latencies = sorted(_ts(t).timestamp() - self.created_at[p]
                           for t, _, p, code in binds if code == 201 and p in self.created_at)
        if latencies:
            result.bind_latency_s = {
                "p50": round(latencies[len(latencies) // 2], 2),
                "p99": round(latencies[min(len(latencies) - 1, len(latencies) * 99 // 100)], 2),
                "max": round(latencies[-1], 2)}
        ok = Counter(p for _, _, p, code in binds if code == 201)
        refused = sum(1 for *_, code in binds if code != 201)
        result.invariants["each_pod_bound_once"] = _held(
            [p for p, n in ok.items() if n > 1],
            f"{sum(ok.values())} successful binding creates, {refused} refused")


def _ts(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _held(problems: list[str], detail: str) -> Obj:
    return {"held": not problems, "detail": detail, "problems": problems[:20],
            "problem_count": len(problems)}


def _pod_scheduled(pod: Obj | None) -> tuple[str, str] | None:
    for c in ((pod or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return str(c.get("status")), str(c.get("reason"))
    return None


def _failed_scheduling(client: KubeClient) -> set[str]:
    try:
        items = client.request("GET", f"/api/v1/namespaces/{NAMESPACE}/events",
                               query={"fieldSelector": "reason=FailedScheduling"})["items"]
    except ApiError:
        return set()
    return {e["involvedObject"]["name"] for e in items}


# -- the report ---------------------------------------------------------------------

# The faults `Soak.note` counts, as docs/performance.md names them; a kind missing here is shown
# by its key rather than dropped.
FAULT_LABELS = {
    "apiserver_restart": "kube-apiserver killed (SIGKILL) and restarted",
    "compaction": "of which after an etcd compaction (watches get 410 Gone)",
    "leader_kill": "lease holder killed (kill -9)",
    "stale_takeover": "of which a stale takeover (the standby's open connections silent "
                      "for {stale_seconds:g} s)",
    "cut": "every proxied connection reset",
    "freeze": "every proxied connection frozen for {freeze_seconds:g} s",
}
# The proxies' injected answers: "bind:429" -> "bind answered 429".
INJECTED_LABELS = {"timeout": "reply swallowed"}


def _injected_label(key: str) -> str:
    kind, _, answer = key.partition(":")
    what = "binding create" if kind == "bind" else "other request"
    return f"{what}: {INJECTED_LABELS.get(answer, f'answered {answer}')}"


def failed_binds(doc: Obj) -> int:
    """Binding creates the proxies failed on purpose (every error kind)."""
    injected: dict[str, int] = doc["faults"].get("injected_by_proxies", {})
    return sum(n for k, n in injected.items() if k.startswith("bind:"))


def markdown(doc: Obj) -> str:
    """docs/performance.md's soak figures from a result JSON (what `main --json` writes)."""
    cfg, inv = doc["config"], doc["invariants"]
    marked = inv.get("unfitting_pods_marked_unschedulable", {})
    marked_count = doc["unschedulable"] - int(marked.get("problem_count", 0))
    failed = sorted(name for name, v in inv.items() if not v["held"])
    held = f"{len(inv) - len(failed)} of {len(inv)} held"
    if failed:
        held += " (FAILED: " + ", ".join(failed) + ")"
    # A run that bound nothing has no latencies: a dash, not a crash after the run.
    lat = {q: f"{v:g}" for q, v in doc["bind_latency_s"].items()}
    latency = " / ".join(lat.get(q, "–") for q in ("p50", "p99", "max"))
    lines = [f"Measured on {doc['machine']}: {cfg['pods']} pods created at {cfg['rate']:g}/s "
             f"on {cfg['nodes']} nodes, seed {cfg['seed']}.", "",
             "| pods | fit / bound | fit nowhere / marked unschedulable | wall s | "
             "failed binds | bind latency p50 / p99 / max s | invariants |",
             "|---:|---:|---:|---:|---:|---:|---|",
             f"| {doc['pods']} | {doc['fitting']} / {doc['bound']} | {doc['unschedulable']} / "
             f"{marked_count} | {doc['wall_s']:g} | {failed_binds(doc)} | {latency} | "
             f"{held} |", "",
             "| fault | count |", "|---|---:|"]
    faults: dict[str, int] = {k: v for k, v in doc["faults"].items() if isinstance(v, int)}
    order = [k for k in FAULT_LABELS if k in faults] + sorted(set(faults) - set(FAULT_LABELS))
    lines += [f"| {FAULT_LABELS.get(k, k).format(**cfg)} | {faults[k]} |" for k in order]
    injected = doc["faults"].get("injected_by_proxies", {})
    lines += [f"| {_injected_label(k)} | {injected[k]} |" for k in sorted(injected)]
    return "\n".join(lines) + "\n"


def run_soak(cfg: SoakConfig, workdir: Path | None = None) -> Result:
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
        return Soak(cfg, workdir).run()
    with tempfile.TemporaryDirectory(prefix="policyd-soak-") as tmp:
        return Soak(cfg, Path(tmp)).run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--size", choices=("full", "ci"), default="full")
    defaults = SoakConfig()
    for name, value in asdict(defaults).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=None)
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep logs and the audit log here (default: a temporary dir)")
    parser.add_argument("--json", type=Path, default=None, help="also write the result here")
    args = parser.parse_args(argv)
    cfg = SoakConfig.ci() if args.size == "ci" else defaults
    for name in asdict(defaults):
        value = getattr(args, name)
        if value is not None:
            setattr(cfg, name, value)
    result = run_soak(cfg, args.workdir)
    doc = {**asdict(result), "invariants_held": result.held}
    text = json.dumps(doc, indent=2)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n")
    print(markdown(doc), file=sys.stderr, end="")  # stdout stays the JSON alone
    return 0 if result.held else 1


if __name__ == "__main__":
    sys.exit(main())
