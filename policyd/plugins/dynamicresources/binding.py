"""Whether an allocated claim's devices are ready, failed or late at binding
(upstream's isClaimReadyForBinding and isClaimTimeout, v1.36.3, with
DRADeviceBindingConditions and DRAResourceClaimDeviceStatus on, as by default).

A result with `bindingConditions` waits for every one of them to be True in the
claim's `status.devices` entry for that device; one of its
`bindingFailureConditions` being True means binding failed. Filter treats an
allocated claim that failed, or that is still not ready `bindingTimeout` after its
`allocationTimestamp`, as unavailable, so PostFilter can free it for other devices.
Read from the raw claim: a malformed field reads as absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from policyd.features import go_quote


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _results(claim: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    allocation = _dict(_dict(claim.get("status")).get("allocation"))
    return [r for r in _list(_dict(allocation.get("devices")).get("results"))
            if isinstance(r, dict)]


def _device_conditions(claim: Mapping[str, Any], result: Mapping[str, Any]
                       ) -> dict[str, Mapping[str, Any]] | None:
    """The conditions by type of the result's device in status.devices."""
    for device in _list(_dict(claim.get("status")).get("devices")):
        if not isinstance(device, dict):
            continue
        if all(device.get(k) == result.get(k) for k in ("device", "driver", "pool")):
            return {str(c.get("type")): c
                    for c in _list(device.get("conditions")) if isinstance(c, dict)}
    return None


def binding_state(claim: Mapping[str, Any]) -> tuple[bool, str | None]:
    """(ready, failure) for an allocated claim: failure is upstream's detail of a
    failed binding (`claim=NAME, reason=R, message="M"`), None while none failed."""
    for result in _results(claim):
        conditions = _list(result.get("bindingConditions"))
        if not conditions:
            continue
        found = _device_conditions(claim, result)
        if found is None:
            return False, None
        for name in _list(result.get("bindingFailureConditions")):
            cond = found.get(name)
            if cond is not None and cond.get("status") == "True":
                meta = _dict(claim.get("metadata"))
                return False, (f"claim={meta.get('name', '')}, reason={cond.get('reason', '')}"
                               f", message={go_quote(str(cond.get('message', '')))}")
        if any(_dict(found.get(c)).get("status") != "True" for c in conditions):
            return False, None
    return True, None


def binding_timed_out(claim: Mapping[str, Any], timeout_seconds: float, now: float) -> bool:
    """Whether a result with binding conditions has waited past the timeout since the
    allocation's timestamp (none: never)."""
    allocation = _dict(_dict(claim.get("status")).get("allocation"))
    stamp = allocation.get("allocationTimestamp")
    if not isinstance(stamp, str):
        return False
    try:
        allocated_at = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return False
    return any(r.get("bindingConditions") is not None for r in _results(claim)) and (
        allocated_at + timeout_seconds < now)
