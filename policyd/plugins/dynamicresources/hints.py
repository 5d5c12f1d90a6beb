"""DynamicResources' cluster events and queueing hints (EventsToRegister, v1.36.3,
with SchedulerQueueingHints GA: Node events are Add, UpdateNodeLabel and
UpdateNodeAllocatable, no taint updates).

ResourceClaim hints get the raw objects (`old` None for an add). Upstream's claim hint
also looks up the pod's other claims in the claim tracker and skips while one is
missing; a hint here sees only the changed claim, so it errs as upstream says it
should, towards trying the pod again: it answers QUEUE_SKIP only when the change is
not about one of the pod's claims, or changes nothing of the claim's status.
"""

from __future__ import annotations

from typing import Any

from policyd.framework.events import (
    DEVICE_CLASS,
    NODE,
    POD,
    QUEUE,
    QUEUE_SKIP,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
)
from policyd.model.records import Pod
from policyd.plugins.dynamicresources.claims import (
    ClaimLookupError,
    claim_name,
    controlled_by,
    pod_claim_entries,
)

_ADD_OR_UPDATE = ActionType.ADD | ActionType.UPDATE


def events() -> tuple[ClusterEventWithHint, ...]:
    return (
        # Slices and allocations' node selectors read node labels.
        ClusterEventWithHint(ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL
                                          | ActionType.UPDATE_NODE_ALLOCATABLE)),
        # Allocations live in claims: a claim created, allocated or freed.
        ClusterEventWithHint(ClusterEvent(RESOURCE_CLAIM, _ADD_OR_UPDATE),
                             after_claim_change),
        # The claim controller named a template's claim in the pod's status.
        ClusterEventWithHint(ClusterEvent(POD, ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM),
                             after_pod_change),
        ClusterEventWithHint(ClusterEvent(DEVICE_CLASS, _ADD_OR_UPDATE)),
        ClusterEventWithHint(ClusterEvent(RESOURCE_SLICE, _ADD_OR_UPDATE)),
    )


def after_claim_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    if not isinstance(new, dict) or (old is not None and not isinstance(old, dict)):
        return QUEUE
    meta = new.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    uses = False
    for entry in pod_claim_entries(pod):
        try:
            name, must_own = claim_name(pod, entry)
        except ClaimLookupError:
            return QUEUE_SKIP  # a template's claim not created yet: nothing helps
        if name is None or name != meta.get("name") or meta.get("namespace") != pod.namespace:
            continue
        if must_own and not controlled_by(meta, pod.uid):
            return QUEUE_SKIP  # the pod cannot use it, whatever else changes
        uses = True
    if old is not None and _allocation(old) is not None and _allocation(new) is None:
        # A claim was deallocated: its devices are free for any pod.
        return QUEUE
    if not uses:
        return QUEUE_SKIP
    if old is None:
        return QUEUE  # the pod's claim got created
    # A change outside the status (a finalizer added by a driver) changes nothing here.
    return QUEUE if _status(old) != _status(new) else QUEUE_SKIP


def after_pod_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    if not isinstance(new, Pod):
        return QUEUE
    if new.uid != pod.uid:
        return QUEUE_SKIP
    for entry in pod_claim_entries(new):
        try:
            claim_name(new, entry)
        except ClaimLookupError:
            return QUEUE_SKIP  # still waiting for a claim to be generated
    return QUEUE


def _status(claim: dict[str, Any]) -> Any:
    status = claim.get("status")
    # Semantic.DeepEqual: an absent and an empty status are the same.
    return status if status else {}


def _allocation(claim: dict[str, Any]) -> Any:
    status = claim.get("status")
    return status.get("allocation") if isinstance(status, dict) else None
