"""Each claim's verdict on one node, for `policyd explain`: the devices it has or
would get there, or why not.

Upstream reports only the node's reason. On a node that passed, the verdicts are
Filter's decision (the devices allocated to each claim); on a rejected node an
unallocated claim is tried alone, which says whether that claim is the problem or
only the combination with the pod's other claims is, without changing the decision.
The allocator does not say which selector, constraint or taint left a request
without a device.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from policyd.dra.errors import AllocationError
from policyd.dra.nodes import Node
from policyd.dra.results import DeviceResult
from policyd.framework.interfaces import Verdict
from policyd.plugins.dynamicresources.allocation import ClaimInfo, DraState, matches


def claim_verdicts(data: DraState, node: Node,
                   binding_failed: Callable[[ClaimInfo], bool]) -> tuple[Verdict, ...]:
    decided = data.allocations_on(node.name)
    fresh = iter(decided or ())
    out = []
    for info in data.claims:
        key = info.claim.key
        if info.allocated:
            out.append(_allocated(info, node, binding_failed))
        elif decided is not None:
            out.append(Verdict(key, True, f"gets {_devices(next(fresh).devices)}"))
        else:
            out.append(_alone(data, info, node))
    return tuple(out)


def _allocated(info: ClaimInfo, node: Node,
               binding_failed: Callable[[ClaimInfo], bool]) -> Verdict:
    key = info.claim.key
    devices = [f"{d.driver}/{d.pool}/{d.device}" for d in info.decoded.allocated or ()]
    held = f"is allocated ({', '.join(devices) or 'no devices'})"
    if info.available_on is not None and not matches(info.available_on, node):
        return Verdict(key, False, f"{held}, to other nodes (its node selector does not "
                                   "match this node)")
    if binding_failed(info):
        return Verdict(key, False, f"{held}, and its devices' binding failed or timed out")
    return Verdict(key, True, held)


def _alone(data: DraState, info: ClaimInfo, node: Node) -> Verdict:
    key = info.claim.key
    if data.allocator is None:
        return Verdict(key, False, "was not tried")
    try:
        alone = data.allocator.allocate(node, [info.decoded])
    except AllocationError as err:
        return Verdict(key, False, f"cannot be allocated: {err}")
    if alone is None:
        return Verdict(key, False, "cannot be allocated here: no devices fit its requests")
    return Verdict(key, True, f"could get {_devices(alone[0].devices)} alone, but not "
                              "together with the pod's other claims")


def _devices(results: Sequence[DeviceResult]) -> str:
    if not results:
        return "no devices"
    return ", ".join(f"{d.driver}/{d.pool}/{d.device} (request {d.request})"
                     for d in results)

