"""The resource scorers with DRA-backed extended resources (DRAExtendedResource,
v1.36.3 `resource_allocation.go`: getDRAPreScoredParams, calculateDRAResourceTotals):
a scored extended resource a DeviceClass serves, on a node whose allocatable lacks it,
counts the class's devices there (allocatable) and those taken (allocated); the
scores of NodeResourcesFit and NodeResourcesBalancedAllocation follow, both forms
agreeing (`plugin_harness.run_score`)."""

from __future__ import annotations

from typing import Any

from policyd.dra.selectors import KUBERNETES_CEL, SelectorCache
from policyd.features import with_settings
from policyd.framework import CycleState
from policyd.model.cluster import ClusterState
from policyd.model.dra_objects import DEVICE_CLASS, RESOURCE_CLAIM, RESOURCE_SLICE
from policyd.model.records import Node
from policyd.plugins.helper.extended_resources import DraCapacity
from policyd.plugins.noderesources import balanced_allocation, fit
from policyd.plugins.noderesources.resource_allocation import cycle_dra_capacity
from tests import plugin_harness as harness
from tests.builders import make_node, make_pod

GPU = "example.com/gpu"
DRIVER = "gpu.example.com"
GATE_OFF = with_settings([("DRAExtendedResource", False)])


def gpu_class(*expressions: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"extendedResourceName": GPU,
                     "selectors": [{"cel": {"expression": e}} for e in expressions]}}


def device(name: str, model: str = "a", **placement: Any) -> dict[str, Any]:
    return {"name": name, "attributes": {"model": {"string": model}}, **placement}


def slice_(name: str, devices: list[dict[str, Any]], **placement: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name},
            "spec": {"driver": DRIVER, "pool": {"name": name, "generation": 1,
                                                "resourceSliceCount": 1},
                     "devices": devices, **placement}}


def allocated_claim(pool: str, dev: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"c-{dev}", "namespace": "default", "uid": f"u-{dev}",
                         "resourceVersion": "1"},
            "spec": {"devices": {"requests": []}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "r", "driver": DRIVER, "pool": pool, "device": dev}]}}}}


def node(name: str, zone: str = "z1", **allocatable: str) -> Node:
    b = make_node(name).capacity({"cpu": "4", "memory": "8Gi", "pods": "20", **allocatable})
    return b.label("zone", zone).obj()


def scene(*, cls: dict[str, Any] | None = None) -> ClusterState:
    """n1: slice of 4 devices (one taken), plus a z1-selected slice of 2 devices;
    n2 (zone z2): no devices; n3: its device plugin lists 2 GPUs."""
    state = ClusterState([node("n1"), node("n2", zone="z2"), node("n3", **{GPU: "2"})])
    state.dra.upsert(DEVICE_CLASS, cls or gpu_class(f'device.driver == "{DRIVER}"'))
    state.dra.upsert(RESOURCE_SLICE, slice_("n1", [device(f"g{i}") for i in range(3)]
                                            + [device("g3", model="b")], nodeName="n1"))
    state.dra.upsert(RESOURCE_SLICE, slice_("zoned", [device("z0"), device("z1")],
                                            nodeSelector={"nodeSelectorTerms": [{
                                                "matchExpressions": [{
                                                    "key": "zone", "operator": "In",
                                                    "values": ["z1"]}]}]}))
    state.dra.upsert(RESOURCE_CLAIM, allocated_claim("n1", "g0"))
    return state


def totals(state: ClusterState, name: str) -> tuple[int, int]:
    capacity = DraCapacity.for_resources(state.dra, [GPU], _selectors())
    assert capacity is not None
    return capacity.totals(next(i.node for i in state.node_infos() if i.name == name), GPU)


def _selectors() -> SelectorCache:
    return SelectorCache(KUBERNETES_CEL)


def test_devices_counted_per_node() -> None:
    state = scene()
    # n1: its own 4 and the zone's 2; one taken. n2: the zone selector does not match.
    # n3 matches the zone selector too (the scorer only asks when allocatable is 0).
    assert totals(state, "n1") == (6, 1)
    assert totals(state, "n2") == (0, 0)


