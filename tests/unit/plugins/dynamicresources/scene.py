"""A cluster with DRA objects for DynamicResources' tests: nodes, classes, slices and
claims in a ClusterState's DRA store, and pods using the claims.

`ClusterState.dra` (policyd.model.dra_objects) holds the objects when the model has
it; `FakeDra` below stands in for it otherwise, with the same calls the plugin makes
(its `DraStore` protocol), so the same tests run against either.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from policyd.engine.cycle import ScheduleResult, schedule_one
from policyd.framework import CycleState
from policyd.framework.runtime import Framework, WeightedScorePlugin
from policyd.model.cluster import ClusterState
from policyd.model.records import Node, Pod
from policyd.plugins.dynamicresources.plugin import DynamicResources, new
from tests.builders import PodBuilder, make_node, make_pod

T = TypeVar("T")
Obj = dict[str, Any]

DRIVER = "gpu.example.com"
GPU_CLASS = "gpu"
CLASS_SELECTOR = f'device.driver == "{DRIVER}"'


class _Named:
    def __init__(self, key: Callable[[Obj], str]) -> None:
        self._key = key
        self.objects: dict[str, Obj] = {}

    def get(self, key: str) -> Obj | None:
        return self.objects.get(key)

    def values(self) -> Iterator[Obj]:
        return iter(list(self.objects.values()))

    def put(self, obj: Obj) -> None:
        self.objects[self._key(obj)] = obj


class _Claims(_Named):
    def __init__(self) -> None:
        super().__init__(_claim_key)
        self.api: dict[str, Obj] = {}
        self.in_flight: dict[str, tuple[Obj, int]] = {}

    def put(self, obj: Obj) -> None:
        super().put(obj)
        self.api[_claim_key(obj)] = obj

    def assume(self, obj: Obj) -> None:
        self.objects[_claim_key(obj)] = obj

    def restore(self, key: str) -> None:
        if key in self.api:
            self.objects[key] = self.api[key]

    def signal_pending_allocation(self, uid: str, allocated: Obj) -> None:
        entry = self.in_flight.get(uid)
        self.in_flight[uid] = (allocated, 1) if entry is None else (entry[0], entry[1] + 1)

    def pending_allocation(self, uid: str) -> Obj | None:
        entry = self.in_flight.get(uid)
        return entry[0] if entry is not None else None

    def remove_pending_allocation(self, uid: str, *, force: bool = False) -> bool:
        entry = self.in_flight.get(uid)
        if entry is None:
            return False
        if force or entry[1] <= 1:
            del self.in_flight[uid]
            return True
        self.in_flight[uid] = (entry[0], entry[1] - 1)
        return False

    def pending_allocations(self) -> Iterator[Obj]:
        return iter([c for c, _ in self.in_flight.values()])


class FakeDra:
    def __init__(self) -> None:
        self.classes = _Named(_name)
        self.slices = _Named(_name)
        self.claims = _Claims()
        self._memo: dict[tuple[int, str], Any] = {}

    def decoded(self, obj: Obj, what: str, decode: Callable[[Obj], T]) -> T:
        key = (id(obj), what)
        if key not in self._memo:
            self._memo[key] = (obj, decode(obj))
        return self._memo[key][1]  # type: ignore[no-any-return]


def _name(obj: Obj) -> str:
    return str(obj["metadata"]["name"])


def _claim_key(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace') or 'default'}/{meta['name']}"


def cluster(nodes: Sequence[Node], *, classes: Sequence[Obj] = (),
            slices: Sequence[Obj] = (), claims: Sequence[Obj] = ()) -> ClusterState:
    state = ClusterState(list(nodes))
    store = dra(state)
    if store is None:
        store = FakeDra()
        vars(state)["dra"] = store  # before the model had a DRA store
        for obj in classes:
            store.classes.put(obj)
        for obj in slices:
            store.slices.put(obj)
        for obj in claims:
            store.claims.put(obj)
    else:
        for kind, objs in (("DeviceClass", classes), ("ResourceSlice", slices),
                           ("ResourceClaim", claims)):
            for obj in objs:
                store.upsert(kind, copy.deepcopy(obj))
    return state


def dra(state: ClusterState) -> Any:
    """The cluster's DRA store (the model's, or FakeDra)."""
    return getattr(state, "dra", None)


def add_claim(state: ClusterState, obj: Obj) -> None:
    """A claim created after the cluster was built (the informer's add)."""
    store = dra(state)
    if isinstance(store, FakeDra):
        store.claims.put(obj)
    else:
        store.upsert("ResourceClaim", copy.deepcopy(obj))


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
