"""DynamicResources allocating claims, extension point by extension point (v1.36.3's
dynamicresources.go): tables of pods, claims, slices and classes -> PreFilter's
outcome, each node's verdict, the devices chosen, scores, PostFilter's decision and
Reserve/Unreserve's in-flight allocations."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from policyd.engine.cycle import reserve, schedule_one
from policyd.framework import Code, CycleState
from policyd.framework.fit_error import Diagnosis
from policyd.plugins.dynamicresources.args import parse_args
from policyd.plugins.dynamicresources.plugin import (
    CANNOT_ALLOCATE,
    DEALLOCATION_COMPLETED,
    NOT_AVAILABLE_ON_NODE,
    STATE_KEY,
    STILL_NOT_SCHEDULABLE,
    DynamicResources,
    claim_to_deallocate,
    new,
)
from tests.builders import PodBuilder
from tests.unit.plugins.dynamicresources.scene import (
    DRIVER,
    allocation,
    claim,
    cluster,
    dra,
    exact,
    first_available,
    framework,
    gpu_class,
    gpu_slice,
    nodes,
    pod_using,
    pre_filtered,
    schedule,
    stored_claim,
)

Obj = dict[str, Any]


@dataclass
class PreFilterCase:
    pod: PodBuilder
    claims: list[Obj] = field(default_factory=list)
    classes: list[Obj] = field(default_factory=lambda: [gpu_class()])
    code: Code | None = None
    reason: str | None = None


def _template_pod(status_name: str | None, *, with_status: bool = True) -> PodBuilder:
    pod = pod_using("job", uid="job-uid").resource_claim("gpu", template="one-gpu")
    if with_status:
        pod = pod.set("status.resourceClaimStatuses",
                      [{"name": "gpu", "resourceClaimName": status_name}])
    return pod


PRE_FILTER = {
    "claim missing": PreFilterCase(
        pod_using("p", "c1"), code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        reason='could not find ResourceClaim "default/c1"'),
    "template's claim not created yet": PreFilterCase(
        _template_pod(None, with_status=False), code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        reason='pod "default/job": ResourceClaim not created yet'),
    "template's claim not needed (status names none)": PreFilterCase(
        _template_pod(None), code=Code.SKIP),
    "template's claim not the pod's": PreFilterCase(
        _template_pod("job-gpu-1"), claims=[claim("job-gpu-1", owner_uid="other")],
        code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        reason="ResourceClaim default/job-gpu-1 was not created for Pod default/job "
               "(Pod is not owner)"),
    "template's claim owned by the pod": PreFilterCase(
        _template_pod("job-gpu-1"), claims=[claim("job-gpu-1", owner_uid="job-uid")]),
    "claim being deleted": PreFilterCase(
        pod_using("p", "c1"),
        claims=[{**claim("c1"), "metadata": {**claim("c1")["metadata"],
                                             "deletionTimestamp": "2026-01-01T00:00:00Z"}}],
        code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        reason='resourceclaim "c1" is being deleted'),
    "class missing": PreFilterCase(
        pod_using("p", "c1"), claims=[claim("c1")], classes=[],
        code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        reason="request gpu: device class gpu does not exist"),
    "a sub-request's class missing": PreFilterCase(
        pod_using("p", "c1"),
        claims=[claim("c1", first_available("gpu", ("big", "gpu", 1), ("small", "nope", 1)))],
        code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        reason="request gpu/small: device class nope does not exist"),
    "no class name": PreFilterCase(
        pod_using("p", "c1"), claims=[claim("c1", exact("gpu", cls=""))],
        code=Code.ERROR, reason="request gpu: unsupported request type"),
    "neither exactly nor firstAvailable": PreFilterCase(
        pod_using("p", "c1"), claims=[claim("c1", {"name": "gpu"})],
        code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        reason="resource claim default/c1, request gpu: unknown request type"),
    "allocated claim: its class is not looked up": PreFilterCase(
        pod_using("p", "c1"), classes=[],
        claims=[claim("c1", status={"allocation": allocation("n1", "g0")})]),
    "malformed claim": PreFilterCase(
        pod_using("p", "c1"), claims=[claim("c1", {"name": "gpu", "exactly": "all"})],
        code=Code.ERROR,
        reason="ResourceClaim default/c1: spec.devices.requests[0].exactly: must be an "
               "object, not a string"),
}


@pytest.mark.parametrize("case", PRE_FILTER.values(), ids=PRE_FILTER.keys())
def test_pre_filter(case: PreFilterCase) -> None:
    state = cluster(nodes("n1"), classes=case.classes, claims=case.claims)
    _, _, status = pre_filtered(state, case.pod, new())
    if case.code is None:
        assert status is None
        return
    assert status is not None and status.code is case.code
    if case.reason is not None:
        assert status.reasons == (case.reason,)


# The PreFilter refusals PreEnqueue makes first (upstream's foreachPodResourceClaim in
# both): about the claims' existence and ownership, never about classes or devices.
GATED_BY_PRE_ENQUEUE = {"claim missing", "template's claim not created yet",
                        "template's claim not the pod's", "claim being deleted"}


@pytest.mark.parametrize("name", PRE_FILTER.keys())
def test_pre_enqueue_holds_back_what_the_claims_lookup_refuses(name: str) -> None:
    case = PRE_FILTER[name]
    state = cluster(nodes("n1"), classes=case.classes, claims=case.claims)
    status = new().pre_enqueue(case.pod.obj(), state)
    if name not in GATED_BY_PRE_ENQUEUE:
        assert status is None
        return
    assert status is not None
    assert (status.code, status.reasons) == (Code.UNSCHEDULABLE, (case.reason,))


def test_pre_filter_waits_for_an_allocation_in_flight() -> None:
    state = cluster(nodes("n1"), classes=[gpu_class()], slices=[gpu_slice("n1", "g0")],
                    claims=[claim("shared")])
    fw = framework()
    first = reserve(fw, schedule_one(fw, pod_using("a", "shared").obj(), state))
    assert first.node == "n1"
    _, _, status = pre_filtered(state, pod_using("b", "shared"), new())
    assert status is not None and status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == (
        "resource claim default/shared is in the process of being allocated",)


@dataclass
class FilterCase:
    claims: list[Obj]
    slices: list[Obj]
    feasible: list[str]
    reasons: dict[str, str] = field(default_factory=dict)
    devices: list[str] | None = None  # chosen on the first feasible node


FILTER = {
    "one device on one node": FilterCase(
        [claim("c1")], [gpu_slice("n2", "g0")], ["n2"],
        {"n1": CANNOT_ALLOCATE, "n3": CANNOT_ALLOCATE}, ["g0"]),
    "two devices wanted, one node has two": FilterCase(
        [claim("c1", exact("gpu", count=2))],
        [gpu_slice("n1", "g0"), gpu_slice("n2", "g0", "g1")], ["n2"],
        {"n1": CANNOT_ALLOCATE, "n3": CANNOT_ALLOCATE}, ["g0", "g1"]),
    "already allocated on n3: only n3": FilterCase(
        [claim("c1", status={"allocation": allocation("n3", "g0")})], [], ["n3"],
        {"n1": NOT_AVAILABLE_ON_NODE, "n2": NOT_AVAILABLE_ON_NODE}),
    "a device another claim holds is taken": FilterCase(
        [claim("c1"), claim("other", status={"allocation": allocation("n1", "g0")})],
        [gpu_slice("n1", "g0", "g1")], ["n1"],
        {"n2": CANNOT_ALLOCATE, "n3": CANNOT_ALLOCATE}, ["g1"]),
    "class selector on attributes": FilterCase(
        [claim("c1", exact("gpu", cls="big"))],
        [gpu_slice("n1", "g0", attributes={"mem": {"int": 8}}),
         gpu_slice("n2", "g0", attributes={"mem": {"int": 80}})],
        ["n2"], {"n1": CANNOT_ALLOCATE, "n3": CANNOT_ALLOCATE}),
}


@pytest.mark.parametrize("reference", [False, True])
@pytest.mark.parametrize("case", FILTER.values(), ids=FILTER.keys())
def test_filter(case: FilterCase, reference: bool) -> None:
    state = cluster(nodes("n1", "n2", "n3"),
                    classes=[gpu_class(), gpu_class("big", 'device.attributes["'
                                                   f'{DRIVER}"].mem >= 40')],
                    slices=case.slices, claims=case.claims)
    r = schedule(state, pod_using("p", "c1"), reference=True, plugin=new())
    assert sorted(r.diagnosis.node_to_status) == sorted(case.reasons)
    for node, reason in case.reasons.items():
        status = r.diagnosis.node_to_status[node]
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == (reason,)
    assert r.node in case.feasible
    if case.devices is not None:
        assert r.cycle_state is not None
        data = r.cycle_state.read(STATE_KEY)
        [result] = data.node_allocations[r.node]
        assert [d.device for d in result.devices] == case.devices
    fast = schedule(state, pod_using("p", "c1"), reference=reference)
    assert fast.node == r.node and fast.message == r.message


def test_a_claim_or_class_the_allocator_refuses_is_an_error() -> None:
    broken = {**gpu_class(), "spec": {"selectors": [{"cel": {"expression": "device.("}}]}}
    state = cluster(nodes("n1"), classes=[broken], slices=[gpu_slice("n1", "g0")],
                    claims=[claim("c1")])
    r = schedule(state, pod_using("p", "c1"))
    assert r.node is None and r.error is not None
    assert "class gpu: selector #0: CEL compile error" in r.message


def test_filter_timeout_is_an_error_naming_the_node() -> None:
    ticks = iter(range(0, 1000, 20))
    plugin = DynamicResources(parse_args({"filterTimeout": "10s"}),
                              clock=lambda: float(next(ticks)))
    state = cluster(nodes("n1"), classes=[gpu_class()], slices=[gpu_slice("n1", "g0")],
                    claims=[claim("c1")])
    cycle, pod, status = pre_filtered(state, pod_using("p", "c1"), plugin)
    assert status is None
    verdict = plugin.filter(cycle, pod, state.node_infos()[0])
    assert verdict is not None and verdict.code is Code.ERROR
    assert verdict.reasons == ("node n1: timed out trying to allocate devices",)


def test_reserve_keeps_the_device_from_the_next_pod_until_unreserve() -> None:
    state = cluster(nodes("n1", "n2"), classes=[gpu_class()],
                    slices=[gpu_slice("n1", "g0"), gpu_slice("n2", "g0")],
                    claims=[claim("a"), claim("b"), claim("c")])
    fw = framework()
    first = reserve(fw, schedule_one(fw, pod_using("pa", "a").obj(), state))
    second = reserve(fw, schedule_one(fw, pod_using("pb", "b").obj(), state))
    assert {first.node, second.node} == {"n1", "n2"}
    third = schedule_one(fw, pod_using("pc", "c").obj(), state)
    assert third.node is None
    assert third.message == ("0/2 nodes are available: 2 cannot allocate all claims. "
                             "still not schedulable")
    # The first pod gives its device up: the third fits where the first was.
    assert first.cycle_state is not None and first.node is not None
    fw.run_unreserve(first.cycle_state, first.pod, first.node)
    assert schedule_one(fw, pod_using("pc", "c").obj(), state).node == first.node


def test_reserve_records_the_allocation_as_prebind_would_write_it() -> None:
    state = cluster(nodes("n1"), classes=[gpu_class()], slices=[gpu_slice("n1", "g0")],
                    claims=[claim("c1")])
    fw = framework()
    r = reserve(fw, schedule_one(fw, pod_using("p", "c1").obj(), state))
    assert r.node == "n1"
    in_flight = dra(state).claims.pending_allocation("uid-c1")
    assert in_flight is not None
    assert in_flight["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    assert in_flight["status"]["allocation"] == {
        "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1",
                                 "device": "g0"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}
    # The stored claim itself is untouched until PreBind writes it.
    assert "status" not in stored_claim(state, "default/c1")


@pytest.mark.parametrize("reference", [False, True])
def test_score_prefers_the_node_with_the_earlier_alternative(reference: bool) -> None:
    # n1 has a big GPU (the first alternative: 8), n2 only small ones (the second: 7).
    state = cluster(
        nodes("n1", "n2"),
        classes=[gpu_class(), gpu_class("big", f'device.attributes["{DRIVER}"].mem >= 40')],
        slices=[gpu_slice("n1", "g0", attributes={"mem": {"int": 80}}),
                gpu_slice("n2", "g0", attributes={"mem": {"int": 8}})],
        claims=[claim("c1", first_available("gpu", ("big", "big", 1), ("small", "gpu", 1)))])
    r = schedule(state, pod_using("p", "c1"), reference=True)
    assert r.node == "n1" and r.scores is not None
    [dra] = [p for p in r.scores.plugins if p.plugin == "DynamicResources"]
    assert dra.raw == [8, 7] and dra.normalized == [100, 87]
    assert schedule(state, pod_using("p", "c1"), reference=reference).node == "n1"


def test_post_filter_frees_an_allocated_claim_nobody_uses() -> None:
    state = cluster(nodes("n1", "n2"), classes=[gpu_class()],
                    claims=[claim("c1", status={"allocation": allocation("gone", "g0")})])
    r = schedule(state, pod_using("p", "c1"))
    assert r.node is None
    assert r.message == (f"0/2 nodes are available: 2 {NOT_AVAILABLE_ON_NODE}. "
                         f"{DEALLOCATION_COMPLETED}")
    assert r.cycle_state is not None
    chosen = claim_to_deallocate(r.cycle_state)
    assert chosen is not None and chosen.key == "default/c1"
    explained = schedule_one(framework(), pod_using("p", "c1").obj(), state, explain=True)
    assert explained.post_filter_notes == {"DynamicResources": [
        "would deallocate ResourceClaim default/c1 (allocated, not available on any node "
        "tried, and reserved for no other pod), as `policyd run` does (explain writes "
        "nothing)"]}


def test_post_filter_keeps_a_claim_reserved_for_another_pod() -> None:
    reserved = {"allocation": allocation("gone", "g0"),
                "reservedFor": [{"resource": "pods", "name": "x", "uid": "x-uid"}]}
    state = cluster(nodes("n1"), classes=[gpu_class()], claims=[claim("c1", status=reserved)])
    plugin = new()
    cycle, pod, status = pre_filtered(state, pod_using("p", "c1"), plugin)
    assert status is None
    for node in state.node_infos():
        verdict = plugin.filter(cycle, pod, node)
        assert verdict is not None and verdict.reasons == (NOT_AVAILABLE_ON_NODE,)
    _, post = plugin.post_filter(cycle, pod, Diagnosis())
    assert post.reasons == (STILL_NOT_SCHEDULABLE,)
    assert claim_to_deallocate(cycle) is None


def test_pre_bind_pre_flight_says_prebind_has_work() -> None:
    state = cluster(nodes("n1"), classes=[gpu_class()], slices=[gpu_slice("n1", "g0")],
                    claims=[claim("c1")])
    plugin = new()
    cycle, pod, _ = pre_filtered(state, pod_using("p", "c1"), plugin)
    assert plugin.pre_bind_pre_flight(cycle, pod, "n1") is None


def test_filter_without_pre_filter() -> None:
    state = cluster(nodes("n1"))
    node = state.node_infos()[0]
    with_claim = pod_using("p", "c1").obj()
    status = new().filter(CycleState(), with_claim, node)
    assert status is not None and status.code is Code.ERROR
    assert status.reasons == ("not found",)


def test_pre_bind_has_nothing_to_write_for_claims_reserved_for_the_pod() -> None:
    status = {"allocation": allocation("n1", "g0"),
              "reservedFor": [{"resource": "pods", "name": "p", "uid": "pod-uid-p"}]}
    state = cluster(nodes("n1"), classes=[gpu_class()], claims=[claim("c1", status=status)])
    r = schedule(state, pod_using("p", "c1"))
    assert r.node == "n1"
    plugin = new()
    cycle, pod, _ = pre_filtered(state, pod_using("p", "c1"), plugin)
    assert plugin.pre_bind(cycle, pod, "n1", handle=None) is None  # type: ignore[arg-type]


def test_verdicts_say_which_devices_each_claim_gets_or_why_not() -> None:
    state = cluster(nodes("n1", "n2"), classes=[gpu_class()],
                    slices=[gpu_slice("n1", "g0", "g1"), gpu_slice("n2", "g0")],
                    claims=[claim("a"), claim("b", exact("gpu", count=2)),
                            claim("old", status={"allocation": allocation("n1", "g9")})])
    plugin = new()
    cycle, pod, _ = pre_filtered(state, pod_using("p", "a", "b", "old"), plugin)
    n1, n2 = state.node_infos()
    assert plugin.filter(cycle, pod, n1) is not None  # a and b need three devices
    assert plugin.filter(cycle, pod, n2) is not None
    assert [(v.subject, v.fits, v.verdict) for v in plugin.verdicts(cycle, pod, n1)] == [
        ("default/a", True, f"could get {DRIVER}/n1/g0 (request gpu) alone, but not "
                            "together with the pod's other claims"),
        ("default/b", True, f"could get {DRIVER}/n1/g0 (request gpu), {DRIVER}/n1/g1 "
                            "(request gpu) alone, but not together with the pod's other "
                            "claims"),
        ("default/old", True, f"is allocated ({DRIVER}/n1/g9)"),
    ]
    assert [(v.subject, v.fits) for v in plugin.verdicts(cycle, pod, n2)] == [
        ("default/a", True), ("default/b", False), ("default/old", False)]
    # Where the pod fits, the verdicts are Filter's decision.
    single = cluster(nodes("n1"), classes=[gpu_class()], slices=[gpu_slice("n1", "g0")],
                     claims=[claim("a")])
    cycle, pod, _ = pre_filtered(single, pod_using("p", "a"), plugin)
    node = single.node_infos()[0]
    assert plugin.filter(cycle, pod, node) is None
    assert [v.verdict for v in plugin.verdicts(cycle, pod, node)] == [
        f"gets {DRIVER}/n1/g0 (request gpu)"]


def test_a_malformed_slice_is_an_error_naming_it() -> None:
    broken = gpu_slice("n1", "g0")
    broken["spec"]["devices"][0]["attributes"] = {"mem": {"int": "eighty"}}
    state = cluster(nodes("n1"), classes=[gpu_class()], slices=[broken], claims=[claim("c1")])
    _, _, status = pre_filtered(state, pod_using("p", "c1"), new())
    assert status is not None and status.code is Code.ERROR
    assert status.reasons == (
        "ResourceSlice n1-gpus: spec.devices[0].attributes.mem.int: must be an integer",)
