"""The DynamicResources workload in the engine (`bench.dra_workload`'s objects): nodes
as scheduler_perf's, each with one ResourceSlice of GPU-like devices, and pods each
with a ResourceClaim of their own.

What the daemon does around a cycle is done here too, or the claims would never look
allocated: Reserve puts the allocation in flight, then, as PreBind's status write and
the informer's echo of it, the claim is stored allocated and reserved for the pod and
the in-flight entry withdrawn. So each pod's cycle sees every earlier pod's devices
taken the way they are in a running cluster: through allocated claims.
"""

from __future__ import annotations

import copy
from typing import Any

from bench.dra_workload import (
    DEVICES_PER_NODE,
    claim_name,
    device_class,
    pod_claims,
    resource_claim,
    resource_slice,
)
from bench.engine.workloads import scheduler_perf_pod
from policyd.engine.cycle import ScheduleResult, reserve
from policyd.framework.runtime import Framework
from policyd.model.cluster import ClusterState
from policyd.model.dra_objects import DEVICE_CLASS, RESOURCE_CLAIM, RESOURCE_SLICE
from policyd.model.records import Pod, pod_from_dict

NAME = "DynamicResources"
NAMESPACE = "default"


def capacity(nodes: int) -> int:
    """How many pods with one device each the cluster holds."""
    return nodes * DEVICES_PER_NODE


def add_devices(cluster: ClusterState, nodes: int) -> None:
    """The DeviceClass and one slice per node, as the informers would store them."""
    cluster.dra.upsert(DEVICE_CLASS, device_class())
    for i in range(nodes):
        cluster.dra.upsert(RESOURCE_SLICE, resource_slice(f"node-{i}"))


def pod_with_claim(cluster: ClusterState, name: str, i: int) -> Pod:
    """A pending pod and its claim (created first, as the benchmark's set-up does)."""
    claim = resource_claim(name, NAMESPACE)
    claim["metadata"].update(uid=f"uid-{claim_name(name)}", resourceVersion="1")
    cluster.dra.upsert(RESOURCE_CLAIM, claim)
    raw = scheduler_perf_pod(name, "SchedulingBasic", i)
    raw["spec"]["resourceClaims"] = pod_claims(name)
    return pod_from_dict(raw)


def settle(fw: Framework, cluster: ClusterState, result: ScheduleResult,
           resource_version: int) -> ScheduleResult:
    """Reserve the decided pod (already assumed), then store its claims as PreBind
    writes them: allocated, reserved for the pod, no longer in flight. Returns
    Reserve's result (its node None when Reserve failed; the caller forgets it)."""
    result = reserve(fw, result)
    if result.node is None:
        return result
    claims = cluster.dra.claims
    for entry in result.pod.resource_claims:
        key = f"{NAMESPACE}/{entry.claim}"
        stored = claims.get(key)
        if stored is None:
            continue
        uid = stored["metadata"]["uid"]
        decided = claims.pending_allocation(uid)
        if decided is None:
            continue
        written: dict[str, Any] = copy.deepcopy(decided)
        written["metadata"]["resourceVersion"] = str(resource_version)
        written["status"]["reservedFor"] = [
            {"resource": "pods", "name": result.pod.name, "uid": result.pod.uid}]
        claims.upsert(written)
        claims.remove_pending_allocation(uid, force=True)
    return result
