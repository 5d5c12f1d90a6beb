"""PreBind: the chosen bindings written through the BindingHandle, then the wait for
the PV controller. The handle here is a test double of the handle (not of the API
server): its `update` stores the object in the ClusterState as the informer would
show it, and a stand-in for the PV controller binds the claims after N waits."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from policyd.engine.cycle import reserve, schedule_one
from policyd.framework.interfaces import BindingApiError
from policyd.framework.runtime import Framework
from policyd.framework.status import Status
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod
from policyd.plugins.volumebinding.plugin import new
from tests.builders import make_pod
from tests.unit.plugins.volumebinding.storage import cluster, node, pv, pvc, storage_class

T = TypeVar("T")

_rv = itertools.count(1000)


class Handle:
    """Applies updates to the cluster (the informer's view of a write), and binds the
    claims as the PV controller would after `bind_after` waits (never when None)."""

    def __init__(self, state: ClusterState, *, bind_after: int | None = 2,
                 fail_on: str | None = None, stop_after: int | None = None,
                 controller: Callable[[ClusterState], None] | None = None) -> None:
        self.state = state
        self.bind_after = bind_after
        self.fail_on = fail_on
        self.stop_after = stop_after
        self.controller = controller or bind_claims
        self.clock = 0.0
        self.waits = 0
        self.updated: list[str] = []

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        name = obj["metadata"]["name"]
        if name == self.fail_on:
            raise BindingApiError(f'Operation cannot be fulfilled on {obj["kind"]} "{name}"')
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(next(_rv))
        self.state.storage.upsert(obj["kind"], stored)
        self.updated.append(f'{obj["kind"]}/{name}')
        return copy.deepcopy(stored)

    def locked(self, fn: Callable[[ClusterState], T]) -> T:
        return fn(self.state)

    def wait(self, seconds: float) -> bool:
        self.clock += seconds
        self.waits += 1
        if self.waits == self.bind_after:
            self.controller(self.state)
        return self.stop_after is not None and self.waits >= self.stop_after

    def now(self) -> float:
        return self.clock


def _bump(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["resourceVersion"] = str(next(_rv))
    return obj


def bind_claims(state: ClusterState) -> None:
    """The PV controller: every PV whose claimRef names a claim gets it bound; a claim
    to provision (selected-node set) gets a new PV on that node."""
    storage = state.storage
    for volume in list(storage.pvs.values()):
        ref = volume["spec"].get("claimRef")
        if not ref:
            continue
        claim = storage.pvcs.api_object(f'{ref["namespace"]}/{ref["name"]}')
        if claim is None or claim["spec"].get("volumeName"):
            continue
        _bind(state, claim, volume)
    for claim in list(storage.pvcs.values()):
        selected = (claim["metadata"].get("annotations") or {}).get(
            "volume.kubernetes.io/selected-node")
        if selected and not claim["spec"].get("volumeName"):
            created = pv(f'pvc-{claim["metadata"]["uid"]}', node=selected, phase="Bound",
                         claim=claim)
            storage.upsert("PersistentVolume", created)
            _bind(state, storage.pvcs.api_object(f'default/{claim["metadata"]["name"]}')
                  or claim, created)


def _bind(state: ClusterState, claim: dict[str, Any], volume: dict[str, Any]) -> None:
    claim = _bump(copy.deepcopy(claim))
    claim["spec"]["volumeName"] = volume["metadata"]["name"]
    claim["metadata"].setdefault("annotations", {})["pv.kubernetes.io/bind-completed"] = "yes"
    state.storage.upsert("PersistentVolumeClaim", claim)
    volume = _bump(copy.deepcopy(volume))
    volume["status"] = {"phase": "Bound"}
    state.storage.upsert("PersistentVolume", volume)


def scheduled(state: ClusterState, pod: Pod, timeout: int = 600
              ) -> tuple[Framework, Any]:
    plugin = new({"bindTimeoutSeconds": timeout})
    fw = Framework("p", pre_filter=[plugin], filter=[plugin], reserve=[plugin],
                   pre_bind=[plugin])
    result = schedule_one(fw, pod, state)
    assert result.node is not None
    state.assume(pod, result.node)
    result = reserve(fw, result)
    assert result.node is not None and result.cycle_state is not None
    return fw, result


def static_cluster() -> ClusterState:
    return cluster(node("n1"), objects=(pvc("a"), pv("v1", node="n1")))


def test_static_binding_is_written_and_waited_for() -> None:
    state = static_cluster()
    pod = make_pod("p").pvc("a").obj()
    fw, result = scheduled(state, pod)
    handle = Handle(state, bind_after=3)
    assert fw.run_pre_bind(result.cycle_state, pod, "n1", handle) is None
    assert handle.updated == ["PersistentVolume/v1"]
    assert handle.waits == 3  # the first check only after a full poll period
    claim = state.storage.pvcs.api_object("default/a")
    assert claim is not None and claim["spec"]["volumeName"] == "v1"
    # The written PV carries the claimRef Reserve assumed.
    written = state.storage.pvs.api_object("v1")
    assert written is not None and written["spec"]["claimRef"]["name"] == "a"


def test_provisioning_is_written_and_waited_for() -> None:
    state = cluster(node("n1"), objects=(pvc("a"),), classes=(
        storage_class("wait", provisioner="csi.example.com"),))
    pod = make_pod("p").pvc("a").obj()
    fw, result = scheduled(state, pod)
    handle = Handle(state, bind_after=1)
    assert fw.run_pre_bind(result.cycle_state, pod, "n1", handle) is None
    assert handle.updated == ["PersistentVolumeClaim/a"]
    claim = state.storage.pvcs.api_object("default/a")
    assert claim is not None
    assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "n1"


def test_all_bound_pod_writes_nothing() -> None:
    state = cluster(node("n1"), objects=(pvc("a", volume="v1", bound=True),
                                         pv("v1", node="n1", phase="Bound")))
    pod = make_pod("p").pvc("a").obj()
    fw, result = scheduled(state, pod)
    handle = Handle(state)
    assert fw.run_pre_bind(result.cycle_state, pod, "n1", handle) is None
    assert handle.updated == [] and handle.waits == 0


def test_never_bound_times_out_with_upstreams_error() -> None:
    state = static_cluster()
    pod = make_pod("p").pvc("a").obj()
    fw, result = scheduled(state, pod, timeout=5)
    handle = Handle(state, bind_after=None)
    status = fw.run_pre_bind(result.cycle_state, pod, "n1", handle)
    assert status == Status.error(
        'running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded'
    ).with_plugin("VolumeBinding")
    assert handle.clock == pytest.approx(5.0)
    # Unreserve after the failure leaves nothing assumed.
    fw.run_unreserve(result.cycle_state, pod, "n1")
    assert not state.storage.pvs.is_assumed("v1")


def test_zero_timeout_gives_up_at_once() -> None:
    state = static_cluster()
    pod = make_pod("p").pvc("a").obj()
    fw, result = scheduled(state, pod, timeout=0)
    handle = Handle(state)
    status = fw.run_pre_bind(result.cycle_state, pod, "n1", handle)
    assert status is not None and status.message.endswith("context deadline exceeded")
    assert handle.waits == 0


def test_update_error_is_returned_and_unwritten_assumptions_undone() -> None:
    state = cluster(node("n1"), objects=(pvc("a"), pvc("b"), pv("v1", node="n1"),
                                         pv("v2", "2Gi", node="n1")))
    pod = make_pod("p").pvc("a").pvc("b").obj()
    fw, result = scheduled(state, pod)
    assert state.storage.pvs.is_assumed("v2")
    handle = Handle(state, fail_on="v2")
    status = fw.run_pre_bind(result.cycle_state, pod, "n1", handle)
    assert status is not None and status.message == (
        'running PreBind plugin "VolumeBinding": Operation cannot be fulfilled on '
        'PersistentVolume "v2"')
    assert handle.updated == ["PersistentVolume/v1"]
    assert not state.storage.pvs.is_assumed("v2")
    fw.run_unreserve(result.cycle_state, pod, "n1")
    assert not state.storage.pvs.is_assumed("v1")


def test_stopping_scheduler_gives_up() -> None:
    state = static_cluster()
    pod = make_pod("p").pvc("a").obj()
    fw, result = scheduled(state, pod)
    status = fw.run_pre_bind(result.cycle_state, pod, "n1",
                             Handle(state, bind_after=None, stop_after=2))
    assert status is not None and status.message.endswith("binding volumes: context canceled")


def test_selected_node_removed_means_provisioning_failed() -> None:
    def provisioner_gives_up(state: ClusterState) -> None:
        claim = copy.deepcopy(state.storage.pvcs.api_object("default/a"))
        assert claim is not None
        claim["metadata"]["annotations"].pop("volume.kubernetes.io/selected-node")
        state.storage.upsert("PersistentVolumeClaim", _bump(claim))

    state = cluster(node("n1"), objects=(pvc("a"),), classes=(
        storage_class("wait", provisioner="csi.example.com"),))
    pod = make_pod("p").pvc("a").obj()
    fw, result = scheduled(state, pod)
    status = fw.run_pre_bind(result.cycle_state, pod, "n1",
                             Handle(state, bind_after=1, controller=provisioner_gives_up))
    assert status is not None and status.message == (
        'running PreBind plugin "VolumeBinding": binding volumes: provisioning failed for '
        'PVC "a"')


def test_claim_ref_reset_by_the_controller_fails_binding() -> None:
    def controller_unbinds(state: ClusterState) -> None:
        volume = copy.deepcopy(state.storage.pvs.api_object("v1"))
        assert volume is not None
        del volume["spec"]["claimRef"]
        state.storage.upsert("PersistentVolume", _bump(volume))

    state = static_cluster()
    pod = make_pod("p").pvc("a").obj()
    fw, result = scheduled(state, pod)
    status = fw.run_pre_bind(result.cycle_state, pod, "n1",
                             Handle(state, bind_after=1, controller=controller_unbinds))
    assert status is not None and status.message.endswith(
        'binding volumes: ClaimRef got reset for pv "v1"')


def test_pod_deleted_during_pre_bind() -> None:
    state = static_cluster()
    pod = make_pod("p").pvc("a").obj()
    fw, result = scheduled(state, pod)

    def deleted(state: ClusterState) -> None:
        state.remove_pod(pod.uid)

    status = fw.run_pre_bind(result.cycle_state, pod, "n1",
                             Handle(state, bind_after=1, controller=deleted))
    assert status is not None and status.message.endswith(
        'binding volumes: pod does not exist any more: pod "p" not found')
    fw.run_unreserve(result.cycle_state, pod, "n1")
    assert not state.storage.pvs.is_assumed("v1")
