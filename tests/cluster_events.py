"""The cluster events tests name, and what a plugin's registrations say about one:
shared by the tests of built-in hints, compiled policies' hints and the queue."""

from __future__ import annotations

from typing import Any

from policyd.framework.events import (
    ASSIGNED_POD,
    NODE,
    QUEUE,
    QUEUE_SKIP,
    UNSCHEDULED_POD,
    ActionType,
    ClusterEvent,
    QueueingHint,
    matches,
    registrations,
)
from policyd.model.records import Pod

A = ActionType
NODE_ADD = ClusterEvent(NODE, A.ADD)
NODE_LABEL = ClusterEvent(NODE, A.UPDATE_NODE_LABEL)
NODE_TAINT = ClusterEvent(NODE, A.UPDATE_NODE_TAINT)
NODE_ALLOC = ClusterEvent(NODE, A.UPDATE_NODE_ALLOCATABLE)
NODE_ANNOTATION = ClusterEvent(NODE, A.UPDATE_NODE_ANNOTATION)
POD_ADD = ClusterEvent(ASSIGNED_POD, A.ADD)
POD_DELETE = ClusterEvent(ASSIGNED_POD, A.DELETE)
POD_LABEL = ClusterEvent(ASSIGNED_POD, A.UPDATE_POD_LABEL)
OWN_UPDATE = ClusterEvent(UNSCHEDULED_POD, A.UPDATE)
OWN_TOLERATION = ClusterEvent(UNSCHEDULED_POD, A.UPDATE_POD_TOLERATION)


def hint(plugin: Any, event: ClusterEvent, pod: Pod, old: Any, new: Any) -> QueueingHint | None:
    """What `plugin` says about `event`: None when it did not register the event,
    QUEUE when any matching registration's hint (or a hint-less one) says so."""
    answers = [reg.hint(pod, old, new) if reg.hint else QUEUE
               for reg in registrations(plugin) if matches(reg.event, event)]
    if not answers:
        return None
    return QUEUE if QUEUE in answers else QUEUE_SKIP
