"""Coscheduling (scheduler-plugins v0.34.7, pkg/coscheduling): the pods of a
`scheduling.x-k8s.io/v1alpha1` PodGroup, joined by the `scheduling.x-k8s.io/pod-group`
label, are placed together or not at all, each through the ordinary per-pod cycle.

- QueueSort: priority, then the group's creation time (or the time of its last failed
  attempt, so a failing group does not block the head of the queue), else the pod's
  own, then namespace/name: a group's pods stay together in the queue.
- PreFilter: refuses a member while its group is backing off after a failure, while
  fewer than minMember of its pods exist (or scheduling gates hold too many), and when
  the cluster cannot hold the group's minResources (CheckClusterResource; a group
  that passed is not checked again for permitWaitingTimeSeconds).
- PostFilter: a member no node fits rejects the group's members waiting at Permit
  (unless minMember is already assigned or the gap is within podGroupRejectPercentage),
  starts the backoff, and says so in the FailedScheduling message.
- Permit: Wait until minMember of the group are assumed or bound (timeout: the group's
  scheduleTimeoutSeconds, else permitWaitingTimeSeconds); the member that completes
  the quorum allows the waiting ones. The first member to wait asks the queue to
  activate its siblings (PODS_TO_ACTIVATE).
- Unreserve: a member that does not bind rejects the group's waiting members.

A member whose PodGroup does not exist passes PreFilter and is refused at Permit, as
upstream. The queue sort reads the cluster given through `use_cluster` (the daemon's
and simulate's state); without one it orders by the pods alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from policyd.clock import REAL_CLOCK
from policyd.features import DEFAULTS, FeatureGates
from policyd.framework import Code, CycleState, PluginError, Status
from policyd.framework.cycle_state import PODS_TO_ACTIVATE
from policyd.framework.events import (
    COSCHEDULING_POD_GROUP,
    NODE,
    POD,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
)
from policyd.framework.fit_error import Diagnosis
from policyd.framework.interfaces import PostFilterResult
from policyd.framework.waiting_pods import WaitingPods
from policyd.model.cluster import ClusterState
from policyd.model.pod_groups import (
    COSCHEDULING_API,
    COSCHEDULING_LABEL,
    GroupKey,
    PodGroup,
)
from policyd.model.records import Pod
from policyd.plugins import names
from policyd.plugins.coscheduling.args import CoschedulingArgs, parse_args
from policyd.plugins.coscheduling.resource_gap import min_resources_of, resource_gap

DEFAULT_WEIGHT: int | None = None

# util.DefaultWaitTime: a wait of 0 seconds everywhere means a minute.
DEFAULT_WAIT_S = 60
# The go-cache that remembers groups past the minResources check expires an entry
# added with a zero duration after its default, three seconds.
PERMITTED_DEFAULT_TTL_S = 3.0

# Upstream's texts.
FAILED_RECENTLY = "podGroup {group} failed recently"
NOT_ENOUGH_SIBLINGS = ("pre-filter pod {pod} cannot find enough sibling pods, current pods "
                       "number: {count}, minMember of group: {min_member}")
GATED_SIBLINGS = "pre-filter pod {pod} cannot proceed due to gated pods in the same PodGroup"
NO_POD_GROUP = "can not find pod group"
GROUP_REJECTED = ("PodGroup {group} gets rejected due to Pod {pod} is unschedulable even "
                  "after PostFilter")
OPTIMISTIC_REJECTION = "optimistic rejection in PostFilter"
UNRESERVE_REJECTION = "rejection in Unreserve"
POD_GROUP_NOT_FOUND = "PodGroup not found"


def coscheduling_group(pod: Pod) -> GroupKey | None:
    """util.GetPodGroupLabel: the label alone decides (not spec.schedulingGroup)."""
    label = pod.labels.get(COSCHEDULING_LABEL)
    return GroupKey(COSCHEDULING_API, pod.namespace, label) if label else None


class Coscheduling:
    name = names.COSCHEDULING
    # PreFilter reads the group's pods in the cluster, not the pods on nodes.
    pre_filter_reads_other_pods = False

    def __init__(self, args: CoschedulingArgs | None = None,
                 features: FeatureGates = DEFAULTS) -> None:
        self.args = args or CoschedulingArgs()
        self.features = features
        self._waiting: WaitingPods | None = None
        self._cluster: ClusterState | None = None
        # Monotonic seconds for the expiring sets, wall seconds for the queue order.
        self.now: Callable[[], float] = REAL_CLOCK.now
        self.wall: Callable[[], float] = REAL_CLOCK.wall
        self._permitted: dict[GroupKey, float] = {}  # passed CheckClusterResource, until
        self._backed_off: dict[GroupKey, float] = {}  # refused at PreFilter, until
        self._last_failure: dict[GroupKey, float] = {}  # wall time, for Less

    def use_waiting_pods(self, waiting: WaitingPods) -> None:
        self._waiting = waiting

    def use_cluster(self, cluster: ClusterState) -> None:
        self._cluster = cluster

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        # Upstream registers Pod Add and PodGroup Add/Update, without hints. A member
        # refused at Permit (its group fell short) also waits, in policyd, for room:
        # a node added or grown, a pod gone; upstream leaves it to the 5-minute flush.
        return (ClusterEventWithHint(ClusterEvent(POD, ActionType.ADD | ActionType.DELETE)),
                ClusterEventWithHint(ClusterEvent(
                    NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE)),
                ClusterEventWithHint(ClusterEvent(COSCHEDULING_POD_GROUP,
                                                  ActionType.ADD | ActionType.UPDATE)))

    # -- QueueSort ------------------------------------------------------------------------

    def less(self, a: Pod, b: Pod) -> bool:
        if a.priority != b.priority:
            return a.priority > b.priority
        ta, tb = self._queue_time(a), self._queue_time(b)
        if ta == tb:
            return f"{a.namespace}/{a.name}" < f"{b.namespace}/{b.name}"
        return ta < tb

    def _queue_time(self, pod: Pod) -> float:
        """GetCreationTimestamp: the last failure of the pod's group, else the group's
        creation; the pod's own time (creation here, its first attempt upstream) for a
        pod of no group or of one not found."""
        key = coscheduling_group(pod)
        if key is None:
            return pod.creation_timestamp
        failed = self._last_failure.get(key)
        if failed is not None:
            return failed
        group = self._cluster.pod_groups.get(key) if self._cluster is not None else None
        return group.creation_timestamp if group is not None else pod.creation_timestamp

    # -- PreFilter ------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: Pod, nodes: Any
                   ) -> tuple[set[str] | None, Status | None]:
        message = self._pre_filter(state, pod, nodes)
        return None, None if message is None else Status.unresolvable(message)

    def _pre_filter(self, state: CycleState, pod: Pod, nodes: Any) -> str | None:
        key, group = self._group(state, pod)
        if key is None or group is None or group.min_count is None:
            return None
        now = self.now()
        if _alive(self._backed_off, key, now):
            return FAILED_RECENTLY.format(group=key)
        cluster = state.cluster
        assert cluster is not None
        siblings = list(cluster.pod_groups.members(key).values())
        gap = group.min_count - len(siblings)
        if gap > 0:
            return NOT_ENOUGH_SIBLINGS.format(pod=pod.name, count=len(siblings),
                                              min_member=group.min_count)
        # A member still behind a scheduling gate cannot be placed: each one counts
        # against the pods beyond minMember.
        gap += sum(1 for p in siblings if p.scheduling_gates)
        if gap > 0:
            return GATED_SIBLINGS.format(pod=pod.name)
        min_resources = min_resources_of(group.raw)
        if min_resources is None or _alive(self._permitted, key, now):
            return None
        gap_message = resource_gap(state.all_nodes or list(cluster), min_resources,
                                   group.min_count, key.namespace, key.name, self.features)
        if gap_message is not None:
            return gap_message
        self._permitted[key] = now + (self.args.permit_waiting_time_s
                                      or PERMITTED_DEFAULT_TTL_S)
        return None

    # -- PostFilter -----------------------------------------------------------------------

    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis
                    ) -> tuple[PostFilterResult | None, Status]:
        key, group = self._group(state, pod)
        if key is None or group is None or group.min_count is None:
            return None, Status.unschedulable(NO_POD_GROUP)
        cluster = state.cluster
        assert cluster is not None
        counts = cluster.group_counts(key)
        if counts.scheduled >= group.min_count:
            return None, Status(Code.UNSCHEDULABLE, ())
        missing = (group.min_count - counts.scheduled) / group.min_count
        if missing <= self.args.pod_group_reject_percentage / 100.0:
            return None, Status(Code.UNSCHEDULABLE, ())
        self._reject_waiting(key, OPTIMISTIC_REJECTION)
        if self.args.pod_group_backoff_s > 0 and counts.all >= group.min_count:
            self._backed_off[key] = self.now() + self.args.pod_group_backoff_s
        self._failed(key)
        return None, Status.unschedulable(GROUP_REJECTED.format(group=key, pod=pod.name))

    # -- Reserve / Permit -----------------------------------------------------------------

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        key, group = self._group(state, pod)
        if key is None or group is None:
            return
        self._reject_waiting(key, UNRESERVE_REJECTION)
        self._failed(key)

    def permit(self, state: CycleState, pod: Pod, node_name: str
               ) -> tuple[Status | None, float]:
        key, group = self._group(state, pod)
        if key is None:
            return None, 0.0
        if group is None or group.min_count is None:
            return Status.unschedulable(POD_GROUP_NOT_FOUND), 0.0
        cluster = state.cluster
        assert cluster is not None
        # The pod itself is assumed already: counted, as upstream inserts it first.
        counts = cluster.group_counts(key)
        if counts.scheduled >= group.min_count:
            self._last_failure.pop(key, None)
            if self._waiting is not None:
                for waiting in self._waiting.all():
                    if waiting.pod.uid != pod.uid and coscheduling_group(waiting.pod) == key:
                        waiting.allow(self.name)
            return None, 0.0
        if counts.scheduled == 1:
            # The first member to wait brings its siblings back from the
            # unschedulable pool (ActivateSiblings).
            state.write(PODS_TO_ACTIVATE, {
                uid for uid in cluster.pod_groups.members(key) if uid != pod.uid})
        return Status(Code.WAIT, ()), float(self._wait_s(group))

    # -- helpers --------------------------------------------------------------------------

    def _wait_s(self, group: PodGroup) -> int:
        """Permit's timeout: the group's scheduleTimeoutSeconds unless unset or 0, else
        the args' (GetWaitTimeDuration's minute when both are unset or 0; a group
        that says 0 gets the args' value as it is)."""
        if group.timeout_s:
            return group.timeout_s
        if group.timeout_s is None:
            return self.args.permit_waiting_time_s or DEFAULT_WAIT_S
        return self.args.permit_waiting_time_s

    def _group(self, state: CycleState, pod: Pod) -> tuple[GroupKey | None, PodGroup | None]:
        key = coscheduling_group(pod)
        if key is None:
            return None, None
        cluster = state.cluster if state.cluster is not None else self._cluster
        return key, cluster.pod_groups.get(key) if cluster is not None else None

    def _reject_waiting(self, key: GroupKey, message: str) -> None:
        if self._waiting is None:
            return
        for waiting in self._waiting.all():
            if coscheduling_group(waiting.pod) == key:
                waiting.reject(self.name, message)

    def _failed(self, key: GroupKey) -> None:
        """DeletePermittedPodGroup + MarkPodGroupScheduleFailure."""
        self._permitted.pop(key, None)
        self._last_failure[key] = self.wall()


def _alive(expiring: dict[GroupKey, float], key: GroupKey, now: float) -> bool:
    until = expiring.get(key)
    if until is None:
        return False
    if until <= now:
        del expiring[key]
        return False
    return True


def new(args: Mapping[str, Any] | None = None,
        features: FeatureGates = DEFAULTS) -> Coscheduling:
    problems: list[Any] = []
    parsed = parse_args(args, problems)
    if problems:
        raise PluginError(names.COSCHEDULING, problems)
    return Coscheduling(parsed, features)
