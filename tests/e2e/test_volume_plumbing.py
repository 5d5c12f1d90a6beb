"""The daemon's volume plumbing on the real API server, before any volume plugin: the
storage informers keep `cluster.storage` current (PVs, claims, StorageClasses, CSINodes,
CSIDrivers, CSIStorageCapacities, VolumeAttachments created, changed and deleted
through the API), and a
PreBind plugin of this file's own writes a PersistentVolume through the daemon's
BindingHandle: the write lands on the API server before the Binding, and a write the
server refuses fails PreBind with the server's message in the FailedScheduling event,
Unreserve having run once. Whole volume scenarios (VolumeBinding with the real PV
controller) live with the plugins.
"""

from __future__ import annotations

import contextlib
import copy
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from policyd.daemon.run import Daemon
from policyd.framework.cycle_state import CycleState
from policyd.framework.interfaces import BindingApiError, BindingHandle
from policyd.framework.status import Status
from policyd.kube.client import ApiError
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod
from policyd.model.storage import resource_version
from tests.binding_plugins import default_profile_with
from tests.e2e.helpers import Cluster, DaemonFactory, write_profile
from tests.polling import wait_for

Obj = dict[str, Any]
PV_ANNOTATION = "e2e.policyd.io/pv"  # which PV the test plugin writes for a pod
STALE = "e2e.policyd.io/stale"  # write it with a resourceVersion the server has passed


class WritesPV:
    """Reserve notes nothing; PreBind labels the PV the pod names with the pod's name
    through the handle, then waits (on the handle's clock) until the informer shows the
    written version, as VolumeBinding waits for the PV controller."""

    name = "TestWritesPV"

    def __init__(self) -> None:
        self.unreserved: list[str] = []

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.unreserved.append(pod.name)

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str,
                 handle: BindingHandle) -> Status | None:
        annotations = pod.raw.get("metadata", {}).get("annotations") or {}
        pv_name = annotations.get(PV_ANNOTATION)
        if not pv_name:
            return None

        def read(cluster: ClusterState) -> Obj | None:
            return cluster.storage.pvs.get(pv_name)

        current = handle.locked(read)
        if current is None:
            return Status.unschedulable(f"PV {pv_name} not found")
        pv = copy.deepcopy(current)
        pv["metadata"].setdefault("labels", {})["e2e.policyd.io/for"] = pod.name
        if STALE in annotations:
            pv["metadata"]["resourceVersion"] = "1"
        try:
            stored = handle.update(pv)
        except BindingApiError as exc:
            return Status.error(f"writing {pv_name}: {exc}")
        deadline = handle.now() + 20.0

        def caught_up(cluster: ClusterState) -> bool:
            shown = cluster.storage.pvs.api_object(pv_name)
            return shown is not None and resource_version(shown) >= resource_version(stored)

        while not handle.locked(caught_up):
            if handle.now() > deadline or handle.wait(0.1):
                return Status.error(f"the informer never showed {pv_name} written")
        return None


@pytest.fixture
def storage_names(cluster: Cluster) -> Iterator[dict[str, str]]:
    """Unique names for the cluster-scoped objects a test creates, deleted after it."""
    suffix = uuid.uuid4().hex[:6]
    names = {kind: f"e2e-{kind}-{suffix}"
             for kind in ("pv", "sc", "csinode", "csidriver", "attachment")}
    yield names
    for path in (f"/api/v1/persistentvolumes/{names['pv']}",
                 f"/apis/storage.k8s.io/v1/storageclasses/{names['sc']}",
                 f"/apis/storage.k8s.io/v1/csinodes/{names['csinode']}",
                 f"/apis/storage.k8s.io/v1/csidrivers/{names['csidriver']}",
                 f"/apis/storage.k8s.io/v1/volumeattachments/{names['attachment']}"):
        with contextlib.suppress(ApiError):  # a test deleted it already
            cluster.client.request("DELETE", path)


def _pv(name: str, sc: str) -> Obj:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "storageClassName": sc, "hostPath": {"path": "/tmp/e2e"}}}


def _stored(d: Daemon, what: str, key: str) -> Obj | None:
    with d.scheduler.lock:
        st = d.scheduler.cluster.storage
        holder: Any = {"pv": st.pvs, "pvc": st.pvcs, "sc": st.storage_classes,
                       "csinode": st.csi_nodes, "csidriver": st.csi_drivers,
                       "capacity": st.capacities,
                       "attachment": st.volume_attachments}[what]
        return holder.get(key)  # type: ignore[no-any-return]


