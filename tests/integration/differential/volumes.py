"""The storage side of volume cases (`tests.gen.volumes`): put their StorageClasses,
PVs, claims and CSINodes on the API server, let the real PV controller settle them,
make sure kube-scheduler has seen them, read them back for policyd, and clean up.

When is the storage read back? Before the pods under test exist. kube-scheduler's
VolumeBinding PreBind writes its choice to the API (a PV's claimRef, a claim's
selected-node annotation) and the PV controller and the provisioner then bind the
claims, so after its decision the claims of the pod under test are bound to volumes on
the chosen node: a cluster read back then would show policyd the answer. Nothing else
changes the storage objects between the read and kube-scheduler's decision: the cases'
claims that are to be bound are bound before (`settle`), every PV has left the Pending
phase, and cases never share a class, so one pod's binding cannot touch another case's
objects. (Nodes and pods are still read back after the decisions, as for every case:
binding changes none of them but the pods under test, which are taken apart.)

kube-scheduler's decision is the pod's binding, as for every case: its PreBind waits
(bindTimeoutSeconds, 30 s in the comparison's profile) until the PV controller has bound
the claims, through the provisioner (tests/e2e/provisioner.py, which the test runs) for
dynamic ones. Reading the decision from the selected-node annotation or the PV's
claimRef instead would be quicker, but would not show that the binding kube-scheduler
chose can be completed, and a pod that kube-scheduler had to retry (PreBind failed)
would look decided.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from policyd.kube.client import ApiError
from policyd.model.storage import (
    CSI_DRIVER,
    CSI_NODE,
    CSI_STORAGE_CAPACITY,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    STORAGE_CLASS,
    VOLUME_ATTACHMENT,
    StorageObjects,
)
from tests.gen.clusters import HOSTNAME
from tests.gen.differential import CASE_LABEL, UNDER_TEST_LABEL, Case
from tests.gen.volumes import DRIVER, NO_PROVISIONER, SETTLES_TO

# SETTLES_TO of a claim put_storage deletes once created (a finalizer keeps it).
TERMINATING = "Terminating"

if TYPE_CHECKING:
    from tests.integration.differential.runner import Runner

# kind -> (apiVersion, collection path; {ns} for namespaced kinds), in creation order.
_PATHS = {
    CSI_NODE: ("storage.k8s.io/v1", "/apis/storage.k8s.io/v1/csinodes"),
    STORAGE_CLASS: ("storage.k8s.io/v1", "/apis/storage.k8s.io/v1/storageclasses"),
    PERSISTENT_VOLUME: ("v1", "/api/v1/persistentvolumes"),
    PERSISTENT_VOLUME_CLAIM: ("v1", "/api/v1/namespaces/{ns}/persistentvolumeclaims"),
}
# Every storage kind the volume plugins read, listed for the read-back.
_LISTS = {
    PERSISTENT_VOLUME: ("v1", "/api/v1/persistentvolumes"),
    PERSISTENT_VOLUME_CLAIM: ("v1", "/api/v1/persistentvolumeclaims"),
    STORAGE_CLASS: ("storage.k8s.io/v1", "/apis/storage.k8s.io/v1/storageclasses"),
    CSI_NODE: ("storage.k8s.io/v1", "/apis/storage.k8s.io/v1/csinodes"),
    CSI_DRIVER: ("storage.k8s.io/v1", "/apis/storage.k8s.io/v1/csidrivers"),
    CSI_STORAGE_CAPACITY: ("storage.k8s.io/v1",
                           "/apis/storage.k8s.io/v1/csistoragecapacities"),
    VOLUME_ATTACHMENT: ("storage.k8s.io/v1", "/apis/storage.k8s.io/v1/volumeattachments"),
}
# Raw objects by kind, as listed (what `attach` puts into a ClusterState).
StorageLists = dict[str, list[dict[str, Any]]]


def ensure_driver(runner: Runner) -> None:
    """The CSIDriver every case's CSI volumes name (idempotent). Attach is required
    (the default), so NodeVolumeLimits counts its volumes; no capacity tracking."""
    runner.ensure("/apis/storage.k8s.io/v1/csidrivers", {
        "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
        "metadata": {"name": DRIVER},
        "spec": {"attachRequired": True, "storageCapacity": False}})


def put_storage(runner: Runner, cases: Sequence[Case]) -> None:
    """Create the cases' storage objects kind by kind (CSINodes, classes, PVs, then
    claims, each kind concurrently), the claims only once the PV controller has taken
    every PV out of the Pending phase, delete the claims that are to be Terminating
    (HOLD_FINALIZER keeps them), then wait until it has bound the claims it is to bind
    and moved the others with a SETTLES_TO phase there (`settle`).

    Why wait before the claims: the PV controller looks for a claim's volume in its
    own cache of PVs, fed by a watch of its own, and does not look again before its
    periodic sync (--pvclaimbinder-sync-period: 15 s by default, 2 s in the dev control
    plane) when a suitable PV turns up later. A claim synced before the controller has
    seen its PV would wait that long (with 24 cases, 14 s per batch were measured at
    15 s); a PV it has moved to Available is in that cache."""
    for kind, (_, path) in _PATHS.items():
        if kind == PERSISTENT_VOLUME_CLAIM:
            settle(runner, cases, claims=False)
        runner.each(lambda o, path=path: runner.post(  # type: ignore[misc]
            path.format(ns=o["metadata"].get("namespace", "")), o),
            [o for c in cases for o in c.storage if o["kind"] == kind])
    runner.each(lambda o: runner.client.request("DELETE", _claim_path(o)),
                _terminating(cases))
    settle(runner, cases)


def _claim_path(claim: dict[str, Any]) -> str:
    meta = claim["metadata"]
    return f"/api/v1/namespaces/{meta['namespace']}/persistentvolumeclaims/{meta['name']}"


def _terminating(cases: Sequence[Case]) -> list[dict[str, Any]]:
    return [o for c in cases for o in c.storage if o["kind"] == PERSISTENT_VOLUME_CLAIM
            and o["metadata"]["labels"].get(SETTLES_TO) == TERMINATING]


def _settled(pv: dict[str, Any]) -> tuple[str, ...]:
    """The phases a PV of a case may be left in."""
    phase = (pv["metadata"].get("labels") or {}).get(SETTLES_TO)
    return (phase,) if phase else ("Available", "Bound")


def _phase(obj: dict[str, Any]) -> str:
    """An object's phase, or TERMINATING for a claim being deleted."""
    if obj["metadata"].get("deletionTimestamp"):
        return TERMINATING
    return str((obj.get("status") or {}).get("phase") or "")


