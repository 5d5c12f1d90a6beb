"""Consumable capacity in the allocator: shared devices, request policies, share IDs
and the capacity each share consumes."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.dra.features import AllocatorFeatures
from tests.unit.dra.dra_fixtures import (
    CLAIM_0,
    CLAIM_1,
    DRIVER_A,
    Case,
    Scene,
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

CLAIM_2 = "claim-2"


def shared(name: str, bandwidth: Any = "10Gi", **extra: Any) -> dict[str, Any]:
    return device(name, capacity={"bw": bandwidth}, allowMultipleAllocations=True, **extra)


def policy(value: str, **request_policy: Any) -> dict[str, Any]:
    return {"value": value, "requestPolicy": request_policy}


def share_claim(name: str, bandwidth: str | None = None, **kwargs: Any) -> dict[str, Any]:
    capacity = {"bw": bandwidth} if bandwidth is not None else None
    return claim(name, request("req-0", capacity=capacity, **kwargs))


def shared_result(claim_data: dict[str, Any],
                  slice_devices: list[dict[str, Any]]) -> tuple[Any, ...]:
    results = run(Scene([claim_data], [resource_slice("slice-1", *slice_devices)]))
    assert results is not None
    (result,) = results
    (chosen,) = result.devices
    consumed = {k: q.text for k, q in (chosen.consumed_capacity or {}).items()}
    return chosen.device, chosen.share_id, consumed


CAPACITY: dict[str, Case] = {
    "two-shares-of-one-device": Case(
        Scene([share_claim(CLAIM_0, "4Gi"), share_claim(CLAIM_1, "4Gi")],
              [resource_slice("slice-1", shared("device-1"), shared("device-2"))]),
        [[d("req-0", "device-1")], [d("req-0", "device-1")]]),
    "third-share-does-not-fit": Case(
        Scene([share_claim(CLAIM_0, "4Gi"), share_claim(CLAIM_1, "4Gi"),
               share_claim(CLAIM_2, "4Gi")],
              [resource_slice("slice-1", shared("device-1"), shared("device-2"))]),
        [[d("req-0", "device-1")], [d("req-0", "device-1")], [d("req-0", "device-2")]]),
    "no-capacity-left-anywhere": Case(
        Scene([share_claim(CLAIM_0, "6Gi"), share_claim(CLAIM_1, "6Gi")],
              [resource_slice("slice-1", shared("device-1"))]),
        None),
    "allocated-shares-count": Case(
        Scene([share_claim(CLAIM_0, "4Gi")],
              [resource_slice("slice-1", shared("device-1"), shared("device-2"))],
              allocated=[claim("other", request("req"), allocation={"devices": {"results": [
                  {"request": "req", "driver": DRIVER_A, "pool": "pool-1",
                   "device": "device-1", "shareID": "s-1",
                   "consumedCapacity": {"bw": "8Gi"}}]}})]),
        [[d("req-0", "device-2")]]),
    "request-without-capacity-takes-all-of-it": Case(
        Scene([share_claim(CLAIM_0), share_claim(CLAIM_1, "1Gi")],
              [resource_slice("slice-1", shared("device-1"))]),
        None),
    "request-naming-unknown-capacity-skips-device": Case(
        Scene([claim(CLAIM_0, request("req-0", capacity={"other": "1"}))],
              [resource_slice("slice-1", shared("device-1"),
                              device("device-2", capacity={"other": "4"},
                                     allowMultipleAllocations=True))]),
        [[d("req-0", "device-2")]]),
    "valid-range-max-exceeded": Case(
        Scene([share_claim(CLAIM_0, "6Gi")],
              [resource_slice("slice-1", shared("device-1", policy(
                  "10Gi", validRange={"min": "1Gi", "max": "4Gi"})))]),
        None),
    "valid-values-above-all": Case(
        Scene([share_claim(CLAIM_0, "6Gi")],
              [resource_slice("slice-1", shared("device-1", policy(
                  "10Gi", validValues=["1Gi", "4Gi"])))]),
        None),
    "zero-request-policy-default": Case(
        # The default 0 lets any number of requests without a bw share the device.
        Scene([share_claim(CLAIM_0), share_claim(CLAIM_1)],
              [resource_slice("slice-1", shared("device-1", policy("10Gi", default="0")))]),
        [[d("req-0", "device-1")], [d("req-0", "device-1")]]),
    "dedicated-device-capacity-too-small": Case(
        Scene([share_claim(CLAIM_0, "20Gi")],
              [resource_slice("slice-1", device("device-1", capacity={"bw": "10Gi"}))]),
        None),
    "dedicated-device-is-not-shared": Case(
        Scene([share_claim(CLAIM_0, "1Gi"), share_claim(CLAIM_1, "1Gi")],
              [resource_slice("slice-1", device("device-1", capacity={"bw": "10Gi"}))]),
        None),
    "sub-request-with-capacity": Case(
        Scene([claim(CLAIM_0, first_available("req-0", sub("a", capacity={"bw": "20Gi"}),
                                              sub("b", capacity={"bw": "2Gi"})))],
              [resource_slice("slice-1", shared("device-1"))]),
        [[d("req-0/b", "device-1")]]),
    "all-mode-filters-devices-without-room": Case(
        Scene([claim(CLAIM_0, request("req-0", mode="All", capacity={"bw": "6Gi"}))],
              [resource_slice("slice-1", shared("device-1"), shared("device-2", "4Gi"),
                              shared("device-3"))]),
        [[d("req-0", "device-1"), d("req-0", "device-3")]]),
    "shares-of-a-partition-consume-counters-once": Case(
        Scene([share_claim(CLAIM_0, "4Gi"), share_claim(CLAIM_1, "4Gi")],
              [resource_slice("slice-1", shared("device-1", consumesCounters=[
                  {"counterSet": "gpu-0", "counters": {"memory": {"value": "6Gi"}}}]),
                  count=2),
               resource_slice("slice-c", sharedCounters=[
                   {"name": "gpu-0", "counters": {"memory": {"value": "8Gi"}}}], count=2)]),
        [[d("req-0", "device-1")], [d("req-0", "device-1")]]),
    "capacity-checked-before-constraints": Case(
        Scene([claim(CLAIM_0, request("req-0", capacity={"bw": "8Gi"}),
                     constraints=[{"matchAttribute": f"{DRIVER_A}/numa"}])],
              [resource_slice("slice-1", shared("device-1", "4Gi", attributes={"numa": 1}),
                              shared("device-2", attributes={"numa": 2}))]),
        [[d("req-0", "device-2")]]),
    "capacity-rejection-rolls-back-constraints": Case(
        # req-1 wants all of device-1 that req-0's first share leaves too small: the
        # rejection comes after the constraint accepted device-1 and must undo it, or
        # the retry after req-0 moves would see a duplicate and fail.
        Scene([claim(CLAIM_0, request("req-0", capacity={"bw": "4Gi"}),
                     request("req-1", mode="All", capacity={"bw": "8Gi"},
                             selectors=["attr:k=all"]),
                     constraints=[{"requests": ["req-1"],
                                   "distinctAttribute": f"{DRIVER_A}/numa"}])],
              [resource_slice("slice-1", shared("device-1", attributes={"numa": 1,
                                                                        "k": "all"}),
                              shared("device-2", attributes={"numa": 2}))]),
        [[d("req-0", "device-2"), d("req-1", "device-1")]]),
    "backing-out-a-second-share-keeps-the-first-shares-counters": Case(
        # claim-0's share of device-1 holds its only counter. claim-1's req-1 first
        # shares device-1 too (no counter needed), then must move to device-2 for the
        # constraint with req-2; undoing that second share must leave device-1 marked
        # as shared, or req-3's share would be charged the counter again and fail.
        Scene([claim(CLAIM_0, request("req-0", selectors=["attr:kind=shared"])),
               claim(CLAIM_1, request("req-1", selectors=["attr:fallback=yes"]),
                     request("req-2", selectors=["attr:kind=gate"]),
                     request("req-3", selectors=["attr:kind=shared"]),
                     constraints=[{"requests": ["req-1", "req-2"],
                                   "matchAttribute": f"{DRIVER_A}/color"}])],
              [resource_slice("slice-1",
                              device("device-1", {"kind": "shared", "fallback": "yes",
                                                  "color": "red"},
                                     allowMultipleAllocations=True,
                                     consumesCounters=[{"counterSet": "set", "counters": {
                                         "c": {"value": "1"}}}]),
                              device("device-2", {"fallback": "yes", "color": "blue"}),
                              device("device-3", {"kind": "gate", "color": "blue"}),
                              count=2),
               resource_slice("slice-c", sharedCounters=[
                   {"name": "set", "counters": {"c": {"value": "1"}}}], count=2)]),
        [[d("req-0", "device-1")],
         [d("req-1", "device-2"), d("req-2", "device-3"), d("req-3", "device-1")]]),
    "allocated-share-consumes-the-pools-counters": Case(
        Scene([claim(CLAIM_0, request("req-0", selectors=["attr:mode=b"]))],
              [resource_slice("slice-1",
                              *(device(f"device-{m}", {"mode": m},
                                       allowMultipleAllocations=True,
                                       consumesCounters=[{"counterSet": "set", "counters": {
                                           "c": {"value": "1"}}}]) for m in "ab"),
                              count=2),
               resource_slice("slice-c", sharedCounters=[
                   {"name": "set", "counters": {"c": {"value": "1"}}}], count=2)],
              allocated=[claim("other", request("req"), allocation={"devices": {"results": [
                  {"request": "req", "driver": DRIVER_A, "pool": "pool-1",
                   "device": "device-a", "shareID": "s-1"}]}})]),
        None),
    "shared-device-in-several-requests-with-distinct-constraint": Case(
        # The constraint covers req-0 and req-1 only: req-1 falls back to its second
        # sub-request and device-2, while req-2 shares device-1 with req-0.
        Scene([claim(CLAIM_0, *(first_available(f"req-{i}", sub("a", selectors=["attr:b=true"]),
                                                sub("b")) for i in range(3)),
                     constraints=[{"requests": ["req-0", "req-1"],
                                   "distinctAttribute": f"{DRIVER_A}/b"}])],
              [resource_slice("slice-1",
                              device("device-1", {"b": True}, allowMultipleAllocations=True),
                              device("device-2", {"b": False}, allowMultipleAllocations=True))]),
        [[d("req-0/a", "device-1"), d("req-1/b", "device-2"), d("req-2/a", "device-1")]]),
    "feature-off-shared-device-is-dedicated": Case(
        Scene([claim(CLAIM_0, request("req-0")), claim(CLAIM_1, request("req-0"))],
              [resource_slice("slice-1", shared("device-1"))],
              features=AllocatorFeatures(consumable_capacity=False)),
        None),
}


@pytest.mark.parametrize("case", [pytest.param(c, id=n) for n, c in CAPACITY.items()])
def test_capacity(case: Case) -> None:
    check(case)


@pytest.mark.parametrize(("bandwidth", "requested", "consumed"), [
    pytest.param("10Gi", "4Gi", "4Gi", id="plain"),
    pytest.param("10Gi", None, "10Gi", id="no-request-takes-the-capacity"),
    pytest.param(policy("10Gi", default="1Gi"), None, "1Gi", id="policy-default"),
    pytest.param(policy("10Gi", validRange={"min": "1Gi", "step": "1Gi"}), "1536Mi", "2Gi",
                 id="range-rounds-up-to-step"),
    pytest.param(policy("10Gi", validRange={"min": "2Gi"}), "1Gi", "2Gi",
                 id="range-rounds-up-to-min"),
    pytest.param(policy("10Gi", validRange={"min": "1Gi"}), "1536Mi", "1536Mi",
                 id="range-without-step-keeps-request"),
    pytest.param(policy("10Gi", validValues=["1Gi", "4Gi"]), "2Gi", "4Gi",
                 id="valid-values-round-up"),
    pytest.param(policy("1000", validRange={"min": "100", "step": "300"}), "401", "700",
                 id="range-step-plain-number"),
])
def test_share_consumes(bandwidth: Any, requested: str | None, consumed: str) -> None:
    assert shared_result(share_claim(CLAIM_0, requested), [shared("device-1", bandwidth)]) \
        == ("device-1", "share-1", {"bw": consumed})


def test_dedicated_device_has_no_share() -> None:
    assert shared_result(share_claim(CLAIM_0, "1Gi"),
                         [device("device-1", capacity={"bw": "10Gi"})]) \
        == ("device-1", None, {})