def test_storage_informers_follow_the_api_server(cluster: Cluster, daemons: DaemonFactory,
                                                 tmp_path: Path,
                                                 storage_names: dict[str, str]) -> None:
    sched = f"policyd-{uuid.uuid4().hex[:6]}"
    d = daemons.start(write_profile(tmp_path, sched, policies=None))
    n, ns, api = storage_names, cluster.ns, cluster.client
    api.request("POST", "/apis/storage.k8s.io/v1/storageclasses", body={
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": n["sc"]}, "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer"})
    api.request("POST", "/api/v1/persistentvolumes", body=_pv(n["pv"], n["sc"]))
    api.request("POST", f"/api/v1/namespaces/{ns}/persistentvolumeclaims", body={
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": n["sc"],
                 "resources": {"requests": {"storage": "1Gi"}}}})
    api.request("POST", "/apis/storage.k8s.io/v1/csinodes", body={
        "apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
        "metadata": {"name": n["csinode"]},
        "spec": {"drivers": [{"name": n["csidriver"], "nodeID": "node-1",
                              "allocatable": {"count": 3}}]}})
    api.request("POST", "/apis/storage.k8s.io/v1/csidrivers", body={
        "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
        "metadata": {"name": n["csidriver"]}, "spec": {"storageCapacity": True}})
    api.request("POST", f"/apis/storage.k8s.io/v1/namespaces/{ns}/csistoragecapacities",
                body={"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
                      "metadata": {"name": "cap"}, "storageClassName": n["sc"],
                      "capacity": "10Gi"})
    api.request("POST", "/apis/storage.k8s.io/v1/volumeattachments", body={
        "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
        "metadata": {"name": n["attachment"]},
        "spec": {"attacher": n["csidriver"], "nodeName": "node-1",
                 "source": {"persistentVolumeName": n["pv"]}}})

    expected = {"sc": n["sc"], "pv": n["pv"], "pvc": f"{ns}/data",
                "csinode": n["csinode"], "csidriver": n["csidriver"],
                "capacity": f"{ns}/cap", "attachment": n["attachment"]}
    for what, key in expected.items():
        obj = wait_for(partial(_stored, d, what, key), 10, f"{what} {key} seen")
        assert obj["kind"]  # a PreBind plugin may write it back as it is
    csinode = _stored(d, "csinode", n["csinode"])
    assert csinode is not None
    assert csinode["spec"]["drivers"][0]["allocatable"] == {"count": 3}

    # A change replaces the stored version; a delete removes it.
    pv = api.request("GET", f"/api/v1/persistentvolumes/{n['pv']}")
    pv["metadata"].setdefault("labels", {})["tier"] = "gold"
    written = api.request("PUT", f"/api/v1/persistentvolumes/{n['pv']}", body=pv)
    wait_for(lambda: (_stored(d, "pv", n["pv"]) or {}).get("metadata", {})
             .get("labels", {}).get("tier") == "gold", 10, "the PV's new label")
    shown = _stored(d, "pv", n["pv"])
    assert shown is not None and resource_version(shown) >= resource_version(written)
    api.request("DELETE", f"/apis/storage.k8s.io/v1/csidrivers/{n['csidriver']}")
    wait_for(lambda: _stored(d, "csidriver", n["csidriver"]) is None, 10,
             "the CSIDriver gone")
    assert _stored(d, "csinode", n["csinode"]) is not None  # the others stay


def _with_plugin(d: Daemon, sched: str, plugin: WritesPV) -> None:
    """The daemon's profile for `sched`, with the test plugin at Reserve and PreBind."""
    base = d.scheduler.frameworks[sched]
    d.scheduler.set_frameworks({sched: default_profile_with(
        reserve=[plugin], pre_bind=[plugin], name=sched, base=base)})


def test_a_pre_bind_write_lands_before_the_binding(cluster: Cluster, daemons: DaemonFactory,
                                                   tmp_path: Path,
                                                   storage_names: dict[str, str]) -> None:
    sched = f"policyd-{uuid.uuid4().hex[:6]}"
    pv_name = storage_names["pv"]
    cluster.client.request("POST", "/api/v1/persistentvolumes",
                           body=_pv(pv_name, "manual"))
    cluster.node("n1")
    d = daemons.start(write_profile(tmp_path, sched, policies=None))
    wait_for(lambda: _stored(d, "pv", pv_name), 10, "the PV seen")
    plugin = WritesPV()
    _with_plugin(d, sched, plugin)

    cluster.pod("writer", sched, annotations={PV_ANNOTATION: pv_name})
    assert cluster.wait_bound("writer", 20) == "n1"
    stored = cluster.client.request("GET", f"/api/v1/persistentvolumes/{pv_name}")
    assert stored["metadata"]["labels"]["e2e.policyd.io/for"] == "writer"
    assert plugin.unreserved == []
    # PreBind waited for the informer: the daemon's copy is the written one.
    shown = _stored(d, "pv", pv_name)
    assert shown is not None and shown["metadata"]["labels"]["e2e.policyd.io/for"] == "writer"


def test_a_refused_pre_bind_write_unreserves_and_explains(
        cluster: Cluster, daemons: DaemonFactory, tmp_path: Path,
        storage_names: dict[str, str]) -> None:
    sched = f"policyd-{uuid.uuid4().hex[:6]}"
    pv_name = storage_names["pv"]
    cluster.client.request("POST", "/api/v1/persistentvolumes",
                           body=_pv(pv_name, "manual"))
    cluster.node("n1")
    d = daemons.start(write_profile(tmp_path, sched, policies=None))
    wait_for(lambda: _stored(d, "pv", pv_name), 10, "the PV seen")
    plugin = WritesPV()
    _with_plugin(d, sched, plugin)

    pod = cluster.pod("stale", sched, annotations={PV_ANNOTATION: pv_name, STALE: "yes"})
    events = wait_for(lambda: cluster.events(pod="stale", reason="FailedScheduling"), 20,
                      "FailedScheduling for the refused write")
    message = events[0]["message"]
    # The server's own 409 message, inside upstream's PreBind error wording.
    assert message.startswith(f'running PreBind plugin "TestWritesPV": writing {pv_name}: '
                              f'Operation cannot be fulfilled on persistentvolumes '
                              f'"{pv_name}"'), message
    cond = wait_for(lambda: cluster.condition("stale"), 10, "PodScheduled condition")
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "False", "SchedulerError", message)
    assert "stale" in plugin.unreserved
    assert cluster.node_of("stale") is None
    with d.scheduler.lock:
        uid = pod["metadata"]["uid"]
        assert uid not in d.scheduler.assumed
        assert d.scheduler.cluster.node_of(uid) is None
    # The write never happened.
    stored = cluster.client.request("GET", f"/api/v1/persistentvolumes/{pv_name}")
    assert "e2e.policyd.io/for" not in (stored["metadata"].get("labels") or {})
