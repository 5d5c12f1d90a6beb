"""Which devices allocated claims take (upstream's AllocatedState)."""

from __future__ import annotations

from typing import Any

from policyd.dra.objects import decode_resource_claim
from policyd.dra.state import DeviceID, gather_allocated_state
from policyd.model.quantity import nano_value
from tests.unit.dra.dra_fixtures import claim, request

GIB = 2**30 * 10**9


def allocated(*results: dict[str, Any]) -> Any:
    return decode_resource_claim(
        claim("c", request("r"), allocation={"devices": {"results": list(results)}}),
        nano_value)


def result(device: str, **extra: Any) -> dict[str, Any]:
    return {"request": "r", "driver": "x", "pool": "p", "device": device, **extra}


CLAIMS = [
    allocated(result("plain"), result("admin", adminAccess=True)),
    allocated(result("shared", shareID="s1", consumedCapacity={"bw": "1Gi"}),
              result("shared", shareID="s2", consumedCapacity={"bw": "2Gi"}),
              result("empty-share", shareID="s3", consumedCapacity={}),
              result("bare-share", shareID="s4")),
    decode_resource_claim(claim("unallocated", request("r")), nano_value),
]


def test_with_consumable_capacity() -> None:
    state = gather_allocated_state(CLAIMS, consumable_capacity=True)
    assert state.devices == {DeviceID("x", "p", "plain")}
    assert state.capacity == {DeviceID("x", "p", "shared"): {"bw": 3 * GIB},
                              DeviceID("x", "p", "empty-share"): {}}
    assert {s for _, s in state.shares} == {"s1", "s2", "s3", "s4"}
    assert state.is_allocated(DeviceID("x", "p", "shared"))
    # A share without consumed capacity is still a device in use (its counters count).
    assert state.is_allocated(DeviceID("x", "p", "bare-share"))
    assert not state.is_allocated(DeviceID("x", "p", "admin"))


def test_without_consumable_capacity_shares_are_whole_devices() -> None:
    state = gather_allocated_state(CLAIMS, consumable_capacity=False)
    assert state.devices == {DeviceID("x", "p", d) for d in ("plain", "shared",
                                                             "empty-share", "bare-share")}
    assert not state.capacity and not state.shares
