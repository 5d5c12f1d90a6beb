"""DynamicResources' PreBind (bindClaim and the wait for binding conditions, v1.36.3)
through a fake binding handle: what is written, in which order, what the claim
tracker then holds, and upstream's errors."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from policyd.engine.cycle import ScheduleResult, reserve, schedule_one
from policyd.framework import Code
from policyd.framework.interfaces import BindingApiError
from policyd.model.cluster import ClusterState
from policyd.plugins.dynamicresources.args import parse_args
from policyd.plugins.dynamicresources.plugin import DynamicResources
from policyd.plugins.dynamicresources.prebind import CLAIM_FINALIZER, NO_STATUS_WRITER
from tests.unit.plugins.dynamicresources.scene import (
    DRIVER,
    claim,
    cluster,
    dra,
    framework,
    gpu_class,
    gpu_slice,
    nodes,
    pod_using,
    stored_claim,
)

T = TypeVar("T")
Obj = dict[str, Any]


class Handle:
    """Records writes; the server bumps resourceVersion and keeps what it stored (read
    back by `get`); waits advance a fake clock. `fail` makes every write of that kind
    conflict, `conflicts` only the first that many; `meanwhile` is what a concurrent
    writer leaves on the server before a conflicting write is answered. `on_wait` may
    change the cluster between polls (a driver setting conditions)."""

    def __init__(self, state: ClusterState, *, fail: str | None = None, conflicts: int = 0,
                 meanwhile: Callable[[Obj], None] | None = None,
                 on_wait: Callable[[ClusterState], None] | None = None) -> None:
        self.state = state
        self.fail = fail
        self.conflicts = conflicts
        self.meanwhile = meanwhile
        self.on_wait = on_wait
        self.writes: list[tuple[str, Obj]] = []
        self.patches: list[tuple[str, Obj]] = []
        self.reads = 0
        self.server: dict[str, Obj] = {}
        self.clock = 0.0

    def _key(self, obj: Obj) -> str:
        return f'{obj["metadata"]["namespace"]}/{obj["metadata"]["name"]}'

    def _store(self, how: str, obj: Obj) -> Obj:
        if self.fail == how or self.conflicts > 0:
            self.conflicts = max(0, self.conflicts - 1)
            if self.meanwhile is not None:
                key = self._key(obj)
                changed = copy.deepcopy(self.server.get(key) or stored_claim(self.state, key))
                self.meanwhile(changed)
                self.server[key] = changed
            raise BindingApiError('Operation cannot be fulfilled on resourceclaims.'
                                  'resource.k8s.io "c1": the object has been modified',
                                  conflict=True)
        self.writes.append((how, obj))
        stored = copy.deepcopy(obj)
        meta = stored["metadata"]
        meta["resourceVersion"] = str(int(meta.get("resourceVersion") or "0") + 1)
        self.server[self._key(stored)] = copy.deepcopy(stored)
        return stored

    def update(self, obj: Obj) -> Obj:
        return self._store("update", obj)

    def update_status(self, obj: Obj) -> Obj:
        return self._store("status", obj)

    def patch_status(self, obj: Obj, patch: Obj) -> Obj:
        if self.fail == "patch":
            raise BindingApiError("the server is unavailable")
        self.patches.append((self._key(obj), patch))
        return obj

    def get(self, obj: Obj) -> Obj:
        self.reads += 1
        key = self._key(obj)
        return copy.deepcopy(self.server.get(key) or stored_claim(self.state, key))

    def locked(self, fn: Callable[[ClusterState], T]) -> T:
        return fn(self.state)

    def wait(self, seconds: float) -> bool:
        self.clock += seconds
        if self.on_wait is not None:
            self.on_wait(self.state)
        return False

    def now(self) -> float:
        return self.clock


class NoStatusHandle(Handle):
    update_status = None  # type: ignore[assignment]


def test_unreserve_patches_the_pod_out_of_what_prebind_reserved(
        caplog: pytest.LogCaptureFixture) -> None:
    """Upstream's Unreserve: a strategic-merge patch deleting the pod's reservedFor
    entry, guarded by the claim's uid; nothing for a claim PreBind did not reserve."""
    state, plugin, r = _reserved()
    assert r.cycle_state is not None
    handle = Handle(state)
    plugin.undo_pre_bind(r.cycle_state, r.pod, "n1", handle)
    assert handle.patches == []  # PreBind has not written anything yet
    assert plugin.pre_bind(r.cycle_state, r.pod, "n1", handle) is None
    plugin.unreserve(r.cycle_state, r.pod, "n1")
    plugin.undo_pre_bind(r.cycle_state, r.pod, "n1", handle)
    assert handle.patches == [("default/c1", {
        "metadata": {"uid": "uid-c1"},
        "status": {"reservedFor": [{"$patch": "delete", "uid": "pod-uid-p"}]}})]
    # A failed patch is logged, never raised (the next attempt reuses the claim).
    handle.fail = "patch"
    plugin.undo_pre_bind(r.cycle_state, r.pod, "n1", handle)
    assert "removing default/p from the reservedFor of ResourceClaim default/c1 " \
           "failed: the server is unavailable" in caplog.text