def settle(runner: Runner, cases: Sequence[Case], *, claims: bool = True) -> None:
    """Wait until the PV controller has taken every PV of the cases out of the Pending
    phase (into their SETTLES_TO phase when they have one, else Available or Bound)
    and (with `claims`) bound every claim of their `bind_first` and moved those with
    SETTLES_TO there; TimeoutError after the runner's timeout, naming what it still
    waits for."""
    selector = {"labelSelector": f"{CASE_LABEL} in ({','.join(c.prefix for c in cases)})"}
    want = {key for c in cases for key in c.bind_first} if claims else set()
    phases = {f"{o['metadata']['namespace']}/{o['metadata']['name']}":
              o["metadata"]["labels"][SETTLES_TO]
              for c in cases for o in c.storage if o["kind"] == PERSISTENT_VOLUME_CLAIM
              and SETTLES_TO in o["metadata"]["labels"]} if claims else {}
    # kube-controller-manager's client is held to its default 20 requests/s, and each
    # binding takes about five writes: a batch with the previous one's clean-up still
    # being processed has taken 14 s.
    deadline = time.monotonic() + 3 * runner.timeout
    while True:
        listed = runner.client.request("GET", "/api/v1/persistentvolumeclaims",
                                       query=selector)["items"] if want or phases else []
        now = {f"{c['metadata']['namespace']}/{c['metadata']['name']}": _phase(c)
               for c in listed}
        bound = {key for key, phase in now.items() if phase == "Bound"}
        unsettled = sorted(k for k, phase in phases.items() if now.get(k) != phase)
        pvs = runner.client.request("GET", "/api/v1/persistentvolumes",
                                    query=selector)["items"]
        pending = [p["metadata"]["name"] for p in pvs if _phase(p) not in _settled(p)]
        if want <= bound and not unsettled and not pending:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the PV controller did not settle the volume cases: claims "
                               f"not bound {sorted(want - bound)}, claims not in their "
                               f"phase {unsettled}, PVs pending {pending}")
        time.sleep(0.05)


