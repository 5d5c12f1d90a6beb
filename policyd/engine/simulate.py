"""Schedule a batch of pods offline, in queue order, each placement counted before the
next: the answer to "will these 300 pods fit, and where?"."""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from policyd.engine.cycle import ScheduleResult, place, refused_after_permit, schedule_one
from policyd.engine.pod_group import GroupSummary, summarize, summarize_pod_by_pod, try_pod_group
from policyd.engine.pod_group import group_answer as pod_group_answer
from policyd.engine.profiles import unserved_reason
from policyd.framework.interfaces import PostFilterResult
from policyd.framework.runtime import Framework
from policyd.model.cluster import ClusterState, nominated_node_name
from policyd.model.pod_groups import (
    COSCHEDULING_API,
    COSCHEDULING_PLUGIN,
    WORKLOAD_API,
    GroupKey,
    group_key,
)
from policyd.model.records import Pod


@dataclass(frozen=True, slots=True)
class SkippedPod:
    """A pod the scheduling queue would never try, and why, in words for users."""

    pod: Pod
    reason: str


@dataclass(frozen=True, slots=True)
class Preemption:
    """A pod that preempted: the node it was nominated to, the pods evicted there."""

    pod: Pod
    node: str
    victims: tuple[Pod, ...]


# Upstream's plugin whose PreEnqueue holds pods with spec.schedulingGates (policyd's
# queue holds them itself).
SCHEDULING_GATES = "SchedulingGates"


@dataclass(frozen=True, slots=True)
class GatedPod:
    """A pod kept out of the scheduling queue: by its schedulingGates, or by a
    PreEnqueue plugin (DynamicResources while a claim does not exist). kube-scheduler
    does not try it, and says nothing, until that changes."""

    pod: Pod
    plugin: str
    reason: str


def gate_of(pod: Pod, fw: Framework, cluster: ClusterState) -> GatedPod | None:
    """What holds `pod` out of the queue now, or None (upstream's PreEnqueue plugins,
    SchedulingGates first: its wording)."""
    if pod.scheduling_gates:
        return GatedPod(pod, SCHEDULING_GATES,
                        f"waiting for scheduling gates: [{' '.join(pod.scheduling_gates)}]")
    found = fw.run_pre_enqueue(pod, cluster)
    if found is None:
        return None
    plugin, status = found
    return GatedPod(pod, plugin, status.message)


@dataclass(slots=True)
class SimulationResult:
    results: list[ScheduleResult]
    gated: list[GatedPod]  # pods held out of the queue, as upstream holds them
    skipped: list[SkippedPod]  # pods no cycle would run for (see `skip_reason`)
    preemptions: list[Preemption] = field(default_factory=list)
    # Each pod group cycle's answer (scheduling.k8s.io PodGroups, GenericWorkload on).
    groups: list[GroupSummary] = field(default_factory=list)

    @property
    def scheduled(self) -> int:
        return sum(1 for r in self.results if r.node is not None)


def skip_reason(pod: Pod, frameworks: Mapping[str, Framework]) -> str | None:
    """Why kube-scheduler would not run a scheduling cycle for `pod`, or None.

    Finished and bound pods never enter its queue; a pod no profile serves is another
    scheduler's; a pod being deleted is dropped when popped (`skipPodSchedule`).
    Being gated is not a skip: such a pod waits (see `gate_of`)."""
    if pod.finished:
        return f"finished (status.phase is {pod.phase})"
    if pod.node_name:
        return f"already bound to node {pod.node_name} (spec.nodeName is set)"
    unserved = unserved_reason(pod, frameworks)
    if unserved is not None:
        return unserved
    if pod.deleting:
        return "being deleted (metadata.deletionTimestamp is set)"
    return None


def queue_order(fw: Framework, pods: Sequence[Pod]) -> list[Pod]:
    def compare(a: Pod, b: Pod) -> int:
        if fw.less(a, b):
            return -1
        return 1 if fw.less(b, a) else 0

    return sorted(pods, key=functools.cmp_to_key(compare))