def _reserved(slice_devices: list[Obj] | None = None, **args: Any
              ) -> tuple[ClusterState, DynamicResources, ScheduleResult]:
    node_slice = gpu_slice("n1", "g0")
    if slice_devices is not None:
        node_slice["spec"]["devices"] = slice_devices
    state = cluster(nodes("n1"), classes=[gpu_class()], slices=[node_slice],
                    claims=[claim("c1")])
    plugin = DynamicResources(parse_args(args or None))
    fw = framework(plugin)
    r = reserve(fw, schedule_one(fw, pod_using("p", "c1").obj(), state))
    assert r.node == "n1" and r.cycle_state is not None
    return state, plugin, r


def test_writes_the_finalizer_then_allocation_and_reservation() -> None:
    state, plugin, r = _reserved()
    assert r.cycle_state is not None
    handle = Handle(state)
    assert plugin.pre_bind(r.cycle_state, r.pod, "n1", handle) is None
    (how1, first), (how2, second) = handle.writes
    assert how1 == "update" and first["metadata"]["finalizers"] == [CLAIM_FINALIZER]
    assert "status" not in first or not first["status"].get("allocation")
    assert how2 == "status"
    allocation = second["status"]["allocation"]
    assert allocation["devices"]["results"] == [
        {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "g0"}]
    assert allocation["allocationTimestamp"].endswith("Z")
    assert second["status"]["reservedFor"] == [
        {"resource": "pods", "name": "p", "uid": "pod-uid-p"}]
    # The tracker shows the written claim (assumed), and nothing is in flight any more.
    store = dra(state)
    assert stored_claim(state, "default/c1")["status"]["reservedFor"][0]["uid"] == "pod-uid-p"
    assert store.claims.pending_allocation("uid-c1") is None
    # Another pod now finds the device taken by the allocated claim, not in flight.
    state2 = schedule_one(framework(DynamicResources(parse_args(None))),
                          pod_using("q", "c1").obj(), state)
    assert state2.node == "n1"  # sharing the allocated claim is allowed


def test_without_a_status_writer_prebind_fails_and_the_allocation_is_withdrawn() -> None:
    state, plugin, r = _reserved()
    assert r.cycle_state is not None
    status = plugin.pre_bind(r.cycle_state, r.pod, "n1", NoStatusHandle(state))
    assert status is not None and status.code is Code.ERROR
    assert status.reasons == (NO_STATUS_WRITER,)
    store = dra(state)
    assert store.claims.pending_allocation("uid-c1") is None


