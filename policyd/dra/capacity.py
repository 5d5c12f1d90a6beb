"""Consumable capacity: how much of a shareable device's capacity a request takes.

A device with `allowMultipleAllocations` is shared: each allocation consumes part of
each capacity, rounded up to what the capacity's requestPolicy accepts (its validRange
from min in steps, or the next of its validValues), its default when the request does
not name the capacity, the whole capacity when there is no default. A request fits when
no consumed amount breaks the policy and, added to what is allocated and what is being
allocated in this attempt, stays within the capacity. Dedicated devices are checked the
same way, so a request cannot ask more of a device than it has. All values are exact
billionths.
"""

from __future__ import annotations

from collections.abc import Mapping

from policyd.dra.objects import DeviceCapacity, Quantity, RequestPolicy

_NANO = 10**9


def fits(allocated: Mapping[str, int] | None, requested: Mapping[str, Quantity] | None,
         capacity: Mapping[str, DeviceCapacity],
         allocating: Mapping[str, int] | None) -> bool:
    """Upstream's CmpRequestOverCapacity; a request naming a capacity the device does
    not have never fits (upstream reports it as an error the allocator skips over)."""
    if requested:
        for name in requested:
            if name not in capacity:
                return False
    if not requested and allocated is None and allocating is None:
        # The common case, a device nobody shares yet and a request without capacity:
        # each capacity consumes its default or all of itself, so only a policy or
        # a default above the capacity can refuse (the loop below, made short).
        for cap in capacity.values():
            policy = cap.request_policy
            if policy is None:
                continue
            consumed = policy.default if policy.default is not None else cap.value
            if violates_policy(consumed, policy) or consumed.nanos > cap.value.nanos:
                return False
        return True
    for name, cap in capacity.items():
        consumed = consumed_for(requested.get(name) if requested else None, cap)
        if violates_policy(consumed, cap.request_policy):
            return False
        total = consumed.nanos
        if allocated:
            total += allocated.get(name, 0)
        if allocating:
            total += allocating.get(name, 0)
        if total > cap.value.nanos:
            return False
    return True


def consumed_capacity(requested: Mapping[str, Quantity] | None,
                      capacity: Mapping[str, DeviceCapacity]) -> dict[str, Quantity]:
    """What one share takes of every capacity of the device."""
    return {name: consumed_for(requested.get(name) if requested else None, cap)
            for name, cap in capacity.items()}


def consumed_for(requested: Quantity | None, cap: DeviceCapacity) -> Quantity:
    policy = cap.request_policy
    if requested is None:
        if policy is not None and policy.default is not None:
            return policy.default
        return cap.value
    if policy is None:
        return requested
    if policy.valid_range is not None and policy.valid_range.min is not None:
        return _round_up_range(requested, policy)
    if policy.valid_values is not None:
        for value in policy.valid_values:  # ascending, API validation says
            if requested.nanos <= value.nanos:
                return value
    return requested


def _round_up_range(requested: Quantity, policy: RequestPolicy) -> Quantity:
    valid = policy.valid_range
    assert valid is not None and valid.min is not None
    if requested.nanos < valid.min.nanos:
        return valid.min
    if valid.step is None:
        return requested
    # Upstream rounds in whole units (Quantity.Value(), rounded up), not billionths.
    value, step, low = _units(requested), _units(valid.step), _units(valid.min)
    n, rest = divmod(value - low, step)
    if rest:
        n += 1
    total = low + step * n
    return Quantity(total * _NANO, binary_si(total))


def violates_policy(consumed: Quantity, policy: RequestPolicy | None) -> bool:
    if policy is None:
        return False
    # Upstream compares the Quantity structs here, which for quantities read from the
    # API means the same value written the same way.
    if policy.default is not None and consumed == policy.default:
        return False
    if policy.valid_range is not None:
        valid = policy.valid_range
        if valid.max is not None and consumed.nanos > valid.max.nanos:
            return True
        if valid.step is not None:
            low = _units(valid.min) if valid.min is not None else 0
            if (_units(consumed) - low) % _units(valid.step) != 0:
                return True
        return False
    if policy.valid_values:
        return all(consumed.nanos != v.nanos for v in policy.valid_values)
    return False


def _units(q: Quantity) -> int:
    return -(-q.nanos // _NANO)


_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def binary_si(value: int) -> str:
    """An integer as Kubernetes prints a BinarySI quantity: below 1024 in plain
    digits, otherwise the largest power-of-1024 suffix that divides it exactly."""
    if -1024 < value < 1024:
        return str(value)
    exponent = 0
    while exponent < len(_BINARY) - 1 and value % 1024 == 0:
        value //= 1024
        exponent += 1
    return f"{value}{_BINARY[exponent]}"
