"""The benchmark's clusters and pods, as the raw JSON objects the API server would send.

Four workloads follow scheduler_perf (identical 4-cpu / 32Gi / 110-pod nodes in three
zones, identical 100m / 500Mi pods): SchedulingBasic, TopologySpreading, PodAntiAffinity
and PolicyMix. They keep every cache hot, which is what `Mixed` (`bench.engine.mixed`)
is for. Every node carries the kubelet-reported conditions a heartbeat rewrites
(`bench.engine.churn`).
"""

from __future__ import annotations

from typing import Any

ZONES = ("zone-1", "zone-2", "zone-3")
SCHEDULER_PERF_WORKLOADS = ("SchedulingBasic", "TopologySpreading", "PodAntiAffinity",
                            "PolicyMix")
# Workloads that load the example policies of policies/.
WITH_POLICIES = ("PolicyMix", "Mixed")
START_TIME = "2026-01-01T00:00:00Z"
CONDITION_TYPES = ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")


def kubelet_status(allocatable: dict[str, str], heartbeat: str = START_TIME
                   ) -> dict[str, Any]:
    """The parts of a node's status a kubelet reports and the scheduler reads or decodes:
    allocatable (capacity alike here), the four conditions with their heartbeat time,
    addresses left to the caller."""
    return {"allocatable": dict(allocatable), "capacity": dict(allocatable),
            "conditions": [{"type": t, "status": "True" if t == "Ready" else "False",
                            "lastHeartbeatTime": heartbeat,
                            "lastTransitionTime": START_TIME,
                            "reason": f"Kubelet{'Ready' if t == 'Ready' else 'Has' + t}",
                            "message": f"kubelet reports {t}"} for t in CONDITION_TYPES]}


def scheduler_perf_node(i: int) -> dict[str, Any]:
    # scheduler_perf's node-default.yaml: 4 cpu, 32Gi, 110 pods.
    name = f"node-{i}"
    status = kubelet_status({"cpu": "4", "memory": "32Gi", "pods": "110"})
    status["addresses"] = [{"type": "InternalIP", "address": f"10.{i // 65536 % 256}."
                            f"{i // 256 % 256}.{i % 256}"}, {"type": "Hostname", "address": name}]
    return {"kind": "Node", "metadata": {
        "name": name, "uid": f"uid-{name}", "resourceVersion": "1", "labels": {
            "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": ZONES[i % 3],
            **({"node.kubernetes.io/hw-encrypt": "true"} if i % 4 == 0 else {}),
            "env": "prod" if i % 2 else "staging"},
        "annotations": {"myorg.io/latency-ms": str(1 + i % 50)}},
        "spec": {}, "status": status}


def scheduler_perf_pod(name: str, workload: str, i: int, node: str | None = None
                       ) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "policyd", "containers": [{
        "name": "c", "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": name,
                            "labels": {"app": "bench"}}
    if node:
        spec["nodeName"] = node
    if workload == "PodAntiAffinity":
        # As scheduler_perf's SchedulingPodAntiAffinity: init pods carry the same
        # anti-affinity, so every existing pod also repels the measured ones.
        meta["labels"] = {"color": "green"}
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"color": "green"}},
             "topologyKey": "kubernetes.io/hostname"}]}}
    elif node:
        pass
    elif workload == "TopologySpreading":
        spec["topologySpreadConstraints"] = [{
            "maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "bench"}}}]
    elif workload == "PolicyMix" and i % 10 < 3:
        meta["annotations"] = {"myorg.io/require-hw-encrypt": "true"}
    return {"kind": "Pod", "metadata": meta, "spec": spec,
            "status": {"phase": "Running" if node else "Pending"}}
