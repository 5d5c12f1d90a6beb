"""The cluster shapes of the end-to-end benchmark: nodes, pods, the warm-up pod.

The shapes follow scheduler_perf (`bench.engine_bench` uses the same): 4 cpu / 32Gi /
110-pod nodes in three zones, pods requesting 100m / 500Mi; TopologySpreading adds a
zone constraint (maxSkew 5), PodAntiAffinity a required hostname anti-affinity on every
pod (init pods included), PolicyMix the example policies with 30% of pods asking for
hardware encryption (kube-scheduler gets the same pods with the equivalent nodeSelector).
MixedShapes has no constraint but mixes MIXED_SHAPE_COUNT request shapes (cpu, memory in
six ratios to it, an extended resource that a quarter of the nodes offer), each taken by
a different number of pods, in a fixed shuffled order: the opposite of SchedulingBasic's
single shape, which is the best case for a scheduler that caches per shape.
DynamicResources gives every node a ResourceSlice of 8 GPU-like devices and every
measured pod a ResourceClaim of its own for one of them (bench/dra_workload.py: the
objects, and why claims rather than templates); init and warm-up pods have none, so
the first pod with a claim is inside the window for both schedulers.
"""

from __future__ import annotations

import random
from typing import Any

from bench import dra_workload

Obj = dict[str, Any]

DYNAMIC_RESOURCES = "DynamicResources"
WORKLOADS = ("SchedulingBasic", "TopologySpreading", "PodAntiAffinity", "PolicyMix",
             "MixedShapes", DYNAMIC_RESOURCES)
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
# MixedShapes: an extended resource (a device plugin's, say) on every fourth node.
ACCEL_RESOURCE = "example.com/accel"
ACCEL_PER_NODE = "4"
MIXED_CPU_MILLIS = (50, 100, 150, 200, 250, 300, 400, 500, 750, 1000)
MIXED_MIB_PER_MILLI = (1, 2, 4, 8, 16, 24)  # memory:cpu ratios, MiB per millicore
MIXED_SHAPE_COUNT = len(MIXED_CPU_MILLIS) * len(MIXED_MIB_PER_MILLI)  # 60
MIXED_SEED = 27

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
    resources = dict(NODE_RESOURCES)
    if i % 4 == 1:  # another quarter offer the extended resource (MixedShapes)
        resources[ACCEL_RESOURCE] = ACCEL_PER_NODE
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": dict(resources), "capacity": dict(resources)}}


def mixed_shape(k: int) -> dict[str, str]:
    """Request shape `k` (0..MIXED_SHAPE_COUNT-1) of MixedShapes: every cpu size in
    every memory ratio; one shape in seven also asks for the extended resource."""
    cpu = MIXED_CPU_MILLIS[k % len(MIXED_CPU_MILLIS)]
    mib = cpu * MIXED_MIB_PER_MILLI[k // len(MIXED_CPU_MILLIS) % len(MIXED_MIB_PER_MILLI)]
    requests = {"cpu": f"{cpu}m", "memory": f"{mib}Mi"}
    if k % 7 == 3:
        requests[ACCEL_RESOURCE] = "1"
    return requests


def _mixed_sequence() -> list[int]:
    """The order shapes are handed out in: shape k appears 1 + (7k mod 10) times per
    cycle (so pods per shape vary from 1 to 10 in 10), shuffled with a fixed seed."""
    order = [k for k in range(MIXED_SHAPE_COUNT) for _ in range(1 + (7 * k) % 10)]
    random.Random(MIXED_SEED).shuffle(order)
    return order


MIXED_SEQUENCE = tuple(_mixed_sequence())


def mixed_shape_of(index: int) -> int:
    """Which shape measured pod `index` of MixedShapes takes."""
    return MIXED_SEQUENCE[index % len(MIXED_SEQUENCE)]


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
    if workload == "MixedShapes" and index is not None:
        requests = mixed_shape(mixed_shape_of(index))
        resources: Obj = {"requests": requests}
        if ACCEL_RESOURCE in requests:  # an extended resource cannot be overcommitted
            resources["limits"] = {ACCEL_RESOURCE: requests[ACCEL_RESOURCE]}
        spec["containers"][0]["resources"] = resources
    if workload == DYNAMIC_RESOURCES and index is not None:
        spec["resourceClaims"] = dra_workload.pod_claims(name)
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
    if workload == DYNAMIC_RESOURCES:  # one device each
        return min(pods, nodes * dra_workload.DEVICES_PER_NODE)
    return pods