def simulate(
    frameworks: Mapping[str, Framework],
    cluster: ClusterState,
    pods: Sequence[Pod],
    *,
    progress: Callable[[int, int], None] | None = None,
) -> SimulationResult:
    """Schedule `pods` (plus nothing else) on `cluster`, which is changed in place: every
    placed pod is assumed on its node before the next pod is tried. `frameworks` maps
    each schedulerName served to its profile; every pod not scheduled is in the result's
    `skipped` or `gated`, none is dropped. The PreEnqueue plugins judge every pod as
    the batch arrives, before any is placed (what they read, a claim's existence,
    placing pods does not change)."""
    for fw in frameworks.values():
        fw.use_cluster(cluster)
    gated: list[GatedPod] = []
    skipped: list[SkippedPod] = []
    queue: list[Pod] = []
    for pod in pods:
        reason = skip_reason(pod, frameworks)
        if reason is not None:
            skipped.append(SkippedPod(pod, reason))
        elif (gate := gate_of(pod, frameworks[pod.scheduler_name], cluster)) is not None:
            gated.append(gate)
        else:
            queue.append(pod)
    # One queue across profiles, ordered by the first profile's QueueSort: upstream
    # requires every profile to use the same QueueSort plugin.
    first = next(iter(frameworks.values()))
    ordered = queue_order(first, queue)
    # Pods an earlier preemption nominated (status.nominatedNodeName in the input)
    # are held in the nominator, as the daemon's informer would put them there.
    for pod in ordered:
        if node := nominated_node_name(pod):
            cluster.nominate(pod, node)
    results: list[ScheduleResult] = []
    preemptions: list[Preemption] = []
    groups: list[GroupSummary] = []
    # Each scheduler-plugins group's pods scheduled before the batch (its answer's
    # "already").
    keys = {group_key(p) for p in ordered}
    before = {key: cluster.group_counts(key).scheduled for key in keys
              if key is not None and key.api == COSCHEDULING_API}
    waits = _Waits(cluster)
    tried: set[str] = set()
    for i, pod in enumerate(ordered):
        if pod.uid in tried:
            continue  # scheduled with its pod group
        fw = frameworks[pod.scheduler_name]
        if pod.scheduling_group and fw.features.enabled("GenericWorkload"):
            members = _group_members(pod, ordered[i:], tried)
            tried.update(m.uid for m in members)
            placed, summary = _attempt_group(fw, members, cluster, waits)
            results += placed
            groups.append(summary)
            waits.settle()
            if progress is not None:
                progress(i + 1, len(ordered))
            continue
        result = _attempt(fw, pod, cluster, waits)
        post = result.post_filter
        if result.unschedulable and post is not None and post.nominated_node:
            # As the daemon: the victims go, the pod is nominated there, and it is
            # tried again once they are gone (here at once, and once only).
            preemptions.append(Preemption(pod, post.nominated_node, post.victims))
            retry = preempt(cluster, pod, post)
            result = _attempt(fw, retry, cluster, waits)
        results.append(result)
        waits.settle()
        if progress is not None:
            progress(i + 1, len(ordered))
    waits.time_out()
    groups += _pod_by_pod_groups(results, before)
    return SimulationResult(results, gated, skipped, preemptions, groups)


def _pod_by_pod_groups(results: list[ScheduleResult], before: dict[GroupKey, int]
                       ) -> list[GroupSummary]:
    """An answer per scheduler-plugins group among the results (its members tried one
    by one), from the outcomes the batch ended with."""
    members: dict[GroupKey, list[ScheduleResult]] = {}
    for r in results:
        key = group_key(r.pod)
        if key is not None and key.api == COSCHEDULING_API:
            members.setdefault(key, []).append(r)
    if not members:
        return []
    cluster = next(iter(members.values()))[0].cycle_state
    return [summarize_pod_by_pod(key, rs, before.get(key, 0), cluster.cluster)
            for key, rs in members.items()
            if cluster is not None and cluster.cluster is not None]


def group_answer(fw: Framework, cluster: ClusterState, pod: Pod) -> GroupSummary | None:
    """For `explain`: how `pod`'s group would fare, on `cluster` (changed: a state of
    its own): a scheduling.k8s.io group through its pod group cycle (left as it was),
    a scheduler-plugins group by simulating its pending pods of the profile one by
    one. None for a pod of no group the profile places as one."""
    key = group_key(pod)
    if key is None:
        return None
    if key.api != COSCHEDULING_API:
        return pod_group_answer(fw, cluster, pod)
    if not any(pl.name == COSCHEDULING_PLUGIN for pl in fw.permit_plugins):
        return None
    members = [p for p in cluster.group_pending(key)
               if p.scheduler_name == pod.scheduler_name and not p.deleting]
    if pod.uid not in {p.uid for p in members}:
        members.append(pod)
    (summary,) = simulate({pod.scheduler_name: fw}, cluster, members).groups
    return summary


