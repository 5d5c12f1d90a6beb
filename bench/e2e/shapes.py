"""The cluster shapes of the end-to-end benchmark: nodes, pods, the warm-up pod.

The shapes follow scheduler_perf (`bench.engine_bench` uses the same): 4 cpu / 32Gi /
110-pod nodes in three zones, pods requesting 100m / 500Mi; TopologySpreading adds a
zone constraint (maxSkew 5), PodAntiAffinity a required hostname anti-affinity on every
pod (init pods included), PolicyMix the example policies with 30% of pods asking for
hardware encryption (kube-scheduler gets the same pods with the equivalent nodeSelector).
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

WORKLOADS = ("SchedulingBasic", "TopologySpreading", "PodAntiAffinity", "PolicyMix")
SCHEDULER_NAME = "bench-scheduler"
NAMESPACE = "bench"
ZONES = ("zone-1", "zone-2", "zone-3")
ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"
HW_ENCRYPT_LABEL = "node.kubernetes.io/hw-encrypt"
HW_ENCRYPT_ANNOTATION = "myorg.io/require-hw-encrypt"
SPREAD_MAX_SKEW = 5
ANTI_AFFINITY_LABELS = {"color": "green"}
BENCH_LABELS = {"app": "bench"}
NODE_RESOURCES = {"cpu": "4", "memory": "32Gi", "pods": "110"}

WARM_UP = "warm-up"
# The warm-up pod jumps every queue: in the capacity mode it is created together with
# thousands of measured pods before the scheduler starts, and both schedulers sort
# their active queue by priority first (PrioritySort), so it is the first pod either
# one schedules once its caches are synced. Same class, same pod, for both.
WARM_UP_PRIORITY_CLASS = "bench-warm-up"
WARM_UP_PRIORITY = 1_000_000


def node_name(i: int) -> str:
    return f"node-{i}"


def measured_pod_name(i: int) -> str:
    return f"pod-{i}"


def node_body(i: int) -> Obj:
    name = node_name(i)
    labels = {HOSTNAME_LABEL: name, ZONE_LABEL: ZONES[i % len(ZONES)]}
    if i % 4 == 0:  # a quarter of the nodes offer hardware encryption (PolicyMix)
        labels[HW_ENCRYPT_LABEL] = "true"
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": dict(NODE_RESOURCES), "capacity": dict(NODE_RESOURCES)}}


def needs_hw_encrypt(workload: str, index: int) -> bool:
    """Whether measured pod `index` of `workload` must land on a hw-encrypt node."""
    return workload == "PolicyMix" and index % 10 < 3


def pod_body(name: str, workload: str, *, scheduler: str, index: int | None = None,
             node: str | None = None) -> Obj:
    """A pod of `workload`: measured (`index` set), init (`node` set: bound already)
    or the warm-up pod (neither)."""
    spec: Obj = {
        "schedulerName": SCHEDULER_NAME, "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}
    labels = dict(BENCH_LABELS)
    annotations: dict[str, str] = {}
    if node is not None:
        spec["nodeName"] = node
    if index is None and node is None:
        spec["priorityClassName"] = WARM_UP_PRIORITY_CLASS
        labels = {"app": WARM_UP}  # not counted by any spread or anti-affinity selector
    elif workload == "PodAntiAffinity":
        labels = dict(ANTI_AFFINITY_LABELS)
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": dict(ANTI_AFFINITY_LABELS)},
             "topologyKey": HOSTNAME_LABEL}]}}
    elif workload == "TopologySpreading" and node is None:
        spec["topologySpreadConstraints"] = [{
            "maxSkew": SPREAD_MAX_SKEW, "topologyKey": ZONE_LABEL,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": dict(BENCH_LABELS)}}]
    if index is not None and needs_hw_encrypt(workload, index):
        # policyd reads the annotation through the HwEncrypt example policy;
        # kube-scheduler gets the equivalent built-in constraint. The null scheduler
        # gets policyd's pods (it reads neither).
        if scheduler == "kube-scheduler":
            spec["nodeSelector"] = {HW_ENCRYPT_LABEL: "true"}
        else:
            annotations[HW_ENCRYPT_ANNOTATION] = "true"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels,
                         "annotations": annotations},
            "spec": spec}


def priority_class_body() -> Obj:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": WARM_UP_PRIORITY_CLASS}, "value": WARM_UP_PRIORITY,
            "description": "The benchmark's warm-up pod: scheduled before the backlog."}


def default_init_pods(nodes: int) -> int:
    """scheduler_perf's 1000 init pods for 5000 nodes (3000 for 15000)."""
    return nodes // 5


def measured_pods(workload: str, pods: int, nodes: int, init_pods: int) -> int:
    """How many measured pods a workload can place: PodAntiAffinity fits one green pod
    per node without one (the warm-up pod is not green), so more would never bind."""
    if workload == "PodAntiAffinity":
        return min(pods, nodes - min(init_pods, nodes))
    return pods