def test_class_selectors_choose_the_devices() -> None:
    state = scene(cls=gpu_class(f'device.driver == "{DRIVER}"',
                                'device.attributes["gpu.example.com"].model == "b"'))
    assert totals(state, "n1") == (1, 0)


def test_a_selector_that_fails_counts_nothing() -> None:
    state = scene(cls=gpu_class("device.attributes[\"gpu.example.com\"].nosuch == 1"))
    assert totals(state, "n1") == (0, 0)


def test_no_scored_resource_served_no_capacity() -> None:
    state = scene()
    assert DraCapacity.for_resources(state.dra, ["cpu", "memory"], _selectors()) is None
    cycle = CycleState(state.node_infos(), state)
    assert cycle_dra_capacity(cycle, "k", False, [GPU], _selectors()) is None  # gate off


def gpu_pod(count: int = 1) -> Any:
    return make_pod("p").req({"cpu": "1", "memory": "1Gi", GPU: str(count)}).obj()


GPU_ONLY = {"scoringStrategy": {"type": "LeastAllocated",
                                "resources": [{"name": GPU, "weight": 1}]}}


def test_least_allocated_counts_devices() -> None:
    """n1: 6 devices, 1 taken, 1 requested: (6 - 2) * 100 / 6 = 66; n2 has none (the
    resource is left out, score 0); n3's device plugin: (2 - 1) * 100 / 2 = 50."""
    out = harness.run_score(fit.new(GPU_ONLY), gpu_pod(), scene())
    assert dict(zip(out.names, out.raw, strict=True)) == {"n1": 66, "n2": 0, "n3": 50}
    assert not out.columnar  # devices are counted per node


def test_most_allocated_counts_devices() -> None:
    args = {"scoringStrategy": {"type": "MostAllocated",
                                "resources": [{"name": GPU, "weight": 1}]}}
    out = harness.run_score(fit.new(args), gpu_pod(2), scene())
    assert dict(zip(out.names, out.raw, strict=True)) == {"n1": 50, "n2": 0, "n3": 100}


def test_gate_off_leaves_devices_out() -> None:
    out = harness.run_score(fit.new(GPU_ONLY, features=GATE_OFF), gpu_pod(), scene())
    assert dict(zip(out.names, out.raw, strict=True)) == {"n1": 0, "n2": 0, "n3": 50}
    assert out.columnar


def test_a_pod_not_requesting_it_stays_columnar() -> None:
    args = {"scoringStrategy": {"type": "LeastAllocated", "resources": [
        {"name": "cpu", "weight": 1}, {"name": GPU, "weight": 1}]}}
    pod = make_pod("p").req({"cpu": "1"}).obj()
    out = harness.run_score(fit.new(args), pod, scene())
    assert out.columnar
    assert out.raw == [75, 75, 75]


def test_balanced_allocation_counts_devices() -> None:
    """v1.36's score: 50 + (50 + balance with the pod - balance without) / 2, a
    balance being int((1 - std of the fractions) * 100).
    n1: cpu 1/4 and gpu 2/6 with the pod (std 1/24: 95), cpu 0 and gpu 1/6 without
    (std 1/12: 91): 50 + 54 / 2 = 77. n2 has cpu alone: 50 + 50 / 2 = 75.
    n3 (device plugin): cpu 1/4 and gpu 1/2 (87), 0 and 0 (100): 50 + 37 / 2 = 68."""
    args = {"resources": [{"name": "cpu", "weight": 1}, {"name": GPU, "weight": 1}]}
    plugin = balanced_allocation.new(args)
    out = harness.run_score(plugin, gpu_pod(), scene())
    assert dict(zip(out.names, out.raw, strict=True)) == {"n1": 77, "n2": 75, "n3": 68}
    assert not out.columnar
    off = harness.run_score(balanced_allocation.new(args, features=GATE_OFF), gpu_pod(),
                            scene())
    assert dict(zip(off.names, off.raw, strict=True)) == {"n1": 75, "n2": 75, "n3": 68}