@pytest.mark.parametrize(("fail", "message"), [
    ("update", 'add finalizer to claim default/c1: Operation cannot be fulfilled on '
               'resourceclaims.resource.k8s.io "c1": the object has been modified'),
    ("status", 'add allocation and reservation to claim default/c1: Operation cannot be '
               'fulfilled on resourceclaims.resource.k8s.io "c1": the object has been '
               'modified'),
])
def test_a_failed_write_is_upstreams_error(fail: str, message: str) -> None:
    state, plugin, r = _reserved()
    assert r.cycle_state is not None
    handle = Handle(state, fail=fail)
    status = plugin.pre_bind(r.cycle_state, r.pod, "n1", handle)
    assert status is not None and status.reasons == (message,)
    # A conflict is retried on the claim read again, five attempts in all (DefaultRetry).
    assert handle.reads == 4
    assert dra(state).claims.pending_allocation("uid-c1") is None


def test_a_conflict_is_retried_on_the_claim_read_again() -> None:
    """The claim controller added a label meanwhile: the write is made again on the
    version read back, keeping that change."""
    state, plugin, r = _reserved()
    assert r.cycle_state is not None

    def labelled(obj: Obj) -> None:
        obj["metadata"]["labels"] = {"by": "controller"}
        obj["metadata"]["resourceVersion"] = "5"

    handle = Handle(state, conflicts=1, meanwhile=labelled)
    assert plugin.pre_bind(r.cycle_state, r.pod, "n1", handle) is None
    assert handle.reads == 1
    (_, finalized), (_, bound) = handle.writes
    assert finalized["metadata"]["labels"] == {"by": "controller"}
    assert bound["status"]["reservedFor"] == [
        {"resource": "pods", "name": "p", "uid": "pod-uid-p"}]
    assert stored_claim(state, "default/c1")["metadata"]["labels"] == {"by": "controller"}


def test_a_claim_allocated_elsewhere_meanwhile_is_not_overwritten() -> None:
    state, plugin, r = _reserved()
    assert r.cycle_state is not None

    def allocated(obj: Obj) -> None:
        obj.setdefault("status", {})["allocation"] = {"devices": {"results": []}}

    handle = Handle(state, conflicts=1, meanwhile=allocated)
    status = plugin.pre_bind(r.cycle_state, r.pod, "n1", handle)
    assert status is not None and status.reasons == (
        "claim default/c1 got allocated elsewhere in the meantime",)
    assert handle.writes == []
    assert dra(state).claims.pending_allocation("uid-c1") is None


def _conditions(status: str, failed: str = "False") -> Callable[[ClusterState], None]:
    def set_conditions(state: ClusterState) -> None:
        store = dra(state)
        current = copy.deepcopy(stored_claim(state, "default/c1"))
        current["status"]["devices"] = [{
            "driver": DRIVER, "pool": "n1", "device": "g0",
            "conditions": [{"type": "Attached", "status": status},
                           {"type": "Failed", "status": failed, "reason": "NoPort",
                            "message": "port busy"}]}]
        current["metadata"]["resourceVersion"] = "9"
        store.claims.assume(current)
    return set_conditions


GATED = [{"name": "g0", "bindingConditions": ["Attached"],
          "bindingFailureConditions": ["Failed"], "bindsToNode": True}]


@pytest.mark.parametrize(("on_wait", "message", "waited"), [
    (_conditions("True"), None, 5.0),
    (_conditions("False"), "device binding timeout: context deadline exceeded", 60.0),
    (_conditions("False", failed="True"),
     'device binding failed: claim=c1, reason=NoPort, message="port busy"', 5.0),
])
def test_prebind_waits_for_binding_conditions(on_wait: Callable[[ClusterState], None],
                                              message: str | None, waited: float) -> None:
    state, plugin, r = _reserved(GATED, bindingTimeout="1m")
    assert r.cycle_state is not None
    handle = Handle(state, on_wait=on_wait)
    status = plugin.pre_bind(r.cycle_state, r.pod, "n1", handle)
    if message is None:
        assert status is None
    else:
        assert status is not None and status.reasons == (message,)
    assert handle.clock == waited
