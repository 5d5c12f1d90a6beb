"""DynamicResources with DRA-backed extended resources (DRAExtendedResource, v1.36.3
`extendeddynamicresources.go`): the requests and mappings built per container
(upstream's Test_createRequestsAndMappings cases), then each extension point with the
cases of upstream's TestPlugin `extended-resource-*` rows, in tables of our own."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import pytest

from policyd.engine.cycle import ScheduleResult, reserve, schedule_one
from policyd.features import with_settings
from policyd.framework import Code, CycleState
from policyd.framework.interfaces import BindingApiError
from policyd.model.cluster import ClusterState
from policyd.model.dra_objects import RESOURCE_CLAIM
from policyd.model.records import Node
from policyd.plugins.dynamicresources.extended import (
    CLAIM_ANNOTATION,
    IN_MEMORY_NAME,
    requests_and_mappings,
)
from policyd.plugins.dynamicresources.plugin import (
    EXTENDED_KEY,
    DynamicResources,
    extended_claim_to_delete,
    new,
)
from policyd.plugins.dynamicresources.prebind import CLAIM_FINALIZER
from tests.builders import make_node, make_pod
from tests.unit.plugins.dynamicresources.scene import (
    DRIVER,
    cluster,
    framework,
    gpu_class,
    gpu_slice,
    stored_claim,
)
from tests.unit.plugins.dynamicresources.test_prebind import Handle

Obj = dict[str, Any]
GPU = "example.com/gpu"
POD_UID = "pod-uid-p"


def mapped_class(name: str = "gpu", resource: str | None = GPU) -> Obj:
    cls = gpu_class(name)
    if resource is not None:
        cls["spec"]["extendedResourceName"] = resource
    return cls


class Classes:
    """A DeviceClass resolver over a plain mapping (resource name -> class name)."""

    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = mapping

    def for_extended_resource(self, resource_name: str) -> Obj | None:
        name = self.mapping.get(resource_name)
        return None if name is None else {"metadata": {"name": name}}


# -- requests and mappings ------------------------------------------------------------

EXT, EXT1, EXT_INIT = "example.com/gpu", "example.com/gpu1", "example.com/gpuinit"


def _pod(containers: list[dict[str, str]],
         inits: Sequence[tuple[dict[str, str], bool]] = ()) -> Any:
    b = make_pod("p").containers(*containers)
    for requests, sidecar in inits:
        b = b.init_container(requests, sidecar=sidecar)
    return b.obj()


REQUEST_CASES = [
    ("one resource", _pod([{EXT: "1", EXT1: "2"}]), {EXT: 1}, {EXT: "class"},
     [("container-0-request-0", "class", 1)]),
    ("one resource mapped, one not", _pod([{EXT: "1", EXT1: "2"}]), {EXT: 1, EXT1: 2},
     {EXT: "class"}, [("container-0-request-0", "class", 1)]),
    ("two resources", _pod([{EXT: "1", EXT1: "2"}]), {EXT: 1, EXT1: 2},
     {EXT: "class", EXT1: "class1"},
     [("container-0-request-0", "class", 1), ("container-0-request-1", "class1", 2)]),
    ("two containers", _pod([{EXT: "1"}, {EXT1: "2"}]), {EXT: 1, EXT1: 2},
     {EXT: "class", EXT1: "class1"},
     [("container-0-request-0", "class", 1), ("container-1-request-0", "class1", 2)]),
    ("an init container and a regular one", _pod([{EXT: "1"}], [({EXT_INIT: "2"}, False)]),
     {EXT: 1, EXT_INIT: 2}, {EXT: "class", EXT_INIT: "classInit"},
     [("container-0-request-0", "classInit", 2), ("container-1-request-0", "class", 1)]),
    ("two init containers: only the largest request stays",
     _pod([{EXT: "1"}], [({EXT_INIT: "1"}, False), ({EXT_INIT: "2"}, False)]),
     {EXT: 1, EXT_INIT: 2}, {EXT: "class", EXT_INIT: "classInit"},
     [("container-1-request-0", "classInit", 2), ("container-2-request-0", "class", 1)]),
    ("an init container reuses a later sidecar's request",
     _pod([{EXT: "1"}], [({EXT_INIT: "1"}, False), ({EXT_INIT: "1"}, True),
                         ({EXT_INIT: "2"}, False)]),
     {EXT: 1, EXT_INIT: 2}, {EXT: "class", EXT_INIT: "classInit"},
     [("container-1-request-0", "classInit", 1), ("container-2-request-0", "classInit", 2),
      ("container-3-request-0", "class", 1)]),
]


@pytest.mark.parametrize(("pod", "resources", "classes", "want"),
                         [c[1:] for c in REQUEST_CASES], ids=[c[0] for c in REQUEST_CASES])
def test_requests(pod: Any, resources: dict[str, int], classes: dict[str, str],
                  want: list[tuple[str, str, int]]) -> None:
    requests, _ = requests_and_mappings(pod, resources, Classes(classes))
    assert [(r["name"], r["exactly"]["deviceClassName"], r["exactly"]["count"])
            for r in requests] == want
    assert all(r["exactly"]["allocationMode"] == "ExactCount" for r in requests)


def test_mappings_with_sidecar_and_init_containers() -> None:
    pod = _pod([{EXT: "1"}], [({EXT_INIT: "1"}, False), ({EXT_INIT: "1"}, True),
                              ({EXT_INIT: "2"}, False)])
    _, mappings = requests_and_mappings(pod, {EXT: 1, EXT_INIT: 2},
                                        Classes({EXT: "class", EXT_INIT: "classInit"}))
    assert [(m["containerName"], m["resourceName"], m["requestName"]) for m in mappings] == [
        ("c0", EXT, "container-3-request-0"),
        ("init1", EXT_INIT, "container-1-request-0"),  # the sidecar, long-lived
        ("init0", EXT_INIT, "container-1-request-0"),  # reuses the sidecar's
        ("init2", EXT_INIT, "container-2-request-0"),
    ]


def test_two_init_requests_map_to_the_largest() -> None:
    pod = _pod([{EXT: "1"}], [({EXT_INIT: "1"}, False), ({EXT_INIT: "2"}, False)])
    _, mappings = requests_and_mappings(pod, {EXT: 1, EXT_INIT: 2},
                                        Classes({EXT: "class", EXT_INIT: "classInit"}))
    assert [(m["containerName"], m["requestName"]) for m in mappings] == [
        ("c0", "container-2-request-0"), ("init0", "container-1-request-0"),
        ("init1", "container-1-request-0")]


# -- the extension points -------------------------------------------------------------

def node(name: str, **allocatable: str) -> Node:
    b = make_node(name).capacity({"cpu": "8", "memory": "16Gi", "pods": "20", **allocatable})
    return b.label("kubernetes.io/hostname", name).obj()


def scene(*, gpus: int = 2, device_plugin: bool = False, claims: tuple[Obj, ...] = ()
          ) -> ClusterState:
    """n1 has `gpus` DRA devices; n2 has none (and lists the resource as its device
    plugin's when `device_plugin`)."""
    n2 = node("n2", **({GPU: "4"} if device_plugin else {}))
    return cluster([node("n1"), n2], classes=[mapped_class()],
                   slices=[gpu_slice("n1", *(f"g{i}" for i in range(gpus)))], claims=claims)


def gpu_pod(count: int = 1, name: str = "p", uid: str = POD_UID,
            more: dict[str, str] | None = None) -> Any:
    return make_pod(name).set("metadata.uid", uid).containers({GPU: str(count),
                                                               **(more or {})})


def run(state: ClusterState, pod: Any, plugin: DynamicResources | None = None
        ) -> ScheduleResult:
    return schedule_one(framework(plugin or new()), pod.obj(), state)


def statuses(result: ScheduleResult) -> dict[str, tuple[Code, tuple[str, ...]]]:
    assert result.diagnosis is not None
    return {n: (s.code, s.reasons) for n, s in result.diagnosis.node_to_status.items()}


def test_prefilter_skips_a_pod_whose_resources_no_class_serves() -> None:
    state = scene()
    pod = make_pod("p").containers({"example.com/other": "1"}).obj()
    cycle = CycleState(state.node_infos(), state)
    _, status = new().pre_filter(cycle, pod, state.node_infos())
    assert status is not None and status.is_skip


def test_gate_off_leaves_the_resource_alone() -> None:
    state = scene()
    plugin = new(features=with_settings([("DRAExtendedResource", False)]))
    cycle = CycleState(state.node_infos(), state)
    _, status = plugin.pre_filter(cycle, gpu_pod().obj(), state.node_infos())
    assert status is not None and status.is_skip


def test_filter_allocates_where_devices_are() -> None:
    """n1's slice gives the device; n2 has no devices and no device plugin."""
    result = run(scene(), gpu_pod())
    assert result.node == "n1"
    assert result.cycle_state is not None
    ext = result.cycle_state.get(EXTENDED_KEY)
    chosen = ext.node_claims["n1"]
    assert chosen.obj["spec"]["devices"]["requests"] == [{
        "name": "container-0-request-0",
        "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}]
    assert [d.device for d in chosen.allocation.devices] == ["g0"]
    assert chosen.mappings == [{"containerName": "c0", "resourceName": GPU,
                                "requestName": "container-0-request-0"}]


def test_no_devices_anywhere_cannot_allocate() -> None:
    result = run(scene(gpus=1), gpu_pod(2))
    assert result.node is None
    unresolvable = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert statuses(result) == {"n1": (unresolvable, ("cannot allocate all claims",)),
                                "n2": (unresolvable, ("cannot allocate all claims",))}
    assert result.cycle_state is not None
    assert extended_claim_to_delete(result.cycle_state) is None


def test_device_plugin_node_needs_no_claim() -> None:
    """extended-resource-name-with-node-resource: the node lists it; nothing to allocate."""
    state = scene(gpus=0, device_plugin=True)
    result = run(state, gpu_pod())
    assert result.node == "n2"
    assert result.cycle_state is not None
    ext = result.cycle_state.get(EXTENDED_KEY)
    assert "n2" not in ext.node_claims and ext.reserved is None
    assert list(state.dra.claims.pending_allocations()) == []


def test_a_request_neither_listed_nor_served_cannot_fit() -> None:
    result = run(scene(), gpu_pod(more={"example.com/other": "1"}))
    assert result.node is None
    assert set(statuses(result).values()) == {(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                               ("cannot fit resource",))}


def stale_claim(node_name: str = "n1") -> Obj:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "p-extended-resources-abcde", "namespace": "default",
                         "uid": "uid-stale", "resourceVersion": "3",
                         "annotations": {CLAIM_ANNOTATION: "true"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p",
                                              "uid": POD_UID, "controller": True}]},
            "spec": {"devices": {"requests": [{"name": "container-0-request-0", "exactly": {
                "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}]}}}


def test_claim_from_an_earlier_attempt_is_deleted() -> None:
    """extended-resource-name-with-resources-has-claim: Filter rejects every node,
    PostFilter chooses the claim for deletion."""
    result = run(scene(claims=(stale_claim(),)), gpu_pod())
    assert result.node is None
    assert set(statuses(result).values()) == {(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                               ("cannot schedule extended resource claim",))}
    assert result.cycle_state is not None
    deleted = extended_claim_to_delete(result.cycle_state)
    assert deleted is not None and deleted["metadata"]["name"] == "p-extended-resources-abcde"
    assert "deletion of ResourceClaim completed" in result.message


def test_another_pods_claim_is_not_taken_for_this_ones() -> None:
    other = stale_claim()
    other["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    assert run(scene(claims=(other,)), gpu_pod()).node == "n1"


def _reserved(state: ClusterState, pod: Any, plugin: DynamicResources
              ) -> ScheduleResult:
    fw = framework(plugin)
    record = pod.obj()
    result = schedule_one(fw, record, state)
    assert result.node is not None
    state.assume(record, result.node)
    return reserve(fw, result)


def test_reserve_keeps_the_devices_in_flight_and_unreserve_frees_them() -> None:
    state = scene(gpus=1)
    plugin = new()
    first = _reserved(state, gpu_pod(), plugin)
    assert first.node == "n1"
    pending = list(state.dra.claims.pending_allocations())
    assert [p["metadata"]["name"] for p in pending] == [IN_MEMORY_NAME]
    # The only device is in flight: the next pod finds none.
    assert run(state, gpu_pod(name="q", uid="uid-q")).node is None
    assert first.cycle_state is not None
    plugin.unreserve(first.cycle_state, first.pod, "n1")
    assert list(state.dra.claims.pending_allocations()) == []
    assert run(state, gpu_pod(name="q", uid="uid-q")).node == "n1"


class ApiHandle(Handle):
    """The PreBind handle with creation, deletion and the pod status patch; `informer`
    delivers each created claim to the cluster state (as the informer would)."""

    def __init__(self, state: ClusterState, *, informer: bool = True,
                 fail_create: bool = False) -> None:
        super().__init__(state)
        self.informer = informer
        self.fail_create = fail_create
        self.created: list[Obj] = []
        self.deleted: list[str] = []
        self.pod_patches: list[tuple[str, Obj]] = []

    def create(self, obj: Obj) -> Obj:
        if self.fail_create:
            raise BindingApiError("claim creation errors")
        stored = copy.deepcopy(obj)
        meta = stored["metadata"]
        meta["name"] = meta["generateName"] + "x7k2q"
        meta["uid"] = "uid-created"
        meta["resourceVersion"] = "10"
        self.created.append(copy.deepcopy(obj))
        self.server[self._key(stored)] = copy.deepcopy(stored)
        if self.informer:
            self.state.dra.upsert(RESOURCE_CLAIM, copy.deepcopy(stored))
        return stored

    def delete(self, obj: Obj) -> None:
        self.deleted.append(self._key(obj))

    def patch_pod_status(self, pod: Any, patch: Obj) -> None:
        self.pod_patches.append((pod.key, patch))


def test_prebind_creates_the_claim_and_records_it_on_the_pod() -> None:
    state = scene()
    plugin = new()
    r = _reserved(state, gpu_pod(), plugin)
    assert r.cycle_state is not None
    handle = ApiHandle(state)
    assert plugin.pre_bind(r.cycle_state, r.pod, "n1", handle) is None
    # Created with generateName, owned by the pod, annotated, with the node's requests.
    [body] = handle.created
    assert "name" not in body["metadata"] and "uid" not in body["metadata"]
    assert body["metadata"]["generateName"] == "p-extended-resources-"
    assert body["metadata"]["annotations"] == {CLAIM_ANNOTATION: "true"}
    assert body["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": POD_UID, "controller": True}]
    assert [r["name"] for r in body["spec"]["devices"]["requests"]] == ["container-0-request-0"]
    # Then the finalizer, then allocation and reservation, as for any claim.
    assert [how for how, _ in handle.writes] == ["update", "status"]
    status = handle.writes[1][1]["status"]
    assert status["reservedFor"] == [{"resource": "pods", "name": "p", "uid": POD_UID}]
    assert status["allocation"]["devices"]["results"] == [
        {"request": "container-0-request-0", "driver": DRIVER, "pool": "n1", "device": "g0"}]
    assert CLAIM_FINALIZER in handle.writes[0][1]["metadata"]["finalizers"]
    name = "p-extended-resources-x7k2q"
    assert handle.pod_patches == [("default/p", {"status": {"extendedResourceClaimStatus": {
        "resourceClaimName": name,
        "requestMappings": [{"containerName": "c0", "resourceName": GPU,
                             "requestName": "container-0-request-0"}]}}})]
    # The tracker has the written claim, nothing stays in flight.
    assert stored_claim(state, f"default/{name}")["status"]["reservedFor"][0]["uid"] == POD_UID
    assert list(state.dra.claims.pending_allocations()) == []
    # Unreserve after a later failure deletes the claim PreBind created.
    plugin.unreserve(r.cycle_state, r.pod, "n1")
    plugin.undo_pre_bind(r.cycle_state, r.pod, "n1", handle)
    assert handle.deleted == [f"default/{name}"]
    assert [how for how, _ in handle.writes][-1] == "update"  # the finalizer removed first
    assert CLAIM_FINALIZER not in (handle.writes[-1][1]["metadata"].get("finalizers") or [])


def test_prebind_waits_for_the_informer_then_goes_on() -> None:
    """waitForExtendedClaimInAssumeCache: without the informer's copy the claim cannot
    be assumed; after 120 s of polling PreBind goes on (only logged)."""
    state = scene()
    plugin = new()
    r = _reserved(state, gpu_pod(), plugin)
    assert r.cycle_state is not None
    handle = ApiHandle(state, informer=False)
    assert plugin.pre_bind(r.cycle_state, r.pod, "n1", handle) is None
    assert handle.clock == pytest.approx(120.0)
    assert len(handle.pod_patches) == 1


def test_claim_creation_failure() -> None:
    """extended-resource-name-claim-creation-failure: upstream's text, nothing left in
    flight, nothing to delete."""
    state = scene()
    plugin = new()
    r = _reserved(state, gpu_pod(), plugin)
    assert r.cycle_state is not None
    handle = ApiHandle(state, fail_create=True)
    status = plugin.pre_bind(r.cycle_state, r.pod, "n1", handle)
    assert status is not None and status.code == Code.ERROR
    assert status.reasons == ("create claim for extended resources default/: "
                              "claim creation errors",)
    assert list(state.dra.claims.pending_allocations()) == []
    plugin.unreserve(r.cycle_state, r.pod, "n1")
    plugin.undo_pre_bind(r.cycle_state, r.pod, "n1", handle)
    assert handle.deleted == []


def test_explain_names_the_devices_for_the_resource() -> None:
    state = scene()
    result = run(state, gpu_pod())
    assert result.cycle_state is not None
    plugin = new()
    record = gpu_pod().obj()
    cycle = CycleState(state.node_infos(), state)
    plugin.pre_filter(cycle, record, state.node_infos())
    infos = {i.name: i for i in state.node_infos()}
    assert plugin.filter(cycle, record, infos["n1"]) is None
    [verdict] = plugin.verdicts(cycle, record, infos["n1"])
    assert verdict.subject == f"extended resources ({GPU})"
    assert verdict.fits
    assert verdict.verdict == (f"get {DRIVER}/n1/g0 (request container-0-request-0, "
                              f"c0: {GPU}) through DRA")
    [other] = plugin.verdicts(cycle, record, infos["n2"])
    assert not other.fits
