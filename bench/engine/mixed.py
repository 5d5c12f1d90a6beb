"""The `Mixed` workload: heterogeneous nodes and twelve pod shapes, taken in turn.

scheduler_perf's workloads place identical pods on identical nodes, so every per-pod
cache (label columns, toleration verdicts per taint set, selector matches) is computed
once and hit ever after. Here consecutive pods differ in everything a plugin reads:
nodeSelector, required and preferred node affinity, pod affinity and anti-affinity,
topology spread, tolerations, requests of several sizes, host ports, images, and the
example policies' labels and annotations. The nodes differ where the shapes need them
to: three sizes, labels, two dedicated pools behind NoSchedule taints, a
PreferNoSchedule taint, images.

Capacity is planned so that at 500 nodes the 11,000 pods of the published run (1000
existing, 10000 measured) all fit: each shape's nodes are a sizeable share of the
cluster (the unit tests check each shape against a small cluster), and the general
nodes (80%) end about half full in cpu.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.engine.workloads import ZONES, kubelet_status

WEB_GROUPS = 20  # app=web-<g>: targets of the pod-affinity shapes
INGRESS_GROUPS = 50  # app=ingress-<g>: pods of a group repel each other per node
HOST_PORTS = 20  # ingress host ports 30000..30019: 20 ingress pods fit one node
IMAGES = 30  # images in the registry; each node holds a third of them

SIZES = {"small": ("4", "16Gi"), "medium": ("8", "32Gi"), "large": ("16", "64Gi")}
BATCH_TAINT = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
MAINTENANCE_TAINT = {"key": "maintenance", "value": "planned", "effect": "PreferNoSchedule"}


def image(j: int) -> str:
    return f"registry.example.com/team{j % IMAGES}/app:v{j % IMAGES}"


def node(i: int) -> dict[str, Any]:
    """Node i. Its role comes from i % 10 (3: batch pool, 7: GPU pool, 9: maintenance
    planned, else general) and its other traits from other moduli, so that zone, size,
    env, disk and hw-encrypt are not correlated with each other."""
    name = f"node-{i}"
    role = i % 10
    labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": ZONES[i % 3],
              "env": "prod" if i % 4 < 2 else "staging"}
    taints: list[dict[str, str]] = []
    size = ("small", "medium", "large")[(i // 10) % 3]
    if role == 3:
        size = "large"
        labels["pool"] = "batch"
        taints.append(BATCH_TAINT)
    elif role == 7:
        size = "large"
        labels["accelerator"] = "nvidia-a100"
        taints.append(GPU_TAINT)
    elif role == 9:
        taints.append(MAINTENANCE_TAINT)
    labels["node.kubernetes.io/instance-type"] = size
    if i % 7 < 3:
        labels["disktype"] = "ssd"
    if i % 5 == 0:
        labels["node.kubernetes.io/hw-encrypt"] = "true"
    cpu, memory = SIZES[size]
    status = kubelet_status({"cpu": cpu, "memory": memory, "pods": "110",
                             "ephemeral-storage": "100Gi"})
    status["addresses"] = [{"type": "InternalIP", "address": f"10.{i // 65536 % 256}."
                            f"{i // 256 % 256}.{i % 256}"}, {"type": "Hostname", "address": name}]
    status["images"] = [{"names": [image(j)], "sizeBytes": 100_000_000 + 10_000_000 * j}
                        for j in range(IMAGES) if (i + j) % 3 == 0]
    return {"kind": "Node", "metadata": {
        "name": name, "uid": f"uid-{name}", "resourceVersion": "1", "labels": labels,
        "annotations": {"myorg.io/latency-ms": str(1 + (i * 7) % 50)}},
        "spec": {"taints": taints} if taints else {}, "status": status}


# -- pod shapes: each takes the shape's own occurrence number and fills in a pod --------

Pod = dict[str, Any]


def _requests(pod: Pod, cpu: str, memory: str) -> None:
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": memory}}


def _term(labels: dict[str, str], topology: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": topology}


def web(pod: Pod, n: int) -> None:
    """Production web servers: EnvProd keeps them on env=prod nodes."""
    pod["metadata"]["labels"].update({"app": f"web-{n % WEB_GROUPS}", "env": "prod"})
    _requests(pod, "100m", "128Mi")


def cache(pod: Pod, n: int) -> None:
    """nodeSelector on SSD nodes, preferring a node that runs its web group."""
    pod["metadata"]["labels"]["app"] = "cache"
    pod["spec"]["nodeSelector"] = {"disktype": "ssd"}
    pod["spec"]["affinity"] = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "podAffinityTerm": _term({"app": f"web-{n % WEB_GROUPS}"},
                                                "kubernetes.io/hostname")}]}}
    _requests(pod, "200m", "512Mi")


def api(pod: Pod, n: int) -> None:
    """Required node affinity (two zones, not small), preferring large nodes; latency
    sensitive, so the LowLatency policy scores it."""
    pod["metadata"]["labels"].update({"app": "api", "myorg.io/latency-sensitive": "true"})
    pod["spec"]["affinity"] = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
            "matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In",
                 "values": ["zone-1", "zone-2"]},
                {"key": "node.kubernetes.io/instance-type", "operator": "NotIn",
                 "values": ["small"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "preference": {
            "matchExpressions": [{"key": "node.kubernetes.io/instance-type",
                                  "operator": "In", "values": ["large"]}]}}]}}
    _requests(pod, "300m", "256Mi")


def ingress(pod: Pod, n: int) -> None:
    """One per node within its group (required anti-affinity), with a host port."""
    group = {"app": f"ingress-{n % INGRESS_GROUPS}"}
    pod["metadata"]["labels"].update(group)
    pod["spec"]["affinity"] = {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            _term(group, "kubernetes.io/hostname")]}}
    pod["spec"]["containers"][0]["ports"] = [
        {"containerPort": 8443, "hostPort": 30000 + n % HOST_PORTS, "protocol": "TCP"}]
    _requests(pod, "100m", "64Mi")


def spread(pod: Pod, n: int) -> None:
    """Even over zones (DoNotSchedule), and preferably over hosts (ScheduleAnyway)."""
    group = {"app": f"spread-{n % 10}"}
    pod["metadata"]["labels"].update(group)
    pod["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
         "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": group}},
        {"maxSkew": 3, "topologyKey": "kubernetes.io/hostname",
         "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": group}}]
    _requests(pod, "150m", "256Mi")


def batch(pod: Pod, n: int) -> None:
    """The batch pool: nodeSelector plus a toleration of its taint."""
    pod["metadata"]["labels"]["app"] = "batch"
    pod["spec"]["nodeSelector"] = {"pool": "batch"}
    pod["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Equal",
                                   "value": "batch", "effect": "NoSchedule"}]
    _requests(pod, "500m", "1Gi")


def secure(pod: Pod, n: int) -> None:
    """The HwEncrypt policy's annotation: only hw-encrypt nodes."""
    pod["metadata"]["labels"]["app"] = "secure"
    pod["metadata"]["annotations"] = {"myorg.io/require-hw-encrypt": "true"}
    _requests(pod, "100m", "128Mi")


