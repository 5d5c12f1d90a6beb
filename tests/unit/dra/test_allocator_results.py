"""What an allocation writes: configuration from classes and claims, the node selector
that binds the claim to nodes, and the JSON of status.allocation."""

from __future__ import annotations

from typing import Any

from policyd.dra.nodes import Node
from policyd.dra.objects import decode_resource_claim
from policyd.dra.results import AllocationResult
from policyd.model.quantity import nano_value
from tests.unit.dra.dra_fixtures import (
    CLAIM_0,
    CLASS_A,
    CLASS_B,
    DRIVER_A,
    DRIVER_B,
    NODE_1,
    Scene,
    build,
    claim,
    device,
    device_class,
    first_available,
    opaque,
    request,
    resource_slice,
    run,
    sub,
)


def single(scene: Scene) -> AllocationResult:
    results = run(scene)
    assert results is not None
    (result,) = results
    return result


def configs(result: AllocationResult) -> list[tuple[str, tuple[str, ...], Any]]:
    return [(c.source, c.requests, c.configuration["opaque"]["parameters"])
            for c in result.config]


TWO_CLASSES = [device_class(CLASS_A, DRIVER_A, config=[opaque(DRIVER_A, a=1),
                                                       opaque(DRIVER_A, a=2)]),
               device_class(CLASS_B, DRIVER_B, config=[opaque(DRIVER_B, b=1)])]
TWO_SLICES = [resource_slice("slice-a", device("device-1"), device("device-2")),
              resource_slice("slice-b", device("device-1"), driver=DRIVER_B)]


def test_class_config_once_per_class_listing_its_requests() -> None:
    result = single(Scene(
        [claim(CLAIM_0, request("req-0", CLASS_A), request("req-1", CLASS_B),
               request("req-2", CLASS_A))],
        TWO_SLICES, classes=TWO_CLASSES))
    assert configs(result) == [
        ("FromClass", ("req-0", "req-2"), {"a": 1}),
        ("FromClass", ("req-0", "req-2"), {"a": 2}),
        ("FromClass", ("req-1",), {"b": 1}),
    ]


def test_claim_config_for_all_and_per_request() -> None:
    result = single(Scene(
        [claim(CLAIM_0, request("req-0"), request("req-1"),
               config=[{**opaque(DRIVER_A, all=True)},
                       {"requests": ["req-1"], **opaque(DRIVER_A, one=True)},
                       {"requests": ["req-0", "req-1"], **opaque(DRIVER_A, both=True)},
                       {"requests": ["req-9"], **opaque(DRIVER_A, none=True)}])],
        [resource_slice("slice-1", device("device-1"), device("device-2"))],
        classes=[device_class()]))
    # A claim config naming two requests appears once per request it names, as
    # upstream writes it.
    assert configs(result) == [
        ("FromClaim", (), {"all": True}),
        ("FromClaim", ("req-1",), {"one": True}),
        ("FromClaim", ("req-0", "req-1"), {"both": True}),
        ("FromClaim", ("req-0", "req-1"), {"both": True}),
    ]


def test_prioritized_list_config_follows_the_chosen_sub_request() -> None:
    result = single(Scene(
        [claim(CLAIM_0, first_available("req-0", sub("a", CLASS_B, selectors=["false"]),
                                        sub("b", CLASS_A)),
               config=[{"requests": ["req-0/a"], **opaque(DRIVER_A, sub="a")},
                       {"requests": ["req-0/b"], **opaque(DRIVER_A, sub="b")},
                       {"requests": ["req-0"], **opaque(DRIVER_A, parent=True)}])],
        TWO_SLICES, classes=TWO_CLASSES))
    assert [dev.request for dev in result.devices] == ["req-0/b"]
    assert configs(result) == [
        ("FromClass", ("req-0/b",), {"a": 1}),
        ("FromClass", ("req-0/b",), {"a": 2}),
        ("FromClaim", ("req-0/b",), {"sub": "b"}),
        ("FromClaim", ("req-0",), {"parent": True}),
    ]


