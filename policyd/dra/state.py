"""The devices already taken when an allocation starts (upstream's AllocatedState).

Built from the claims the scheduler knows to be allocated (and those whose allocation
is in flight): a device a result names is in use, except for results with admin
access, which never take a device. With consumable capacity on, a result with a
shareID is a share of a device that allows multiple allocations: it records the share
and adds its consumed capacity to the device's total instead of taking the device.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import NamedTuple

from policyd.dra.objects import ResourceClaim


class DeviceID(NamedTuple):
    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True, slots=True)
class AllocatedState:
    # Membership is all the allocator asks of it: a caller may pass a live view of
    # its claim index (fixed while the cycle runs) instead of a set built per pod.
    devices: AbstractSet[tuple[str, str, str]] = frozenset()
    # (device, shareID) of every share in use
    shares: frozenset[tuple[DeviceID, str]] = frozenset()
    # consumed capacity of shared devices, summed over their shares, in billionths
    capacity: Mapping[DeviceID, Mapping[str, int]] = field(default_factory=dict)
    # the devices of `shares`
    shared_devices: frozenset[DeviceID] = frozenset()

    def is_allocated(self, device: DeviceID) -> bool:
        """Whether the device is taken whole or holds at least one share (its
        counters then count as consumed)."""
        return (device in self.devices or device in self.capacity
                or device in self.shared_devices)


def gather_allocated_state(claims: Iterable[ResourceClaim], *,
                           consumable_capacity: bool) -> AllocatedState:
    devices: set[DeviceID] = set()
    shares: set[tuple[DeviceID, str]] = set()
    capacity: dict[DeviceID, dict[str, int]] = {}
    for claim in claims:
        for result in claim.allocated or ():
            if result.admin_access:
                continue
            device = DeviceID(result.driver, result.pool, result.device)
            if consumable_capacity and result.share_id is not None:
                shares.add((device, result.share_id))
                if result.consumed_capacity is not None:
                    total = capacity.setdefault(device, {})
                    for name, q in result.consumed_capacity.items():
                        total[name] = total.get(name, 0) + q.nanos
                continue
            devices.add(device)
    return AllocatedState(frozenset(devices), frozenset(shares), capacity,
                          frozenset(d for d, _ in shares))
