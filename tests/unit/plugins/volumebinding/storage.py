"""Storage objects for VolumeBinding's tests, as raw JSON the API server would give,
and a cluster holding them. (Candidates for tests/builders.py once the other volume
plugins' tests want the same.)"""

from __future__ import annotations

import itertools
from typing import Any

from policyd.framework.cycle_state import CycleState
from policyd.model.cluster import ClusterState
from policyd.model.records import Node
from tests.builders import make_node

_rv = itertools.count(10)

WFFC = "WaitForFirstConsumer"
IMMEDIATE = "Immediate"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def storage_class(name: str, mode: str | None = WFFC,
                  provisioner: str = "kubernetes.io/no-provisioner",
                  allowed: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    sc: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                          "metadata": {"name": name, "resourceVersion": str(next(_rv))},
                          "provisioner": provisioner}
    if mode is not None:
        sc["volumeBindingMode"] = mode
    if allowed is not None:
        sc["allowedTopologies"] = allowed
    return sc


def pvc(name: str, sc: str | None = "wait", size: str | None = "1Gi", *,
        namespace: str = "default", modes: tuple[str, ...] = ("ReadWriteOnce",),
        volume: str = "", bound: bool = False, **extra: Any) -> dict[str, Any]:
    """A claim; `volume` with `bound` is a claim the PV controller finished binding."""
    spec: dict[str, Any] = {"accessModes": list(modes)}
    if sc is not None:
        spec["storageClassName"] = sc
    if size is not None:
        spec["resources"] = {"requests": {"storage": size}}
    if volume:
        spec["volumeName"] = volume
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                            "resourceVersion": str(next(_rv))}
    if bound:
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
             "spec": spec, "status": {"phase": "Bound" if bound else "Pending"}}
    for key, value in extra.items():
        claim[key] = value
    return claim


def pv(name: str, size: str = "1Gi", sc: str = "wait", *, node: str | None = None,
       affinity: dict[str, Any] | None = None, modes: tuple[str, ...] = ("ReadWriteOnce",),
       phase: str = "Available", claim: dict[str, Any] | None = None,
       claim_uid: bool = True, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A PV; `node` pins it to one hostname (a local volume); `claim` pre-binds it."""
    spec: dict[str, Any] = {"capacity": {"storage": size}, "accessModes": list(modes),
                            "storageClassName": sc}
    if node is not None:
        affinity = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": HOSTNAME, "operator": "In", "values": [node]}]}]}}
    if affinity is not None:
        spec["nodeAffinity"] = affinity
    if claim is not None:
        ref = {"kind": "PersistentVolumeClaim", "namespace": claim["metadata"]["namespace"],
               "name": claim["metadata"]["name"]}
        if claim_uid:
            ref["uid"] = claim["metadata"]["uid"]
        spec["claimRef"] = ref
    meta: dict[str, Any] = {"name": name, "resourceVersion": str(next(_rv))}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec,
            "status": {"phase": phase}}


def csi_driver(name: str, capacity: bool) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
            "metadata": {"name": name}, "spec": {"storageCapacity": capacity}}


def capacity(name: str, sc: str, zone: str, size: str | None,
             maximum: str | None = None) -> dict[str, Any]:
    cap: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
                           "metadata": {"name": name, "namespace": "kube-system"},
                           "storageClassName": sc,
                           "nodeTopology": {"matchLabels": {ZONE: zone}}}
    if size is not None:
        cap["capacity"] = size
    if maximum is not None:
        cap["maximumVolumeSize"] = maximum
    return cap


def node(name: str, zone: str = "a") -> Node:
    return make_node(name).labels({HOSTNAME: name, ZONE: zone}).obj()


def cluster(*nodes: Node, objects: tuple[dict[str, Any], ...] = (),
            classes: tuple[dict[str, Any], ...] | None = None) -> ClusterState:
    """Nodes and storage objects; the classes `wait` (WaitForFirstConsumer, no
    provisioner) and `fast` (Immediate) unless `classes` says otherwise."""
    state = ClusterState(nodes)
    if classes is None:
        classes = (storage_class("wait"), storage_class("fast", IMMEDIATE))
    for obj in (*classes, *objects):
        state.storage.upsert(obj["kind"], obj)
    return state


def cycle(state: ClusterState) -> CycleState:
    return CycleState(state.node_infos(), state)


def info(state: ClusterState, name: str) -> Any:
    found = state.get(name)
    assert found is not None
    return found

