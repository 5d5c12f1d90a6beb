"""Pod groups: the gangs a scheduler places all or nothing, from either of two APIs.

- `scheduling.k8s.io/v1alpha2` PodGroup (kube-scheduler v1.36, behind GenericWorkload):
  a pod joins through `spec.schedulingGroup.podGroupName`; the group's
  `spec.schedulingPolicy` is `gang: {minCount}` or `basic: {}` (no gang).
- `scheduling.x-k8s.io/v1alpha1` PodGroup (scheduler-plugins' Coscheduling, which
  Kubeflow's training operator, Spark and Argo emit): a pod joins through the
  `scheduling.x-k8s.io/pod-group` label; `spec.minMember`, `spec.minResources`,
  `spec.scheduleTimeoutSeconds`.

Both become one `PodGroup` record, keyed by `GroupKey` (api, namespace, name): the
two APIs' groups never mix even when their names are equal. `PodGroups` holds the
objects and which pods belong to which group; `ClusterState` keeps the membership in
step with its pods and answers the counts (upstream's PodGroupState: all, scheduled =
assumed + assigned, unscheduled).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from policyd.model.int64 import INT32
from policyd.model.records import Pod, _object_name, _Reader, _timestamp

WORKLOAD_API = "scheduling.k8s.io/v1alpha2"
COSCHEDULING_API = "scheduling.x-k8s.io/v1alpha1"
# The label scheduler-plugins reads a pod's group from (util.PodGroupLabel).
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"
# The plugin that places such groups (policyd.plugins.coscheduling), named here so the
# engine can tell a profile that holds them together without importing plugins.
COSCHEDULING_PLUGIN = "Coscheduling"
# The condition kube-scheduler writes on a scheduling.k8s.io PodGroup, and its reasons.
POD_GROUP_SCHEDULED = "PodGroupScheduled"
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"


class GroupKey(NamedTuple):
    api: str  # WORKLOAD_API or COSCHEDULING_API
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def group_key(pod: Pod) -> GroupKey | None:
    """The group `pod` is a member of: its spec.schedulingGroup first (upstream's own
    API), else its scheduler-plugins label; None for a pod of no group."""
    if pod.scheduling_group:
        return GroupKey(WORKLOAD_API, pod.namespace, pod.scheduling_group)
    label = pod.labels.get(COSCHEDULING_LABEL)
    if label:
        return GroupKey(COSCHEDULING_API, pod.namespace, label)
    return None


@dataclass(frozen=True, slots=True)
class PodGroup:
    key: GroupKey
    uid: str
    generation: int
    creation_timestamp: float
    # The quorum: the pods that must be placed together; None for a group whose policy
    # is not a gang (`basic`), which the gang plugins leave alone.
    min_count: int | None
    # Coscheduling's spec.minResources (nano units), its scheduleTimeoutSeconds (None:
    # the plugin's configured default).
    min_resources: dict[str, int] = field(default_factory=dict)
    timeout_s: int | None = None
    # Workload API: spec.schedulingConstraints.topology keys (TopologyAwareWorkload-
    # Scheduling, which policyd does not run).
    topology_keys: tuple[str, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def is_gang(self) -> bool:
        return self.min_count is not None

    def condition(self, type_: str) -> dict[str, Any] | None:
        for c in (self.raw.get("status") or {}).get("conditions") or ():
            if isinstance(c, dict) and c.get("type") == type_:
                return c
        return None


def pod_group_from_dict(obj: Any, api: str | None = None) -> PodGroup:
    """Decode either API's PodGroup: `api` says which (a list's items carry no
    apiVersion), else the object's apiVersion; InvalidObjectError naming the field on
    anything the API server would not have stored."""
    _, name = _object_name(obj, "PodGroup")
    api = api or obj.get("apiVersion") or WORKLOAD_API
    r = _Reader("PodGroup", name)
    if api not in (WORKLOAD_API, COSCHEDULING_API):
        raise r.fail("apiVersion", f"expected {WORKLOAD_API} or {COSCHEDULING_API}, "
                                   f"got {api!r}")
    meta = r.mapping(obj.get("metadata"), "metadata")
    spec = r.mapping(obj.get("spec"), "spec")
    namespace = r.string(meta.get("namespace"), "metadata.namespace") or "default"
    common: dict[str, Any] = {
        "key": GroupKey(api, namespace, name),
        "uid": r.string(meta.get("uid"), "metadata.uid") or f"{namespace}/{name}",
        "generation": r.integer(meta.get("generation"), "metadata.generation"),
        "creation_timestamp": _timestamp(r, meta.get("creationTimestamp"),
                                         "metadata.creationTimestamp"),
        "raw": obj,
    }
    if api == COSCHEDULING_API:
        timeout = spec.get("scheduleTimeoutSeconds")
        return PodGroup(
            min_count=r.integer(spec.get("minMember"), "spec.minMember", bounds=INT32),
            min_resources=r.resources(spec.get("minResources"), "spec.minResources",
                                      nano=True),
            timeout_s=None if timeout is None else r.integer(
                timeout, "spec.scheduleTimeoutSeconds", bounds=INT32),
            **common)
    policy = r.mapping(spec.get("schedulingPolicy"), "spec.schedulingPolicy")
    gang = policy.get("gang")
    min_count = None
    if gang is not None:
        min_count = r.integer(r.mapping(gang, "spec.schedulingPolicy.gang").get("minCount"),
                              "spec.schedulingPolicy.gang.minCount", bounds=INT32)
    constraints = r.mapping(spec.get("schedulingConstraints"), "spec.schedulingConstraints")
    topology = tuple(
        r.string(r.mapping(t, f"spec.schedulingConstraints.topology[{i}]").get("key"),
                 f"spec.schedulingConstraints.topology[{i}].key")
        for i, t in enumerate(r.seq(constraints.get("topology"),
                                    "spec.schedulingConstraints.topology")))
    return PodGroup(min_count=min_count, topology_keys=topology, **common)


class PodGroups:
    """The PodGroup objects by key, and the uids of each group's pods (pending and
    bound: `ClusterState` adds and removes them with its pods)."""

    def __init__(self) -> None:
        self._objects: dict[GroupKey, PodGroup] = {}
        self._members: dict[GroupKey, dict[str, Pod]] = {}
        # The topology domain (label key, value) a pod group cycle is trying the group
        # in, while it tries one domain at a time (sameTopology rules read it).
        self.pinned: dict[GroupKey, tuple[str, str]] = {}
        # How many of each group's pods count on a node (assumed or bound), kept by
        # `ClusterState` as it places and unplaces pods.
        self._placed: dict[GroupKey, int] = {}
        # The groups (uids) a pod group cycle found schedulable: their PodGroupScheduled
        # stays True whatever the watch shows yet (see `record_scheduled`).
        self._scheduled: set[str] = set()

    def record_scheduled(self, group: PodGroup, scheduled: bool) -> bool:
        """Note a pod group cycle's verdict on `group`; False when the verdict is not to
        be written: not scheduled, of a group a cycle found schedulable before.

        Upstream guards PodGroupScheduled=True against a False from a later cycle (for
        the members left out) by reading the group from its informer, which may not
        show the True yet: kube-scheduler then writes False over it. Remembering the
        verdict closes that race."""
        if scheduled:
            self._scheduled.add(group.uid)
            return True
        return group.uid not in self._scheduled

    def count_placed(self, pod: Pod, delta: int) -> None:
        key = group_key(pod)
        if key is not None:
            n = self._placed.get(key, 0) + delta
            if n:
                self._placed[key] = n
            else:
                del self._placed[key]

    def placed(self, key: GroupKey) -> int:
        return self._placed.get(key, 0)

    def upsert(self, group: PodGroup) -> None:
        old = self._objects.get(group.key)
        if old is not None and old.uid != group.uid:  # recreated: its verdict goes
            self._scheduled.discard(old.uid)
        self._objects[group.key] = group

    def delete(self, key: GroupKey) -> PodGroup | None:
        group = self._objects.pop(key, None)
        if group is not None:
            self._scheduled.discard(group.uid)
        return group

    def get(self, key: GroupKey) -> PodGroup | None:
        return self._objects.get(key)

    def __iter__(self) -> Iterator[PodGroup]:
        return iter(list(self._objects.values()))

    def __len__(self) -> int:
        return len(self._objects)

    def add_member(self, pod: Pod) -> None:
        key = group_key(pod)
        if key is not None:
            self._members.setdefault(key, {})[pod.uid] = pod

    def remove_member(self, pod: Pod) -> None:
        key = group_key(pod)
        members = self._members.get(key) if key is not None else None
        if members is not None:
            members.pop(pod.uid, None)
            if not members:
                del self._members[key]  # type: ignore[arg-type]

    def members(self, key: GroupKey) -> dict[str, Pod]:
        """uid -> the latest record of each pod of the group (do not modify)."""
        return self._members.get(key, _EMPTY)


_EMPTY: dict[str, Pod] = {}


def scheduled_condition_patch(group: PodGroup, status: str, reason: str, message: str,
                              now: str) -> dict[str, Any] | None:
    """The status patch that sets `group`'s PodGroupScheduled condition as upstream's
    updatePodGroupCondition does, or None when nothing would change: a group once
    scheduled is not set back to False (a later cycle for extra pods), the transition
    time moves only with the status, observedGeneration is the group's generation."""
    existing = group.condition(POD_GROUP_SCHEDULED)
    if existing is not None and existing.get("status") == "True" and status != "True":
        return None
    wanted = {"type": POD_GROUP_SCHEDULED, "status": status, "reason": reason,
              "message": message, "observedGeneration": group.generation}
    if existing is not None and all(existing.get(k) == v for k, v in wanted.items()):
        return None
    kept = (existing.get("lastTransitionTime")
            if existing is not None and existing.get("status") == status else None)
    wanted["lastTransitionTime"] = kept or now
    return {"status": {"conditions": [wanted]}}
