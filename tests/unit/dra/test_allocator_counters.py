"""Partitionable devices (shared counters), per-device node selection and binding
conditions in the allocator's search: which device each case gets, exactly."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.dra.features import AllocatorFeatures
from policyd.dra.nodes import Node
from tests.unit.dra.dra_fixtures import (
    CLAIM_0,
    CLAIM_1,
    DRIVER_A,
    NODE_1,
    NODE_2,
    Case,
    Scene,
    allocated_claim,
    check,
    claim,
    d,
    device,
    first_available,
    request,
    resource_slice,
    run,
    sub,
)


def consumer(name: str, memory: str, counter_set: str = "gpu-0", **extra: Any,
             ) -> dict[str, Any]:
    return device(name, consumesCounters=[{"counterSet": counter_set,
                                           "counters": {"memory": {"value": memory}}}],
                  **extra)


def counters(name: str = "slice-counters", memory: str = "8Gi", set_name: str = "gpu-0",
             **kwargs: Any) -> dict[str, Any]:
    return resource_slice(name, sharedCounters=[
        {"name": set_name, "counters": {"memory": {"value": memory}}}], **kwargs)


COUNTERS: dict[str, Case] = {
    "single-partition": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [resource_slice("slice-1", consumer("device-1", "4Gi"), count=2),
               counters(count=2)]),
        [[d("req-0", "device-1")]]),
    "partitions-exhaust-counters": Case(
        Scene([claim(CLAIM_0, request("req-0", count=2))],
              [resource_slice("slice-1", consumer("device-1", "6Gi"),
                              consumer("device-2", "6Gi"), count=2),
               counters(count=2)]),
        None),
    "partitions-within-counters": Case(
        Scene([claim(CLAIM_0, request("req-0", count=2))],
              [resource_slice("slice-1", consumer("device-1", "6Gi"),
                              consumer("device-2", "4Gi"), consumer("device-3", "2Gi"),
                              count=2),
               counters(count=2)]),
        [[d("req-0", "device-1"), d("req-0", "device-3")]]),
    "allocated-partition-consumes-counters": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [resource_slice("slice-1", consumer("device-1", "6Gi"),
                              consumer("device-2", "4Gi"), consumer("device-3", "2Gi"),
                              count=2),
               counters(count=2)],
              allocated=[allocated_claim("other", (DRIVER_A, "pool-1", "device-1"))]),
        [[d("req-0", "device-3")]]),
    "allocated-partition-of-another-node-consumes-counters": Case(
        # The pool spans nodes; the partition allocated on node-2 is in a slice node-1
        # does not see, and still uses the shared counters.
        Scene([claim(CLAIM_0, request("req-0"))],
              [resource_slice("slice-n1", consumer("device-1", "6Gi"), node=NODE_1,
                              count=3),
               resource_slice("slice-n2", consumer("device-2", "6Gi"), node=NODE_2,
                              count=3),
               counters(node=None, allNodes=True, count=3)],
              allocated=[allocated_claim("other", (DRIVER_A, "pool-1", "device-2"))]),
        None),
    "taint-releases-counters": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [resource_slice("slice-1",
                              consumer("device-1", "6Gi", taints=[
                                  {"key": "k", "value": "v", "effect": "NoSchedule"}]),
                              consumer("device-2", "6Gi"), count=2),
               counters(count=2)]),
        [[d("req-0", "device-2")]]),
    "constraint-releases-counters": Case(
        Scene([claim(CLAIM_0, request("req-0"),
                     constraints=[{"matchAttribute": f"{DRIVER_A}/numa"}])],
              [resource_slice("slice-1", consumer("device-1", "6Gi"),
                              consumer("device-2", "6Gi", attributes={"numa": {"int": 0}}),
                              count=2),
               counters(count=2)]),
        [[d("req-0", "device-2")]]),
    "backtracking-releases-counters": Case(
        # req-0 first takes device-1 (6Gi); req-1 then fits nowhere (only device-2,
        # needing 4Gi of the 2Gi left): req-0 moves to device-3 and both fit.
        Scene([claim(CLAIM_0, request("req-0"),
                     request("req-1", selectors=["attr:kind=b"]))],
              [resource_slice("slice-1", consumer("device-1", "6Gi"),
                              consumer("device-2", "4Gi", attributes={"kind": "b"}),
                              consumer("device-3", "2Gi"), count=2),
               counters(count=2)]),
        [[d("req-0", "device-3"), d("req-1", "device-2")]]),
    "prioritized-list-partition-sizes": Case(
        Scene([claim(CLAIM_0, first_available("req-0", sub("big", selectors=["attr:size=8"]),
                                              sub("small", selectors=["attr:size=4"])))],
              [resource_slice("slice-1",
                              consumer("device-big", "8Gi", attributes={"size": 8}),
                              consumer("device-small", "4Gi", attributes={"size": 4}),
                              count=2),
               counters(count=2)],
              allocated=[allocated_claim("other", (DRIVER_A, "pool-1", "device-small"))]),
        None),
    "two-counter-sets": Case(
        Scene([claim(CLAIM_0, request("req-0", count=2))],
              [resource_slice("slice-1", consumer("device-1", "8Gi", "gpu-0"),
                              consumer("device-2", "8Gi", "gpu-0"),
                              consumer("device-3", "8Gi", "gpu-1"), count=3),
               counters("slice-c0", set_name="gpu-0", count=3),
               counters("slice-c1", set_name="gpu-1", count=3)]),
        [[d("req-0", "device-1"), d("req-0", "device-3")]]),
    "unknown-counter-set-makes-pool-invalid": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [resource_slice("slice-1", consumer("device-1", "1Gi", "gpu-9"), count=2),
               counters(count=2)]),
        error="invalid resource pools were encountered", node_error=True),
    "unknown-counter-makes-pool-invalid": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [resource_slice("slice-1", device("device-1", consumesCounters=[
                  {"counterSet": "gpu-0", "counters": {"cores": {"value": "1"}}}]), count=2),
               counters(count=2)]),
        error="invalid resource pools were encountered", node_error=True),
    "duplicate-counter-set-makes-pool-invalid": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [resource_slice("slice-1", consumer("device-1", "1Gi"), count=3),
               counters("slice-c1", count=3), counters("slice-c2", count=3)]),
        error="invalid resource pools were encountered", node_error=True),
    "feature-off-counter-slices-ignored-pool-incomplete": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [resource_slice("slice-1", consumer("device-1", "4Gi"), count=2),
               counters(count=2)],
              features=AllocatorFeatures(partitionable_devices=False)),
        None),
    "feature-off-consuming-device-skipped": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [resource_slice("slice-1", consumer("device-1", "4Gi"), device("device-2"))],
              features=AllocatorFeatures(partitionable_devices=False)),
        [[d("req-0", "device-2")]]),
}


def per_device(*devices: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    return resource_slice("slice-1", *devices, node=None, perDeviceNodeSelection=True,
                          **kwargs)


REGION_R1 = {"nodeSelectorTerms": [{"matchExpressions": [
    {"key": "region", "operator": "In", "values": ["r1"]}]}]}

NODE_SELECTION: dict[str, Case] = {
    "per-device-node-name": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [per_device(device("device-2", nodeName=NODE_2),
                          device("device-1", nodeName=NODE_1))]),
        [[d("req-0", "device-1")]]),
    "per-device-node-selector": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [per_device(device("device-1", nodeSelector=REGION_R1))],
              node=Node(NODE_1, {"region": "r2"})),
        None),
    "per-device-all-nodes": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [per_device(device("device-1", allNodes=True))], node=Node("anywhere")),
        [[d("req-0", "device-1")]]),
    "per-device-disabled": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [per_device(device("device-1", nodeName=NODE_1))],
              features=AllocatorFeatures(partitionable_devices=False)),
        None),
}


def _conditioned(name: str) -> dict[str, Any]:
    return device(name, bindingConditions=["attached"],
                  bindingFailureConditions=["failed"], bindsToNode=True)


BINDING: dict[str, Case] = {
    "pools-with-binding-conditions-come-last": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [resource_slice("slice-a", _conditioned("device-a"), pool="pool-a"),
               resource_slice("slice-b", device("device-b"), pool="pool-b")]),
        [[d("req-0", "device-b", "pool-b")]]),
    "binding-conditions-used-when-nothing-else": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [resource_slice("slice-a", _conditioned("device-a"), pool="pool-a"),
               resource_slice("slice-b", device("device-b"), pool="pool-b")],
              allocated=[allocated_claim("other", (DRIVER_A, "pool-b", "device-b"))]),
        [[d("req-0", "device-a", "pool-a")]]),
    "binding-conditions-feature-off": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [resource_slice("slice-a", _conditioned("device-a"), pool="pool-a")],
              features=AllocatorFeatures(device_binding_and_status=False)),
        None),
    "two-claims-one-each": Case(
        Scene([claim(CLAIM_0, request("req-0")), claim(CLAIM_1, request("req-0"))],
              [resource_slice("slice-a", _conditioned("device-1"), _conditioned("device-2"),
                              pool="pool-a")]),
        [[d("req-0", "device-1", "pool-a")], [d("req-0", "device-2", "pool-a")]]),
}


def _cases(table: dict[str, Case]) -> list[Any]:
    return [pytest.param(case, id=name) for name, case in table.items()]


@pytest.mark.parametrize("case", _cases(COUNTERS))
def test_counters(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", _cases(NODE_SELECTION))
def test_per_device_node_selection(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", _cases(BINDING))
def test_binding_conditions(case: Case) -> None:
    check(case)


def test_binding_conditions_are_copied_into_the_result() -> None:
    (result,) = run(Scene([claim(CLAIM_0, request("req-0"))],
                          [resource_slice("slice-a", _conditioned("device-a"),
                                          pool="pool-a")])) or []
    (chosen,) = result.devices
    assert chosen.binding_conditions == ("attached",)
    assert chosen.binding_failure_conditions == ("failed",)
    # bindsToNode ties the claim to this node even for a slice that serves all nodes.
    assert result.to_api()["nodeSelector"] == {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [NODE_1]}]}]}


def test_per_device_node_selector_is_the_result_node_selector() -> None:
    (result,) = run(Scene([claim(CLAIM_0, request("req-0"))],
                          [per_device(device("device-1", nodeSelector=REGION_R1))],
                          node=Node(NODE_1, {"region": "r1"}))) or []
    assert result.to_api()["nodeSelector"] == REGION_R1