def _attempt(fw: Framework, pod: Pod, cluster: ClusterState, waits: _Waits
             ) -> ScheduleResult:
    result = schedule_one(fw, pod, cluster)
    if result.node is not None:
        result = _place(fw, cluster, result, waits)
    return result


def _place(fw: Framework, cluster: ClusterState, result: ScheduleResult, waits: _Waits
           ) -> ScheduleResult:
    # What Reserve takes (VolumeBinding's chosen PVs and provisioning) stays taken:
    # offline there is no PreBind, the assumption is the outcome.
    result = place(fw, cluster, result)
    if result.permit_waits and result.node is not None:
        waits.add(fw, result)
    return result


def _group_members(pod: Pod, rest: Sequence[Pod], tried: set[str]) -> list[Pod]:
    """`pod` and the queued pods of its PodGroup after it (same scheduler), in
    upstream's group order: priority, then queue order (the first attempt)."""
    members = [p for p in rest if p.uid not in tried and p.namespace == pod.namespace
               and p.scheduling_group == pod.scheduling_group
               and p.scheduler_name == pod.scheduler_name]
    at = {p.uid: i for i, p in enumerate(members)}
    return sorted(members, key=lambda p: (-p.priority, at[p.uid]))


def _attempt_group(fw: Framework, members: list[Pod], cluster: ClusterState,
                   waits: _Waits) -> tuple[list[ScheduleResult], GroupSummary]:
    """The pod group cycle (`try_pod_group`), then its members placed on the nodes
    the trial found (Permit holds them until the last one completes the quorum), or
    each told why not; and the group's answer."""
    attempt = try_pod_group(fw, members, cluster)
    first = members[0]
    summary = summarize(attempt, GroupKey(WORKLOAD_API, first.namespace,
                                          first.scheduling_group), cluster, len(members))
    placed = {r.pod.uid for r in attempt.placed}
    trials = {m.result.pod.uid: m for m in attempt.members}
    results = []
    for pod in members:
        trial = trials.get(pod.uid)
        if trial is not None and pod.uid in placed:
            results.append(_place(fw, cluster, trial.result, waits))
        else:
            results.append(attempt.unplaced(trial, pod, len(cluster)))
    return results, summary


class _Waits:
    """The pods Permit told to wait, in a simulation without time: they keep their
    nodes while later pods are tried (as the daemon's would), a plugin may allow or
    reject them meanwhile, and those still waiting when the batch is done end as their
    shortest timeout would end them (the cluster as the timeouts leave it)."""

    def __init__(self, cluster: ClusterState) -> None:
        self.cluster = cluster
        self.pending: list[tuple[Framework, ScheduleResult]] = []

    def add(self, fw: Framework, result: ScheduleResult) -> None:
        assert result.node is not None and result.permit_waits
        fw.waiting_pods.add(result.pod, result.node, result.permit_waits, 0.0)
        self.pending.append((fw, result))

    def settle(self) -> None:
        """Act on the waits that ended: allowed pods keep their nodes, refused ones
        give them back and say why."""
        still = []
        for fw, result in self.pending:
            entry = fw.waiting_pods.get(result.pod.uid)
            if entry is not None and not entry.resolved:
                still.append((fw, result))
                continue
            if entry is not None:
                fw.waiting_pods.remove(result.pod.uid, entry)
                outcome = entry.outcome
                if outcome is not None:
                    refused_after_permit(fw, result, outcome)
                    self.cluster.forget(result.pod)
            result.permit_waits = None
        self.pending = still

    def time_out(self) -> None:
        for fw, result in self.pending:
            entry = fw.waiting_pods.get(result.pod.uid)
            if entry is not None:
                entry.expire(float("inf"))
        self.settle()


def preempt(cluster: ClusterState, pod: Pod, post: PostFilterResult) -> Pod:
    """What the daemon's API writes do, done to the cluster copy: the victims deleted,
    lower-priority nominations to that node cleared, the pod nominated there. Returns
    the pod as the API would show it next (status.nominatedNodeName set), so its
    retry tries that node first."""
    for victim in post.victims:
        cluster.remove_pod(victim.uid)
        cluster.clear_nomination(victim.uid)
    for other in post.clear_nominations:
        cluster.clear_nomination(other.uid)
    raw = copy.copy(pod.raw)
    raw["status"] = {**(raw.get("status") or {}), "nominatedNodeName": post.nominated_node}
    nominated = dataclasses.replace(pod, raw=raw, cache={})
    cluster.nominate(nominated, post.nominated_node)
    return nominated
