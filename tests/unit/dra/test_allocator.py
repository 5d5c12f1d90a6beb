"""The allocator's search, case by case: tables modelled on upstream's allocatortesting
(our own cases), each stating exactly which devices each claim gets, that it cannot be
allocated (None), or the error upstream returns."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from policyd.dra.errors import AllocationAborted, AllocationError
from policyd.dra.features import NONE, AllocatorFeatures
from policyd.dra.nodes import Node
from policyd.dra.objects import decode_resource_claim
from policyd.dra.selectors import CelBackend, SelectorCache
from policyd.model.quantity import nano_value
from tests.unit.dra.dra_fixtures import (
    CLAIM_0,
    CLAIM_1,
    CLASS_A,
    CLASS_B,
    DRIVER_A,
    DRIVER_B,
    NODE_1,
    NODE_2,
    Case,
    FakeCompileError,
    FakeRuntimeError,
    Scene,
    allocated_claim,
    build,
    check,
    claim,
    d,
    device,
    device_class,
    fake_compile,
    first_available,
    one,
    picked,
    request,
    resource_slice,
    run,
    sub,
)

BASICS: dict[str, Case] = {
    "simple": Case(Scene([claim(CLAIM_0, request("req-0"))], [one()]),
                   [[d("req-0", "device-1")]]),
    "no-claims": Case(Scene([], [one()]), []),
    "no-slices": Case(Scene([claim(CLAIM_0, request("req-0"))]), None),
    "other-node": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [one("slice-1", "device-1", node=NODE_1, pool="pool-1"),
               one("slice-2", "device-2", node=NODE_2, pool="pool-2")],
              node=Node(NODE_2)),
        [[d("req-0", "device-2", "pool-2")]]),
    "not-enough-devices": Case(Scene([claim(CLAIM_0, request("req-0", count=2))], [one()]),
                               None),
    "two-of-three-first-fit": Case(
        Scene([claim(CLAIM_0, request("req-0", count=2))],
              [one("slice-1", "device-1", "device-2", "device-3")]),
        [[d("req-0", "device-1"), d("req-0", "device-2")]]),
    "class-selects-driver": Case(
        Scene([claim(CLAIM_0, request("req-0", CLASS_B))],
              [one("slice-a", driver=DRIVER_A), one("slice-b", driver=DRIVER_B)],
              classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)]),
        [[d("req-0", "device-1", driver=DRIVER_B)]]),
    "request-selector": Case(
        Scene([claim(CLAIM_0, request("req-0", selectors=["attr:model=big"]))],
              [resource_slice("slice-1", device("device-1", {"model": "small"}),
                              device("device-2", {"model": "big"}))]),
        [[d("req-0", "device-2")]]),
    "small-and-large-backtrack-requests": Case(
        # The large device comes first: the small request takes it at first and
        # the search has to back out of that choice.
        Scene([claim(CLAIM_0, request("req-0", selectors=["cap:memory>=1Gi"]),
                     request("req-1", selectors=["cap:memory>=2Gi"]))],
              [resource_slice("slice-1", device("device-2", capacity={"memory": "2Gi"}),
                              device("device-1", capacity={"memory": "1Gi"}))]),
        [[d("req-0", "device-1"), d("req-1", "device-2")]]),
    "small-and-large-backtrack-claims": Case(
        Scene([claim(CLAIM_0, request("req-0", selectors=["cap:memory>=1Gi"])),
               claim(CLAIM_1, request("req-0", selectors=["cap:memory>=2Gi"]))],
              [resource_slice("slice-1", device("device-2", capacity={"memory": "2Gi"}),
                              device("device-1", capacity={"memory": "1Gi"}))]),
        [[d("req-0", "device-1")], [d("req-0", "device-2")]]),
    "already-allocated-devices-are-skipped": Case(
        Scene([claim(CLAIM_0, request("req-0"))], [one("slice-1", "device-1", "device-2")],
              allocated=[allocated_claim("other", (DRIVER_A, "pool-1", "device-1"))]),
        [[d("req-0", "device-2")]]),
    "all-allocated": Case(
        Scene([claim(CLAIM_0, request("req-0"))], [one()],
              allocated=[allocated_claim("other", (DRIVER_A, "pool-1", "device-1"))]),
        None),
    "two-claims-do-not-share-a-device": Case(
        Scene([claim(CLAIM_0, request("req-0")), claim(CLAIM_1, request("req-0"))], [one()]),
        None),
    "several-drivers": Case(
        Scene([claim(CLAIM_0, request("req-0", CLASS_A), request("req-1", CLASS_B))],
              [one("slice-a", driver=DRIVER_A), one("slice-b", driver=DRIVER_B)],
              classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)]),
        [[d("req-0", "device-1"), d("req-1", "device-1", driver=DRIVER_B)]]),
    "network-attached-all-nodes": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [one(node=None, allNodes=True)]),
        [[d("req-0", "device-1")]]),
    "network-attached-node-selector-no-match": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [one(node=None, nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [
                  {"key": "region", "operator": "In", "values": ["r2"]}]}]})]),
        None),
    "slice-without-node-selection-is-skipped": Case(
        Scene([claim(CLAIM_0, request("req-0"))], [one(node=None)]), None),
    "max-32-per-claim": Case(
        Scene([claim(CLAIM_0, request("req-0", count=32))],
              [one("slice-1", *(f"device-{i:02d}" for i in range(33)))]),
        [[d("req-0", f"device-{i:02d}") for i in range(32)]]),
    "too-many-devices-single-request": Case(
        Scene([claim(CLAIM_0, request("req-0", count=33))], [one()]),
        error="claim default/claim-0: number of requested devices 33 exceeds the claim "
              "limit of 32"),
    "too-many-devices-total": Case(
        Scene([claim(CLAIM_0, request("req-0", count=16), request("req-1", count=17))],
              [one()]),
        error="claim default/claim-0: number of requested devices 33 exceeds the claim "
              "limit of 32"),
}


POOLS: dict[str, Case] = {
    "pools-sorted-by-driver-then-pool": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [one("slice-1", "device-b", driver=DRIVER_B, pool="pool-a"),
               one("slice-2", "device-z", driver=DRIVER_A, pool="pool-z"),
               one("slice-3", "device-y", driver=DRIVER_A, pool="pool-y")],
              classes=[device_class(CLASS_A, None, "true")]),
        [[d("req-0", "device-y", "pool-y")]]),
    "slices-sorted-by-name": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [one("slice-b", "device-x", count=2), one("slice-a", "device-y", count=2)]),
        [[d("req-0", "device-y")]]),
    "devices-split-across-slices": Case(
        Scene([claim(CLAIM_0, request("req-0", count=2))],
              [one("slice-1", "device-1", count=2), one("slice-2", "device-2", count=2)]),
        [[d("req-0", "device-1"), d("req-0", "device-2")]]),
    "newer-generation-replaces-older": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [one("slice-old", "device-old", generation=1),
               one("slice-new", "device-new", generation=2)]),
        [[d("req-0", "device-new")]]),
    "obsolete-slice-makes-pool-incomplete": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [one("slice-1", "device-1", count=2, generation=1),
               one("slice-1", "device-2", count=2, generation=2)]),
        None),
    "incomplete-pool-not-used": Case(
        Scene([claim(CLAIM_0, request("req-0"))], [one(count=2)]), None),
    "incomplete-pool-other-pool-used": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [one("slice-1", "device-1", pool="pool-1", count=2),
               one("slice-2", "device-2", pool="pool-2")]),
        [[d("req-0", "device-2", "pool-2")]]),
    "duplicate-device-invalid-pool-is-an-error-when-nothing-fits": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [one("slice-1", count=2), one("slice-1-2", count=2)]),
        error="invalid resource pools were encountered", node_error=True),
    "invalid-pool-is-ok-if-another-fits": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [one("slice-1", count=2), one("slice-1-2", count=2),
               one("slice-2", "device-2", pool="pool-2")]),
        [[d("req-0", "device-2", "pool-2")]]),
    "pool-of-other-node-slices-counts-for-completeness": Case(
        # Two slices of one pool serve different nodes: complete, usable from node-1.
        Scene([claim(CLAIM_0, request("req-0"))],
              [one("slice-1", "device-1", node=NODE_1, count=2),
               one("slice-2", "device-2", node=None, count=2,
                   nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [
                       {"key": "region", "operator": "In", "values": ["r9"]}]}]})]),
        [[d("req-0", "device-1")]]),
    "all-mode-multi-host-pool-takes-this-nodes-devices": Case(
        Scene([claim(CLAIM_0, request("req-0", mode="All"))],
              [one("slice-1", "device-1", node=NODE_1, count=2),
               one("slice-2", "device-2", node=NODE_2, count=2)]),
        [[d("req-0", "device-1")]]),
    "old-generation-complete-on-this-node-is-used": Case(
        # Both slices of generation 1 serve node-1, so node-1's view is complete and
        # generation 2 (on node-2) is not looked at: upstream allocates from it too.
        Scene([claim(CLAIM_0, request("req-0"))],
              [one("slice-1a", "device-1", node=NODE_1, count=2, generation=1),
               one("slice-1b", "device-2", node=NODE_1, count=2, generation=1),
               one("slice-2", "device-1", node=NODE_2, count=2, generation=2)]),
        [[d("req-0", "device-1")]]),
    "stale-generation-on-other-node-ignores-pool": Case(
        # node-1 still sees generation 1; generation 2 lives only on node-2's slice.
        Scene([claim(CLAIM_0, request("req-0"))],
              [one("slice-1", "device-1", node=NODE_1, count=2, generation=1),
               one("slice-2", "device-2", node=NODE_2, count=2, generation=2)]),
        None),
}


ALL_MODE: dict[str, Case] = {
    "all-devices-single": Case(
        Scene([claim(CLAIM_0, request("req-0", mode="All"))], [one()]),
        [[d("req-0", "device-1")]]),
    "all-devices-many": Case(
        Scene([claim(CLAIM_0, request("req-0", mode="All"))],
              [one("slice-1", "device-1", "device-2", count=2),
               one("slice-2", "device-3", count=2)]),
        [[d("req-0", "device-1"), d("req-0", "device-2"), d("req-0", "device-3")]]),
    "all-devices-with-selector": Case(
        Scene([claim(CLAIM_0, request("req-0", mode="All", selectors=["attr:ok=true"]))],
              [resource_slice("slice-1", device("device-1", {"ok": True}),
                              device("device-2", {"ok": False}),
                              device("device-3", {"ok": True}))]),
        [[d("req-0", "device-1"), d("req-0", "device-3")]]),
    "all-devices-none-match": Case(
        Scene([claim(CLAIM_0, request("req-0", mode="All", selectors=["false"]))], [one()]),
        None),
    "all-devices-no-slices": Case(
        Scene([claim(CLAIM_0, request("req-0", mode="All"))]), None),
    "all-devices-some-allocated": Case(
        Scene([claim(CLAIM_0, request("req-0", mode="All"))],
              [one("slice-1", "device-1", "device-2")],
              allocated=[allocated_claim("other", (DRIVER_A, "pool-1", "device-1"))]),
        None),
    "all-devices-of-the-incomplete-pool": Case(
        Scene([claim(CLAIM_0, request("req-0", mode="All"))], [one(count=2)]),
        error="claim default/claim-0, request req-0: asks for all devices, but resource "
              "pool driver-a/pool-1 is currently being updated"),
    "all-devices-of-an-invalid-pool": Case(
        Scene([claim(CLAIM_0, request("req-0", mode="All"))],
              [one("slice-1", count=2), one("slice-1-2", count=2)]),
        error="claim default/claim-0, request req-0: asks for all devices, but resource "
              "pool driver-a/pool-1 is currently invalid"),
    "all-devices-plus-another-driver": Case(
        Scene([claim(CLAIM_0, request("req-0", CLASS_A, mode="All")),
               claim(CLAIM_1, request("req-0", CLASS_B))],
              [one("slice-a", driver=DRIVER_A), one("slice-b", driver=DRIVER_B)],
              classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)]),
        [[d("req-0", "device-1")], [d("req-0", "device-1", driver=DRIVER_B)]]),
    "all-devices-no-solution": Case(
        Scene([claim(CLAIM_1, request("req-0")),
               claim(CLAIM_0, request("req-0", mode="All"))], [one()]),
        None),
    "all-devices-no-solution-reversed": Case(
        Scene([claim(CLAIM_0, request("req-0", mode="All")),
               claim(CLAIM_1, request("req-0"))], [one()]),
        None),
    "all-devices-too-many": Case(
        Scene([claim(CLAIM_0, request("req-0", mode="All"))],
              [one("slice-1", *(f"device-{i:02d}" for i in range(33)))]),
        error="claim default/claim-0: number of requested devices 33 exceeds the claim "
              "limit of 32"),
}


CONSTRAINTS: dict[str, Case] = {}


def _versions(*versions: str, extra: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [device(f"device-{i + 1}", {"driverVersion": {"version": v}, **(extra or {})})
            for i, v in enumerate(versions)]


CONSTRAINTS.update({
    "match-attribute": Case(
        Scene([claim(CLAIM_0, request("req-0"), request("req-1"),
                     constraints=[{"matchAttribute": f"{DRIVER_A}/driverVersion"}])],
              [resource_slice("slice-1", *_versions("1.0.0", "2.0.0", "1.0.0"))]),
        [[d("req-0", "device-1"), d("req-1", "device-3")]]),
    "match-attribute-missing-attribute": Case(
        Scene([claim(CLAIM_0, request("req-0"),
                     constraints=[{"matchAttribute": f"{DRIVER_A}/missing"}])], [one()]),
        None),
    "match-attribute-other-domain-needs-full-name": Case(
        # The bare name is only looked up under the device's own driver's domain.
        Scene([claim(CLAIM_0, request("req-0"),
                     constraints=[{"matchAttribute": "other.example.com/driverVersion"}])],
              [resource_slice("slice-1", *_versions("1.0.0"))]),
        None),
    "match-attribute-int-not-matching": Case(
        Scene([claim(CLAIM_0, request("req-0"), request("req-1"),
                     constraints=[{"matchAttribute": f"{DRIVER_A}/numa"}])],
              [resource_slice("slice-1", device("device-1", {"numa": 1}),
                              device("device-2", {"numa": 2}))]),
        None),
    "match-attribute-bool-vs-int-differ": Case(
        Scene([claim(CLAIM_0, request("req-0"), request("req-1"),
                     constraints=[{"matchAttribute": f"{DRIVER_A}/x"}])],
              [resource_slice("slice-1", device("device-1", {"x": 1}),
                              device("device-2", {"x": True}))]),
        None),
    "match-attribute-for-one-request": Case(
        Scene([claim(CLAIM_0, request("req-0"), request("req-1"),
                     constraints=[{"requests": ["req-0"],
                                   "matchAttribute": f"{DRIVER_A}/driverVersion"}])],
              [resource_slice("slice-1", *_versions("1.0.0", "2.0.0"))]),
        [[d("req-0", "device-1"), d("req-1", "device-2")]]),
    "match-attribute-backtracks": Case(
        # device-1 is the only one with its string value: the first choice for req-0
        # must be undone.
        Scene([claim(CLAIM_0, request("req-0"), request("req-1"),
                     constraints=[{"requests": ["req-0"],
                                   "matchAttribute": f"{DRIVER_A}/driverVersion"},
                                  {"matchAttribute": f"{DRIVER_A}/s"}])],
              [resource_slice("slice-1",
                              device("device-1", {"driverVersion": {"version": "1.0.0"},
                                                  "s": "a"}),
                              device("device-2", {"driverVersion": {"version": "2.0.0"},
                                                  "s": "b"}),
                              device("device-3", {"driverVersion": {"version": "3.0.0"},
                                                  "s": "b"}))]),
        [[d("req-0", "device-2"), d("req-1", "device-3")]]),
    "match-attribute-all-mode-is-an-error": Case(
        Scene([claim(CLAIM_0, request("req-0", mode="All"),
                     constraints=[{"matchAttribute": f"{DRIVER_A}/numa"}])],
              [resource_slice("slice-1", device("device-1", {"numa": 1}),
                              device("device-2", {"numa": 2}))]),
        error="claim default/claim-0, request req-0: cannot add device "
              "driver-a/pool-1/device-2 because a claim constraint would not be satisfied"),
    "distinct-attribute": Case(
        Scene([claim(CLAIM_0, request("req-0"), request("req-1"),
                     constraints=[{"distinctAttribute": f"{DRIVER_A}/numa"}])],
              [resource_slice("slice-1", device("device-1", {"numa": 1}),
                              device("device-2", {"numa": 1}),
                              device("device-3", {"numa": 2}))]),
        [[d("req-0", "device-1"), d("req-1", "device-3")]]),
    "distinct-attribute-not-set": Case(
        Scene([claim(CLAIM_0, request("req-0"),
                     constraints=[{"distinctAttribute": f"{DRIVER_A}/numa"}])], [one()]),
        None),
    "distinct-attribute-within-one-request-compares-last-value-only": Case(
        # Upstream remembers one value per request name: three devices of one
        # request only need to differ from the last one added.
        Scene([claim(CLAIM_0, request("req-0", count=3),
                     constraints=[{"distinctAttribute": f"{DRIVER_A}/numa"}])],
              [resource_slice("slice-1", device("device-1", {"numa": 1}),
                              device("device-2", {"numa": 2}),
                              device("device-3", {"numa": 1}))]),
        [[d("req-0", "device-1"), d("req-0", "device-2"), d("req-0", "device-3")]]),
    "empty-constraint-is-an-error": Case(
        Scene([claim(CLAIM_0, request("req-0"), constraints=[{"requests": ["req-0"]}])],
              [one()]),
        error="claim default/claim-0, constraint #0: empty constraint (unsupported "
              "constraint type?)"),
})


PRIORITIZED: dict[str, Case] = {
    "first-available-first-fits": Case(
        Scene([claim(CLAIM_0, first_available("req-0", sub("big", selectors=["false"]),
                                              sub("small")))],
              [one()]),
        [[d("req-0/small", "device-1")]]),
    "first-available-prefers-first": Case(
        Scene([claim(CLAIM_0, first_available("req-0", sub("two", count=2), sub("one")))],
              [one("slice-1", "device-1", "device-2")]),
        [[d("req-0/two", "device-1"), d("req-0/two", "device-2")]]),
    "first-available-none": Case(
        Scene([claim(CLAIM_0, first_available("req-0", sub("a", count=2),
                                              sub("b", count=3)))], [one()]),
        None),
    "first-available-backtracks-into-next-request": Case(
        # req-0/a takes device-1, then req-1 needs it: req-0 falls back to b.
        Scene([claim(CLAIM_0,
                     first_available("req-0", sub("a"), sub("b", selectors=["attr:k=y"])),
                     request("req-1", selectors=["attr:k=x"]))],
              [resource_slice("slice-1", device("device-1", {"k": "x"}),
                              device("device-2", {"k": "y"}))]),
        [[d("req-0/a", "device-2"), d("req-1", "device-1")]]),
    "first-available-all-mode": Case(
        Scene([claim(CLAIM_0, first_available("req-0", sub("all", mode="All",
                                                            selectors=["attr:k=x"]),
                                              sub("one")))],
              [resource_slice("slice-1", device("device-1", {"k": "x"}),
                              device("device-2", {"k": "x"}))]),
        [[d("req-0/all", "device-1"), d("req-0/all", "device-2")]]),
    "first-available-all-mode-nothing-matches-falls-back": Case(
        Scene([claim(CLAIM_0, first_available("req-0", sub("all", mode="All",
                                                            selectors=["false"]),
                                              sub("one")))],
              [one()]),
        [[d("req-0/one", "device-1")]]),
    "first-available-constraint-on-parent-request": Case(
        Scene([claim(CLAIM_0, first_available("req-0", sub("a", count=2)),
                     request("req-1"),
                     constraints=[{"requests": ["req-0", "req-1"],
                                   "matchAttribute": f"{DRIVER_A}/numa"}])],
              [resource_slice("slice-1", device("device-1", {"numa": 1}),
                              device("device-2", {"numa": 2}),
                              device("device-3", {"numa": 2}),
                              device("device-4", {"numa": 2}))]),
        [[d("req-0/a", "device-2"), d("req-0/a", "device-3"), d("req-1", "device-4")]]),
    "first-available-constraint-on-sub-request": Case(
        # The constraint names req-0/b only: sub-request a is not constrained.
        Scene([claim(CLAIM_0, first_available("req-0", sub("a", selectors=["false"]),
                                              sub("b")),
                     request("req-1"),
                     constraints=[{"requests": ["req-0/b", "req-1"],
                                   "matchAttribute": f"{DRIVER_A}/numa"}])],
              [resource_slice("slice-1", device("device-1", {"numa": 1}),
                              device("device-2", {"numa": 2}),
                              device("device-3", {"numa": 2}))]),
        [[d("req-0/b", "device-2"), d("req-1", "device-3")]]),
    "first-available-too-many-in-first-sub-request": Case(
        # The first sub-request alone would exceed 32 with req-1: the second is used.
        Scene([claim(CLAIM_0, first_available("req-0", sub("a", count=31),
                                              sub("b", count=1)),
                     request("req-1", count=2))],
              [one("slice-1", *(f"device-{i:02d}" for i in range(40)))]),
        [[d("req-0/b", "device-00"), d("req-1", "device-01"), d("req-1", "device-02")]]),
    "first-available-disabled": Case(
        Scene([claim(CLAIM_0, first_available("req-0", sub("a")))], [one()],
              features=AllocatorFeatures(prioritized_list=False)),
        error="claim default/claim-0, request req-0: has subrequests, but the "
              "DRAPrioritizedList feature is disabled"),
}


ADMIN_ACCESS: dict[str, Case] = {
    "admin-access-ignores-allocated": Case(
        Scene([claim(CLAIM_0, request("req-0", admin=True))], [one()],
              allocated=[allocated_claim("other", (DRIVER_A, "pool-1", "device-1"))]),
        [[d("req-0", "device-1") + " admin"]]),
    "admin-access-all-some-allocated": Case(
        Scene([claim(CLAIM_0, request("req-0", admin=True, mode="All"))],
              [one("slice-1", "device-1", "device-2")],
              allocated=[allocated_claim("other", (DRIVER_A, "pool-1", "device-1"))]),
        [[d("req-0", "device-1") + " admin", d("req-0", "device-2") + " admin"]]),
    "admin-access-not-twice-in-one-claim": Case(
        Scene([claim(CLAIM_0, request("req-0", admin=True),
                     request("req-1", admin=True, mode="All"))],
              [one("slice-1", "device-1", "device-2")]),
        None),
    "admin-access-separate-claims-share": Case(
        Scene([claim(CLAIM_0, request("req-0", admin=True)),
               claim(CLAIM_1, request("req-0", admin=True))],
              [one("slice-1", "device-1", "device-2")]),
        [[d("req-0", "device-1") + " admin"], [d("req-0", "device-1") + " admin"]]),
    "admin-access-takes-a-device-being-allocated": Case(
        Scene([claim(CLAIM_0, request("req-0")),
               claim(CLAIM_1, request("req-0", admin=True))],
              [one("slice-1", "device-1", "device-2")]),
        [[d("req-0", "device-1")], [d("req-0", "device-1") + " admin"]]),
    "admin-access-false-is-plain": Case(
        Scene([claim(CLAIM_0, request("req-0", admin=False))], [one()]),
        [[d("req-0", "device-1")]]),
    "admin-access-disabled": Case(
        Scene([claim(CLAIM_0, request("req-0", admin=False))], [one()],
              features=AllocatorFeatures(admin_access=False)),
        error="claim default/claim-0, request req-0: admin access is requested, but the "
              "feature is disabled"),
    "admin-access-results-do-not-take-devices": Case(
        Scene([claim(CLAIM_0, request("req-0"))], [one()],
              allocated=[allocated_claim("other", {
                  "request": "req", "driver": DRIVER_A, "pool": "pool-1",
                  "device": "device-1", "adminAccess": True})]),
        [[d("req-0", "device-1")]]),
}


def _tainted(name: str, *effects: str) -> dict[str, Any]:
    return device(name, taints=[{"key": f"k{i}", "value": "v", "effect": e}
                                for i, e in enumerate(effects)])


TAINTS: dict[str, Case] = {
    "tainted-devices-skipped": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [resource_slice("slice-1", _tainted("device-1", "NoSchedule"),
                              _tainted("device-2", "NoExecute"), device("device-3"))]),
        [[d("req-0", "device-3")]]),
    "taint-without-known-effect-ignored": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [resource_slice("slice-1", _tainted("device-1", "None"))]),
        [[d("req-0", "device-1")]]),
    "two-taints-one-tolerated": Case(
        Scene([claim(CLAIM_0, request("req-0", tolerations=[
            {"key": "k0", "operator": "Exists", "effect": "NoSchedule"}]))],
              [resource_slice("slice-1", _tainted("device-1", "NoSchedule", "NoExecute"))]),
        None),
    "two-taints-both-tolerated": Case(
        Scene([claim(CLAIM_0, request("req-0", tolerations=[
            {"key": "k0", "operator": "Exists"},
            {"key": "k1", "operator": "Equal", "value": "v", "effect": "NoExecute"}]))],
              [resource_slice("slice-1", _tainted("device-1", "NoSchedule", "NoExecute"))]),
        [[d("req-0", "device-1")]]),
    "toleration-value-must-match": Case(
        Scene([claim(CLAIM_0, request("req-0", tolerations=[{"key": "k0", "value": "w"}]))],
              [resource_slice("slice-1", _tainted("device-1", "NoSchedule"))]),
        None),
    "taints-disabled": Case(
        Scene([claim(CLAIM_0, request("req-0"))],
              [resource_slice("slice-1", _tainted("device-1", "NoSchedule"))],
              features=AllocatorFeatures(device_taints=False)),
        [[d("req-0", "device-1")]]),
    "tainted-prioritized-list": Case(
        Scene([claim(CLAIM_0, first_available(
            "req-0", sub("a"), sub("b", tolerations=[{"operator": "Exists"}])))],
              [resource_slice("slice-1", _tainted("device-1", "NoSchedule"))]),
        [[d("req-0/b", "device-1")]]),
    "tainted-admin-access": Case(
        Scene([claim(CLAIM_0, request("req-0", admin=True))],
              [resource_slice("slice-1", _tainted("device-1", "NoExecute"))]),
        None),
    "tainted-all-devices": Case(
        Scene([claim(CLAIM_0, request("req-0", mode="All"))],
              [resource_slice("slice-1", _tainted("device-1", "NoSchedule"))]),
        None),
}


ERRORS: dict[str, Case] = {
    "unknown-class": Case(
        Scene([claim(CLAIM_0, request("req-0", "class-x"))], [one()]),
        error="claim default/claim-0, request req-0: could not retrieve device class "
              'class-x: deviceclass.resource.k8s.io "class-x" not found'),
    "unknown-selector-type": Case(
        Scene([claim(CLAIM_0, {"name": "req-0", "exactly": {
            "deviceClassName": CLASS_A, "selectors": [{"other": {}}]}})], [one()]),
        error="claim default/claim-0, request req-0, selector #0: CEL expression empty "
              "(unsupported selector type?)"),
    "class-selector-of-unknown-type": Case(
        Scene([claim(CLAIM_0, request("req-0"))], [one()],
              classes=[{**device_class(), "spec": {"selectors": [{"other": {}}]}}]),
        error="class class-a: selector #0: CEL expression empty (unsupported selector "
              "type?)"),
    "unknown-allocation-mode": Case(
        Scene([claim(CLAIM_0, request("req-0", mode="Some"))], [one()]),
        error="claim default/claim-0, request req-0: unsupported count mode Some"),
    "missing-class-name": Case(
        Scene([claim(CLAIM_0, request("req-0", ""))], [one()]),
        error="claim default/claim-0, request req-0: missing device class name "
              "(unsupported request type?)"),
    "claim-selector-does-not-compile": Case(
        Scene([claim(CLAIM_0, request("req-0", selectors=["nonsense"]))], [one()]),
        error="claim default/claim-0: selector #0: CEL compile error: cannot compile "
              "'nonsense'"),
    "class-selector-does-not-compile": Case(
        Scene([claim(CLAIM_0, request("req-0"))], [one()],
              classes=[device_class(CLASS_A, DRIVER_A, "nonsense")]),
        error="class class-a: selector #1: CEL compile error: cannot compile 'nonsense'"),
    "class-selector-runtime-error": Case(
        Scene([claim(CLAIM_0, request("req-0"))], [one()],
              classes=[device_class(CLASS_A, DRIVER_A, "boom")]),
        error="class class-a: selector #1: CEL runtime error: no such key: boom"),
    "claim-selector-runtime-error-in-all-mode": Case(
        Scene([claim(CLAIM_0, request("req-0", mode="All", selectors=["boom"]))], [one()]),
        error="claim default/claim-0: selector #0: CEL runtime error: no such key: boom"),
    "selector-not-reached-is-not-compiled": Case(
        # The class rejects every device first, so the request's broken selector is
        # never compiled: upstream compiles lazily too.
        Scene([claim(CLAIM_0, request("req-0", selectors=["nonsense"]))], [one()],
              classes=[device_class(CLASS_A, DRIVER_B)]),
        None),
    "capacity-request-feature-disabled": Case(
        Scene([claim(CLAIM_0, request("req-0", capacity={"bw": "1"}))], [one()],
              features=AllocatorFeatures(consumable_capacity=False)),
        error="claim default/claim-0, request req-0: has capacity requests, but the "
              "DRAConsumableCapacity feature is disabled"),
    "capacity-sub-request-feature-disabled": Case(
        Scene([claim(CLAIM_0, first_available("req-0", sub("s", capacity={"bw": "1"})))],
              [one()], features=AllocatorFeatures(consumable_capacity=False)),
        error="claim default/claim-0, subrequest s: has capacity requests, but the "
              "DRAConsumableCapacity feature is disabled"),
}


def _cases(table: dict[str, Case]) -> list[Any]:
    return [pytest.param(case, id=name) for name, case in table.items()]


@pytest.mark.parametrize("case", _cases(BASICS))
def test_basics(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", _cases(POOLS))
def test_pools(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", _cases(ALL_MODE))
def test_all_mode(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", _cases(CONSTRAINTS))
def test_constraints(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", _cases(PRIORITIZED))
def test_prioritized_list(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", _cases(ADMIN_ACCESS))
def test_admin_access(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", _cases(TAINTS))
def test_taints(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", _cases(ERRORS))
def test_errors(case: Case) -> None:
    check(case)


def test_all_features_off_still_allocates_plain_requests() -> None:
    check(Case(Scene([claim(CLAIM_0, request("req-0"))], [one()], features=NONE),
               [[d("req-0", "device-1")]]))


def test_selectors_compile_once_and_keep_their_errors() -> None:
    compiled: list[str] = []

    def counting(expression: str) -> Any:
        compiled.append(expression)
        return fake_compile(expression)

    scene = Scene([claim(CLAIM_0, request("req-0", count=2, selectors=["true"])),
                   claim(CLAIM_1, request("req-0", selectors=["true"]))],
                  [one("slice-1", "device-1", "device-2", "device-3")])
    allocator = build(scene, CelBackend(counting, FakeCompileError, FakeRuntimeError))
    claims = [decode_resource_claim(c, nano_value) for c in scene.claims]
    assert picked(allocator.allocate(scene.node, claims)) == [
        [d("req-0", "device-1"), d("req-0", "device-2")], [d("req-0", "device-3")]]
    allocator.allocate(scene.node, claims)
    assert sorted(compiled) == ["driver=driver-a", "true"]

    broken = SelectorCache(CelBackend(counting, FakeCompileError, FakeRuntimeError))
    first, again = broken.get("nonsense"), broken.get("nonsense")
    assert first is again and first.error == "cannot compile 'nonsense'"
    assert compiled.count("nonsense") == 1


def test_cancelled_search_stops_with_its_cause() -> None:
    scene = Scene([claim(CLAIM_0, request("req-0"))], [one()])
    claims = [decode_resource_claim(c, nano_value) for c in scene.claims]
    with pytest.raises(AllocationAborted) as raised:
        build(scene).allocate(scene.node, claims, cancelled=lambda: "context deadline exceeded")
    assert str(raised.value) == "filter operation aborted: context deadline exceeded"


def test_unreadable_slice_node_selector_fails_the_allocation() -> None:
    # Upstream prints the selector itself (Go's String()) after "parse node selector";
    # policyd names the broken field instead.
    scene = Scene([claim(CLAIM_0, request("req-0"))],
                  [one(node=None, nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [
                      {"key": "region", "operator": "Near", "values": ["r1"]}]}]})])
    with pytest.raises(AllocationError) as raised:
        run(scene)
    assert str(raised.value) == (
        "gather pool information: failed to perform node selection for slice slice-1: "
        "failed to parse node selector: nodeSelectorTerms[0].matchExpressions[0].operator: "
        'Unsupported value: "Near": supported values: "In", "NotIn", "Exists", '
        '"DoesNotExist", "Gt", "Lt"')


def test_many_claims_do_not_exhaust_the_recursion_limit() -> None:
    # 60 claims of 32 devices each: far deeper than Python's default limit of 1000.
    scene = Scene([claim(f"claim-{i}", request("req-0", count=32)) for i in range(60)],
                  [one("slice-1", *(f"device-{i:04d}" for i in range(60 * 32)))])
    limit = sys.getrecursionlimit()
    results = run(scene)
    assert results is not None
    assert results[-1].devices[-1].device == f"device-{60 * 32 - 1:04d}"
    # Raised for that search only: the limit is the whole process's.
    assert sys.getrecursionlimit() == limit