def _selector(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeSelectorTerms": list(terms)}


def _in(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


def test_node_local_device_binds_to_the_node() -> None:
    result = single(Scene([claim(CLAIM_0, request("req-0"))],
                          [resource_slice("slice-1", device("device-1"))]))
    assert result.to_api()["nodeSelector"] == _selector({"matchFields": [
        _in("metadata.name", NODE_1)]})


def test_all_nodes_device_has_no_node_selector() -> None:
    result = single(Scene([claim(CLAIM_0, request("req-0"))],
                          [resource_slice("slice-1", device("device-1"), node=None,
                                          allNodes=True)]))
    assert result.node_selector is None
    assert "nodeSelector" not in result.to_api()


def test_network_devices_merge_their_selectors_without_duplicates() -> None:
    region = _selector({"matchExpressions": [_in("region", "r1")]})
    zone = _selector({"matchExpressions": [_in("zone", "z1", "z2")],
                      "matchFields": [_in("metadata.name", NODE_1)]})
    zone_again = _selector({"matchExpressions": [_in("zone", "z2", "z1"),
                                                 _in("region", "r1")]})
    result = single(Scene(
        [claim(CLAIM_0, request("req-0", count=3))],
        [resource_slice("slice-1", device("device-1"), node=None, pool="p1",
                        nodeSelector=region),
         resource_slice("slice-2", device("device-2"), node=None, pool="p2",
                        nodeSelector=zone),
         resource_slice("slice-3", device("device-3"), node=None, pool="p3",
                        nodeSelector=zone_again)],
        node=Node(NODE_1, {"region": "r1", "zone": "z1"})))
    assert result.to_api()["nodeSelector"] == _selector({
        "matchExpressions": [_in("region", "r1"), _in("zone", "z1", "z2")],
        "matchFields": [_in("metadata.name", NODE_1)]})


def test_allocation_json() -> None:
    scene = Scene(
        [claim(CLAIM_0, request("req-0", admin=True, tolerations=[
            {"key": "k", "operator": "Exists", "effect": "NoSchedule"}]),
            request("req-1", capacity={"bw": "1Gi"}))],
        [resource_slice("slice-1", device("device-1"),
                        device("device-2", capacity={"bw": "4Gi"},
                               allowMultipleAllocations=True))],
        classes=[device_class(config=[opaque(DRIVER_A, x=1)])])
    results = run(scene)
    assert results is not None
    assert results[0].to_api() == {
        "devices": {
            "results": [
                {"request": "req-0", "driver": DRIVER_A, "pool": "pool-1",
                 "device": "device-1", "adminAccess": True,
                 "tolerations": [{"key": "k", "operator": "Exists",
                                  "effect": "NoSchedule"}]},
                {"request": "req-1", "driver": DRIVER_A, "pool": "pool-1",
                 "device": "device-2", "shareID": "share-1",
                 "consumedCapacity": {"bw": "1Gi"}},
            ],
            "config": [{"source": "FromClass", "requests": ["req-0", "req-1"],
                        "opaque": {"driver": DRIVER_A, "parameters": {"x": 1}}}],
        },
        "nodeSelector": _selector({"matchFields": [_in("metadata.name", NODE_1)]}),
    }


def test_one_allocator_serves_many_nodes_and_counts_its_steps() -> None:
    scene = Scene([claim(CLAIM_0, request("req-0"))],
                  [resource_slice("slice-1", device("device-1"), node=NODE_1),
                   resource_slice("slice-2", device("device-2"), node="node-2",
                                  pool="pool-2")])
    allocator = build(scene)
    claims = [decode_resource_claim(c, nano_value) for c in scene.claims]
    first = allocator.allocate(Node(NODE_1), claims)
    second = allocator.allocate(Node("node-2"), claims)
    assert first is not None and second is not None
    assert (first[0].devices[0].device, second[0].devices[0].device) == ("device-1",
                                                                          "device-2")
    assert allocator.allocate(Node("node-3"), claims) is None
    assert allocator.stats.steps > 0