def gpu(pod: Pod, n: int) -> None:
    """The GPU pool: an Exists toleration and a required Exists node affinity."""
    pod["metadata"]["labels"]["app"] = "train"
    pod["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists",
                                   "effect": "NoSchedule"}]
    pod["spec"]["affinity"] = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
            "matchExpressions": [{"key": "accelerator", "operator": "Exists"}]}]}}}
    _requests(pod, "500m", "4Gi")


def worker(pod: Pod, n: int) -> None:
    """Preferences only: spread from its group, lean to staging, tolerate maintenance."""
    group = {"app": f"worker-{n % 50}"}
    pod["metadata"]["labels"].update(group)
    pod["spec"]["affinity"] = {
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": _term(group, "kubernetes.io/hostname")}]},
        "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 20, "preference": {"matchExpressions": [
                {"key": "env", "operator": "In", "values": ["staging"]}]}}]}}
    pod["spec"]["tolerations"] = [{"key": "maintenance", "operator": "Exists",
                                   "effect": "PreferNoSchedule"}]
    _requests(pod, "50m", "64Mi")


def big(pod: Pod, n: int) -> None:
    """A large request, preferring large nodes."""
    pod["metadata"]["labels"]["app"] = "analytics"
    pod["spec"]["affinity"] = {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 80, "preference": {
            "matchExpressions": [{"key": "node.kubernetes.io/instance-type",
                                  "operator": "In", "values": ["large"]}]}}]}}
    _requests(pod, "1", "2Gi")


def best_effort(pod: Pod, n: int) -> None:
    """No requests (only the pod count filters; scores use the non-zero defaults), a
    second container with another image."""
    pod["metadata"]["labels"]["app"] = "sidecar-job"
    pod["spec"]["containers"].append({"name": "helper", "image": image(n + 7)})


def zonal(pod: Pod, n: int) -> None:
    """Required pod affinity: in a zone that runs its web group."""
    pod["metadata"]["labels"]["app"] = "zonal"
    pod["spec"]["affinity"] = {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            _term({"app": f"web-{n % WEB_GROUPS}"}, "topology.kubernetes.io/zone")]}}
    _requests(pod, "250m", "512Mi")


SHAPES: tuple[Callable[[Pod, int], None], ...] = (
    web, cache, api, ingress, spread, batch, secure, gpu, worker, big, best_effort, zonal)


def shape_name(k: int) -> str:
    return SHAPES[k % len(SHAPES)].__name__


def pod(name: str, k: int) -> Pod:
    """The k-th pod of the stream: shape k % 12, its own occurrence number k // 12
    choosing the group, port and image within the shape."""
    occurrence = k // len(SHAPES)
    p: Pod = {"kind": "Pod", "metadata": {
        "name": name, "namespace": "default", "uid": name, "labels": {}},
        "spec": {"schedulerName": "policyd", "containers": [
            {"name": "main", "image": image(k)}]},
        "status": {"phase": "Pending"}}
    SHAPES[k % len(SHAPES)](p, occurrence)
    return p
