"""GangScheduling (kube-scheduler v1.36, alpha, feature gates GenericWorkload and
GangScheduling): the pods of a `scheduling.k8s.io/v1alpha2` PodGroup whose policy is
`gang: {minCount}` are placed together or not at all.

- PreEnqueue holds a member back (silently, until a Pod or PodGroup Add moves it)
  while its PodGroup does not exist, or while fewer than `minCount` of the group's pods
  exist;
- Permit makes each member wait (up to five minutes) until `minCount` of the group are
  scheduled (assumed or bound); the pod that completes the quorum allows the waiting
  ones.

The pod group scheduling cycle (policyd.engine.pod_group) tries the group's pending
pods together first, so the quorum is judged on one snapshot; this plugin's Permit is
the same in that cycle and in the binding cycles after it: `ClusterState` counts the
assumed pods in both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policyd.framework import Code, CycleState, PluginError, Status
from policyd.framework.events import (
    POD,
    POD_GROUP,
    QUEUE,
    QUEUE_SKIP,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
)
from policyd.framework.waiting_pods import WaitingPods
from policyd.model.cluster import ClusterState
from policyd.model.pod_groups import WORKLOAD_API, GroupKey, PodGroup
from policyd.model.records import Pod
from policyd.plugins import names
from policyd.problems import field_problem

DEFAULT_WEIGHT: int | None = None

# How long a gang's member waits at Permit for its quorum (permitTimeoutDuration).
PERMIT_TIMEOUT_S = 300.0

# Upstream's texts (%q of a name the API server checked: plain double quotes).
WAITING_FOR_GROUP = "waiting for pods's pod group \"{name}\" to appear in scheduling queue"
WAITING_FOR_PODS = "waiting for minCount pods from a gang to appear in scheduling queue"
WAITING_FOR_QUORUM = "waiting for minCount pods from a gang to be scheduled"


def workload_group(pod: Pod) -> GroupKey | None:
    """The scheduling.k8s.io group of `pod` (its spec.schedulingGroup), if any."""
    if not pod.scheduling_group:
        return None
    return GroupKey(WORKLOAD_API, pod.namespace, pod.scheduling_group)


class GangScheduling:
    name = names.GANG_SCHEDULING

    def __init__(self) -> None:
        self._waiting: WaitingPods | None = None

    def use_waiting_pods(self, waiting: WaitingPods) -> None:
        self._waiting = waiting

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        # A pod added may complete the group's minCount; a PodGroup added may be the
        # one a member waits for. schedulingGroup and PodGroups are immutable: no
        # Update events.
        return (ClusterEventWithHint(ClusterEvent(POD, ActionType.ADD), _pod_added),
                ClusterEventWithHint(ClusterEvent(POD_GROUP, ActionType.ADD), _group_added))

    def pre_enqueue(self, pod: Pod, cluster: ClusterState) -> Status | None:
        key = workload_group(pod)
        if key is None:
            return None
        group = cluster.pod_groups.get(key)
        if group is None:
            return Status.unresolvable(WAITING_FOR_GROUP.format(name=key.name))
        if group.min_count is None:
            return None
        if cluster.group_counts(key).all < group.min_count:
            return Status.unresolvable(WAITING_FOR_PODS)
        return None

    def permit(self, state: CycleState, pod: Pod, node_name: str
               ) -> tuple[Status | None, float]:
        key = workload_group(pod)
        if key is None:
            return None, 0.0
        cluster = state.cluster
        assert cluster is not None
        group = cluster.pod_groups.get(key)
        if group is None:
            # Removed meanwhile: an error, so the pod is retried once it is back.
            return Status.error(f"failed to get podGroup {key}: podgroup.scheduling.k8s.io "
                                f"\"{key.name}\" not found"), 0.0
        if group.min_count is None:
            return None, 0.0
        if cluster.group_counts(key).scheduled < group.min_count:
            return Status(Code.WAIT, (WAITING_FOR_QUORUM,)), PERMIT_TIMEOUT_S
        if self._waiting is not None:
            for uid in cluster.group_assumed(key):
                waiting = self._waiting.get(uid)
                if waiting is not None:
                    waiting.allow(self.name)
        return None, 0.0


def _pod_added(pod: Pod, old: Any, new: Any) -> QueueingHint:
    key = workload_group(pod)
    return QUEUE if key is not None and isinstance(new, Pod) and workload_group(new) == key \
        else QUEUE_SKIP


def _group_added(pod: Pod, old: Any, new: Any) -> QueueingHint:
    key = workload_group(pod)
    return QUEUE if isinstance(new, PodGroup) and new.key == key else QUEUE_SKIP


def new(args: Mapping[str, Any] | None = None) -> GangScheduling:
    if args:
        raise PluginError(names.GANG_SCHEDULING,
                          [field_problem("", "GangScheduling takes no arguments")])
    return GangScheduling()
