"""Helpers for the end-to-end tests: raw API calls, waiting, and policyd daemons
(in-process threads or real subprocesses) pointed at the local control plane."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from policyd.daemon.run import Daemon, RunOptions, connect, load_config
from policyd.kube.client import ApiError, ConnectionSettings, KubeClient
from tests.polling import wait_for

if TYPE_CHECKING:
    from policyd.devcluster import ControlPlane

Obj = dict[str, Any]


def node_body(name: str, labels: dict[str, str] | None = None, cpu: str = "4",
              memory: str = "8Gi", taints: list[Obj] | None = None,
              annotations: dict[str, str] | None = None) -> Obj:
    resources = {"cpu": cpu, "memory": memory, "pods": "110"}
    body: Obj = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name,
                     "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": {"capacity": resources, "allocatable": resources,
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }
    if taints:
        body["spec"] = {"taints": taints}
    if annotations:
        body["metadata"]["annotations"] = annotations
    return body


def pod_body(name: str, scheduler: str, *, cpu: str = "100m", memory: str = "64Mi",
             labels: dict[str, str] | None = None,
             annotations: dict[str, str] | None = None, **spec: Any) -> Obj:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
        "spec": {"schedulerName": scheduler, "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": {"cpu": cpu,
                                                            "memory": memory}}}],
                 **spec},
    }


# Storage objects (issue 16). Raw bodies as kubectl would send them; names are the
# caller's (tests use unique class names so objects of one test never match another's).
NO_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


def storage_class_body(name: str, provisioner: str = NO_PROVISIONER,
                       binding_mode: str = WAIT_FOR_FIRST_CONSUMER) -> Obj:
    # Retain: nothing in the test cluster deletes volumes, and a released PV that
    # waits for a deleter would keep its finalizer.
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": name}, "provisioner": provisioner,
            "volumeBindingMode": binding_mode, "reclaimPolicy": "Retain"}


def pv_body(name: str, storage_class: str, *, size: str = "1Gi",
            access_modes: tuple[str, ...] = ("ReadWriteOnce",), node: str | None = None,
            labels: dict[str, str] | None = None, csi_driver: str | None = None) -> Obj:
    """A PV of `storage_class`: a `local` volume pinned to `node` by hostname affinity
    when `node` is given, a `csi` volume of `csi_driver`, else a hostPath one."""
    spec: Obj = {"capacity": {"storage": size}, "accessModes": list(access_modes),
                 "storageClassName": storage_class,
                 "persistentVolumeReclaimPolicy": "Retain"}
    if csi_driver:
        spec["csi"] = {"driver": csi_driver, "volumeHandle": name}
    elif node:
        spec["local"] = {"path": f"/mnt/disks/{name}"}
    else:
        spec["hostPath"] = {"path": f"/tmp/{name}"}
    if node:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def pvc_body(name: str, storage_class: str, *, size: str = "1Gi",
             access_modes: tuple[str, ...] = ("ReadWriteOnce",),
             volume_name: str | None = None) -> Obj:
    """A claim; `volume_name` pre-binds it to that PV (the PV controller completes it)."""
    spec: Obj = {"accessModes": list(access_modes), "storageClassName": storage_class,
                 "resources": {"requests": {"storage": size}}}
    if volume_name:
        spec["volumeName"] = volume_name
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name}, "spec": spec}


def csinode_body(node: str, limits: dict[str, int]) -> Obj:
    """The CSINode of `node`: each driver with its attachable volume count."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
            "metadata": {"name": node},
            "spec": {"drivers": [{"name": driver, "nodeID": node,
                                  "allocatable": {"count": count}}
                                 for driver, count in limits.items()]}}


def claim_volumes(*claims: str) -> list[Obj]:
    """Pod `volumes` mounting each claim (a pod_body keyword: volumes=...)."""
    return [{"name": f"vol-{i}", "persistentVolumeClaim": {"claimName": claim}}
            for i, claim in enumerate(claims)]