def storage_barrier(runner: Runner, node: str, namespace: str, schedulers: Sequence[str]
                    ) -> None:
    """Return once each of `schedulers` has seen every PV, claim and StorageClass
    created so far, by the argument of `Runner.barrier` (each kind is a separate
    watch, delivered in order): per scheduler a claim of a WaitForFirstConsumer class
    whose only PV is on the barrier node, all three created last, and a pod using the
    claim that the scheduler binds only once it has all three (and the PV controller
    has bound the claim to the PV the scheduler chose). CSINodes have no such proof (a
    CSINode only ever rejects): they are created first of all, before the PV
    controller's binding is waited for. `cleanup_storage` removes the barrier's
    objects."""
    names = [f"{node}-volume-{i}" for i in range(len(schedulers))]
    runner.each(lambda item: _barrier_volume(runner, node, namespace, *item),
                list(zip(names, schedulers, strict=True)))
    # PreBind polls for the PV controller's binding once a second.
    deadline = time.monotonic() + runner.timeout + 5
    for name, scheduler in zip(names, schedulers, strict=True):
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        while not runner.client.request("GET", path)["spec"].get("nodeName"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{scheduler} did not bind the volume barrier pod {name}")
            time.sleep(0.05)


def _barrier_volume(runner: Runner, node: str, namespace: str, name: str, scheduler: str
                    ) -> None:
    """A class, a PV on `node` and a claim, all called `name`, and a pod for
    `scheduler` using the claim (`storage_barrier`)."""
    labels = {CASE_LABEL: node}
    runner.post(_PATHS[STORAGE_CLASS][1], {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name, "labels": labels}, "provisioner": NO_PROVISIONER,
        "volumeBindingMode": "WaitForFirstConsumer"})
    runner.post(_PATHS[PERSISTENT_VOLUME][1], {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": labels},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": name, "persistentVolumeReclaimPolicy": "Retain",
                 "local": {"path": "/mnt/barrier"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": HOSTNAME, "operator": "In", "values": [node]}]}]}}}})
    runner.post(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "labels": labels},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": name,
                 "resources": {"requests": {"storage": "1Gi"}}}})
    runner.create_pods([{
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {UNDER_TEST_LABEL: "barrier"}},
        "spec": {"schedulerName": scheduler, "nodeSelector": {HOSTNAME: node},
                 "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "c", "image": "registry/app:1"}],
                 "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": name}}]}}])


def read_storage(runner: Runner) -> StorageLists:
    """Every storage object the volume plugins read, as the API server holds it now
    (apiVersion and kind set: list items carry neither)."""
    out: StorageLists = {}
    for kind, (api_version, path) in _LISTS.items():
        items = runner.client.request("GET", path)["items"]
        for item in items:
            item["apiVersion"], item["kind"] = api_version, kind
        out[kind] = items
    return out


def attach(lists: StorageLists, storage: StorageObjects) -> None:
    """Put what `read_storage` read into a cluster's storage, as informers would."""
    for kind, items in lists.items():
        for item in items:
            storage.upsert(kind, item)


def cleanup_storage(runner: Runner, cases: Sequence[Case], namespaces: Sequence[str],
                    barriers: Sequence[str]) -> None:
    """Delete the claims of `namespaces`, and the cases' and barriers' classes, PVs
    (those the provisioner made for their claims too) and CSINodes, once their pods
    are gone. The protection controllers release claims and PVs as soon as nothing
    uses them; nothing waits for that: no later case can match them (classes are
    per case) or count them (only pods' volumes count)."""
    runner.each(lambda claim: _release(runner, claim), _terminating(cases))
    runner.each(lambda ns: runner.client.request(
        "DELETE", f"/api/v1/namespaces/{ns}/persistentvolumeclaims"), namespaces)
    prefixes = [c.prefix for c in cases] + list(barriers)
    if not prefixes:
        return
    selector = {"labelSelector": f"{CASE_LABEL} in ({','.join(prefixes)})"}
    for kind in (PERSISTENT_VOLUME, STORAGE_CLASS, CSI_NODE):
        runner.client.request("DELETE", _PATHS[kind][1], query=selector)
    owned = set(namespaces)
    provisioned = [
        pv["metadata"]["name"]
        for pv in runner.client.request("GET", "/api/v1/persistentvolumes")["items"]
        if ((pv["spec"].get("claimRef") or {}).get("namespace") in owned
            and CASE_LABEL not in (pv["metadata"].get("labels") or {}))]

    def delete_pv(name: str) -> None:
        try:
            runner.client.request("DELETE", f"/api/v1/persistentvolumes/{name}")
        except ApiError as err:
            if err.status != 404:
                raise

    runner.each(delete_pv, provisioned)


def _release(runner: Runner, claim: dict[str, Any]) -> None:
    """Drop the finalizers of a claim being deleted, so it goes; gone already is fine."""
    try:
        runner.client.request("PATCH", _claim_path(claim),
                              body={"metadata": {"finalizers": None}},
                              content_type="application/merge-patch+json")
    except ApiError as err:
        if err.status != 404:
            raise
