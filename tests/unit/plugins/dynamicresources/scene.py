"""A cluster with DRA objects for DynamicResources' tests: nodes, classes, slices and
claims in a ClusterState's DRA store (policyd.model.dra_objects), and pods using the
claims."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from policyd.engine.cycle import ScheduleResult, schedule_one
from policyd.framework import CycleState
from policyd.framework.runtime import Framework, WeightedScorePlugin
from policyd.model.cluster import ClusterState
from policyd.model.dra_objects import (
    DEVICE_CLASS,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    DraObjects,
)
from policyd.model.records import Node, Pod
from policyd.plugins.dynamicresources.plugin import DynamicResources, new
from tests.builders import PodBuilder, make_node, make_pod

Obj = dict[str, Any]

DRIVER = "gpu.example.com"
GPU_CLASS = "gpu"
CLASS_SELECTOR = f'device.driver == "{DRIVER}"'


def cluster(nodes: Sequence[Node], *, classes: Sequence[Obj] = (),
            slices: Sequence[Obj] = (), claims: Sequence[Obj] = ()) -> ClusterState:
    state = ClusterState(list(nodes))
    for kind, objs in ((DEVICE_CLASS, classes), (RESOURCE_SLICE, slices),
                       (RESOURCE_CLAIM, claims)):
        for obj in objs:
            state.dra.upsert(kind, copy.deepcopy(obj))
    return state


def dra(state: ClusterState) -> DraObjects:
    return state.dra


def stored_claim(state: ClusterState, key: str) -> Obj:
    """The claim the tracker shows (assumed version first); it must exist."""
    found = state.dra.claims.get(key)
    assert found is not None, key
    return found


def add_claim(state: ClusterState, obj: Obj) -> None:
    """A claim created after the cluster was built (the informer's add)."""
    state.dra.upsert(RESOURCE_CLAIM, copy.deepcopy(obj))


def nodes(*names: str, labels: dict[str, str] | None = None) -> list[Node]:
    out = []
    for n in names:
        b = make_node(n).capacity(cpu="8", memory="16Gi", pods="20")
        for k, v in {**(labels or {}), "kubernetes.io/hostname": n}.items():
            b = b.label(k, v)
        out.append(b.obj())
    return out


def gpu_class(name: str = GPU_CLASS, *selectors: str) -> Obj:
    spec = {"selectors": [{"cel": {"expression": e}}
                          for e in (CLASS_SELECTOR, *selectors)]}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": name}, "spec": spec}


def gpu_slice(node: str, *devices: str, attributes: dict[str, Any] | None = None) -> Obj:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": d, "attributes": dict(attributes or {})}
                                 for d in devices]}}


def claim(name: str, *requests: Obj, namespace: str = "default",
          owner_uid: str | None = None, status: Obj | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                 "resourceVersion": "1"}
    if owner_uid is not None:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "owner",
                                    "uid": owner_uid, "controller": True}]
    out: Obj = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": meta,
                "spec": {"devices": {"requests": list(requests or [exact("gpu")])}}}
    if status is not None:
        out["status"] = status
    return out


def exact(name: str, cls: str = GPU_CLASS, count: int = 1, **extra: Any) -> Obj:
    return {"name": name, "exactly": {"deviceClassName": cls, "count": count, **extra}}


def first_available(name: str, *subs: tuple[str, str, int]) -> Obj:
    return {"name": name, "firstAvailable": [
        {"name": s, "deviceClassName": cls, "count": count} for s, cls, count in subs]}


def allocation(node: str, *devices: str, request: str = "gpu") -> Obj:
    return {"devices": {"results": [
        {"request": request, "driver": DRIVER, "pool": node, "device": d}
        for d in devices]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}


def pod_using(name: str, *claims: str, uid: str | None = None) -> PodBuilder:
    b = make_pod(name).set("metadata.uid", uid or f"pod-uid-{name}")
    for c in claims:
        b = b.resource_claim(c, claim=c)
    return b


def framework(plugin: DynamicResources | None = None, seed: int = 1) -> Framework:
    dra = plugin or new()
    return Framework("default-scheduler", pre_filter=[dra], filter=[dra],
                     score=[WeightedScorePlugin(dra, 2)], post_filter=[dra],
                     reserve=[dra], pre_bind=[dra], seed=seed)


def schedule(state: ClusterState, pod: PodBuilder, *, reference: bool = False,
             plugin: DynamicResources | None = None) -> ScheduleResult:
    return schedule_one(framework(plugin), pod.obj(), state, reference=reference)


def pre_filtered(state: ClusterState, pod: PodBuilder, plugin: DynamicResources
                 ) -> tuple[CycleState, Pod, Any]:
    record = pod.obj()
    cycle = CycleState(state.node_infos(), state)
    _, status = plugin.pre_filter(cycle, record, state.node_infos())
    return cycle, record, status