class Cluster:
    """The test's view of the API server: one namespace, the nodes it creates."""

    def __init__(self, client: KubeClient, namespace: str) -> None:
        self.client = client
        self.ns = namespace
        # Cluster-scoped objects a test created (API paths), deleted by cleanup().
        self.created: list[str] = []

    # namespaces, nodes, pods
    def create_namespace(self) -> None:
        self.client.request("POST", "/api/v1/namespaces", body={
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.ns}})

    def delete_all_nodes(self) -> None:
        for node in self.client.request("GET", "/api/v1/nodes").get("items") or []:
            self.delete_node(node["metadata"]["name"])

    def delete_node(self, name: str) -> None:
        try:
            self.client.request("DELETE", f"/api/v1/nodes/{name}")
        except ApiError as exc:
            if exc.status != 404:
                raise

    def node(self, name: str, **kw: Any) -> Obj:
        return self.client.request("POST", "/api/v1/nodes", body=node_body(name, **kw))

    def pod(self, name: str, scheduler: str, **kw: Any) -> Obj:
        return self.client.request("POST", f"/api/v1/namespaces/{self.ns}/pods",
                                   body=pod_body(name, scheduler, **kw))

    def get_pod(self, name: str) -> Obj | None:
        return self.get(f"/api/v1/namespaces/{self.ns}/pods/{name}")

    def node_of(self, name: str) -> str | None:
        pod = self.get_pod(name)
        node = (pod or {}).get("spec", {}).get("nodeName")
        return str(node) if node else None

    def wait_bound(self, name: str, timeout: float = 15.0) -> str:
        return str(wait_for(lambda: self.node_of(name), timeout, f"pod {name} bound"))

    def delete_pod(self, name: str) -> None:
        self.client.request("DELETE", f"/api/v1/namespaces/{self.ns}/pods/{name}",
                            query={"gracePeriodSeconds": 0})

    def bind(self, name: str, node: str) -> None:
        self.client.request("POST", f"/api/v1/namespaces/{self.ns}/pods/{name}/binding",
                            body={"apiVersion": "v1", "kind": "Binding",
                                  "metadata": {"name": name},
                                  "target": {"apiVersion": "v1", "kind": "Node",
                                             "name": node}})

    def events(self, pod: str | None = None, reason: str | None = None,
               namespace: str | None = None) -> list[Obj]:
        selectors = []
        if pod:
            selectors.append(f"involvedObject.name={pod}")
        if reason:
            selectors.append(f"reason={reason}")
        query = {"fieldSelector": ",".join(selectors)} if selectors else None
        items = self.client.request("GET", f"/api/v1/namespaces/{namespace or self.ns}/events",
                                    query=query).get("items") or []
        return list(items)

    def condition(self, name: str, ctype: str = "PodScheduled") -> Obj | None:
        pod = self.get_pod(name) or {}
        for c in (pod.get("status") or {}).get("conditions") or []:
            if c.get("type") == ctype:
                return dict(c)
        return None

    # storage objects: claims live in the namespace, the rest is cluster-scoped and
    # deleted by cleanup()
    def _create_cluster_object(self, path: str, body: Obj) -> Obj:
        created = self.client.request("POST", path, body=body)
        self.created.append(f"{path}/{body['metadata']['name']}")
        return created

    def storage_class(self, name: str, **kw: Any) -> Obj:
        return self._create_cluster_object("/apis/storage.k8s.io/v1/storageclasses",
                                           storage_class_body(name, **kw))

    def pv(self, name: str, storage_class: str, **kw: Any) -> Obj:
        return self._create_cluster_object("/api/v1/persistentvolumes",
                                           pv_body(name, storage_class, **kw))

    def csinode(self, node: str, limits: dict[str, int]) -> Obj:
        return self._create_cluster_object("/apis/storage.k8s.io/v1/csinodes",
                                           csinode_body(node, limits))

    def pvc(self, name: str, storage_class: str, **kw: Any) -> Obj:
        return self.client.request(
            "POST", f"/api/v1/namespaces/{self.ns}/persistentvolumeclaims",
            body=pvc_body(name, storage_class, **kw))

    def get(self, path: str) -> Obj | None:
        """The object at the API path `path`, or None when there is none (404)."""
        try:
            return self.client.request("GET", path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def get_pvc(self, name: str) -> Obj | None:
        return self.get(f"/api/v1/namespaces/{self.ns}/persistentvolumeclaims/{name}")

    def get_pv(self, name: str) -> Obj | None:
        return self.get(f"/api/v1/persistentvolumes/{name}")

    def claim_bound(self, name: str) -> Obj | None:
        """The claim, once the API shows it Bound (None before)."""
        claim = self.get_pvc(name) or {}
        return claim if (claim.get("status") or {}).get("phase") == "Bound" else None

    def wait_claim_bound(self, name: str, timeout: float = 30.0) -> Obj:
        return dict(wait_for(lambda: self.claim_bound(name), timeout, f"claim {name} Bound"))

    def lease(self, name: str, namespace: str = "default") -> Obj | None:
        try:
            return self.client.request(
                "GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}")
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def cleanup(self) -> None:
        try:
            self.client.request("DELETE", f"/api/v1/namespaces/{self.ns}/pods",
                                query={"gracePeriodSeconds": 0})
            # No namespace controller runs: the claims go explicitly (their PVs are
            # released then, and the PV protection controller lets them go).
            self.client.request("DELETE",
                                f"/api/v1/namespaces/{self.ns}/persistentvolumeclaims")
            self.client.request("DELETE", f"/api/v1/namespaces/{self.ns}")
        except ApiError:
            pass
        for path in reversed(self.created):
            try:
                self.client.request("DELETE", path)
            except ApiError as exc:
                if exc.status != 404:
                    raise
        self.created.clear()
        self.delete_all_nodes()


def write_profile(directory: Path, scheduler: str, *, policies: str | None = "policies",
                  lease: str | None = None, extra: str = "", lease_duration: str = "4s",
                  renew_deadline: str = "3s") -> Path:
    lines = ["apiVersion: policyd.io/v1alpha1", "kind: PolicydConfiguration",
             "podInitialBackoffSeconds: 1", "podMaxBackoffSeconds: 2"]
    if policies:
        lines.append(f"policies: [{policies}]")
    lines += ["leaderElection:", "  leaderElect: true", f"  leaseDuration: {lease_duration}",
              f"  renewDeadline: {renew_deadline}", "  retryPeriod: 500ms",
              f"  resourceName: {lease or scheduler}", "  resourceNamespace: default"]
    lines += ["profiles:", f"- schedulerName: {scheduler}"]
    path = directory / f"profile-{scheduler}-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


class DaemonFactory:
    """policyd daemons running in this process (threads), stopped at teardown."""

    def __init__(self, kubeconfig: Path, tmp: Path) -> None:
        self.kubeconfig = kubeconfig
        self.tmp = tmp
        self.started: list[Daemon] = []

    def start(self, config: Path, *, leader: bool = True, **kw: Any) -> Daemon:
        """Start a daemon and wait for its caches (and its leadership, if `leader`).
        Plain HTTP on a free loopback port, no secure port (tests run side by side;
        tests/e2e/test_secure_serving.py asks for one)."""
        settings: dict[str, Any] = dict(metrics_bind_address="127.0.0.1:0", secure_port=0,
                                        reload_interval=0.2, shutdown_grace=5.0,
                                        verbosity=2)
        options = RunOptions(config=config, kubeconfig=str(self.kubeconfig),
                             **(settings | kw))
        loaded = load_config(options)
        daemon = Daemon(options, loaded, connect(options, loaded.settings))
        daemon.start()
        self.started.append(daemon)
        wait_for(daemon.synced, 15, "informer caches synced")
        if leader:
            # Leading and listed again for this term: from here on it schedules, and a
            # test's watch-level faults reach the watch it keeps (not one it is replacing).
            wait_for(daemon.ready_to_schedule, 15, "leadership and fresh caches")
        return daemon

    def stop_all(self) -> None:
        for d in self.started:
            d.shutdown()
        self.started.clear()


def scrape(port: int, path: str = "/metrics") -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except (urllib.error.URLError, OSError):
        return 0, ""  # not listening (yet)


def metric(text: str, name: str, **labels: str) -> float:
    """Sum of the samples of `name` whose labels include `labels`."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        rest = head[len(name):]
        if rest and not rest.startswith("{"):
            continue
        if all(f'{k}="{v}"' in rest for k, v in labels.items()):
            total += float(value)
    return total


def scrape_when(port: int, name: str, at_least: float, timeout: float = 15.0,
                **labels: str) -> str:
    """The metrics text once `name` (with `labels`) has reached `at_least`.

    The API shows a pod bound a moment before the bind's reply reaches the daemon, so
    a count of binds is read only after it has caught up; a test then holds it to the
    exact value, which still fails when a bind was counted twice."""
    return str(wait_for(
        lambda: (lambda t: t if metric(t, name, **labels) >= at_least else "")(
            scrape(port)[1]),
        timeout, f"{name}{labels or ''} >= {at_least:g}"))


class ProcessFactory:
    """`policyd run` as real subprocesses (for kill -9 and SIGTERM)."""

    def __init__(self, kubeconfig: Path, tmp: Path) -> None:
        self.kubeconfig = kubeconfig
        self.tmp = tmp
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *args: str, kubeconfig: Path | None = None, name: str = "policyd"
              ) -> subprocess.Popen[bytes]:
        """Without --secure-port in `args`, none (processes run side by side)."""
        log = open(self.tmp / f"{name}-{len(self.procs)}.log", "wb")  # noqa: SIM115
        if not any(a.startswith("--secure-port") for a in args):
            args = ("--secure-port", "0", *args)
        proc = subprocess.Popen(
            [sys.executable, "-m", "policyd", "run",
             "--kubeconfig", str(kubeconfig or self.kubeconfig), *args],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.procs.append(proc)
        return proc

    def log(self, index: int, name: str = "policyd") -> str:
        return (self.tmp / f"{name}-{index}.log").read_text(errors="replace")

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@contextmanager
def fresh_cluster(cp: ControlPlane, prefix: str = "e2e") -> Iterator[Cluster]:
    """A fresh namespace on `cp` with no Nodes, cleaned up after: what every e2e
    test starts from (its own control plane's, or the shared one's)."""
    client = KubeClient.connect(ConnectionSettings(kubeconfig=str(cp.kubeconfig_path),
                                                   qps=-1))
    c = Cluster(client, f"{prefix}-{uuid.uuid4().hex[:8]}")
    c.delete_all_nodes()
    c.create_namespace()
    try:
        yield c
    finally:
        c.cleanup()
        client.close()


@contextmanager
def daemons_on(cp: ControlPlane, tmp: Path) -> Iterator[DaemonFactory]:
    """In-process daemons against `cp`, all stopped after."""
    factory = DaemonFactory(cp.kubeconfig_path, tmp)
    try:
        yield factory
    finally:
        factory.stop_all()


CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def apply_crds(cp: ControlPlane, path: Path) -> list[Obj]:
    """Create every CustomResourceDefinition of the YAML file `path` on `cp` and wait
    until each is Established (served); the definitions, as read."""
    from ruamel.yaml import YAML

    crds = [d for d in YAML(typ="safe").load_all(path.read_text()) if d]
    client = KubeClient.connect(ConnectionSettings(kubeconfig=str(cp.kubeconfig_path),
                                                   qps=-1))
    try:
        for crd in crds:
            client.request("POST", CRDS, body=crd)

        def established() -> bool:
            for crd in crds:
                got = client.request("GET", f"{CRDS}/{crd['metadata']['name']}")
                if not any(c["type"] == "Established" and c["status"] == "True"
                           for c in (got.get("status") or {}).get("conditions") or []):
                    return False
            return True
        wait_for(established, 60, f"the CRDs of {path.name} Established")
    finally:
        client.close()
    return crds

