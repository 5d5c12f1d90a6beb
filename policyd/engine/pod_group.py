"""The pod group scheduling cycle (kube-scheduler v1.36's scheduleOnePodGroup, under
GenericWorkload): a gang's pending pods tried together on one snapshot before any of
them is bound.

`try_pod_group` runs, for each pending member in the order given (the caller's:
priority, then first attempt), the usual cycle, then assumes it on its node, Reserve
and Permit, so the next member sees it placed. A member no node fits is left out (the
others may still reach the quorum); an error stops the trial. Its PostFilter runs, for
the message, but a preemption it finds is not carried out: policyd does not preempt
for a gang's members (upstream v1.36 counts such a member as placed on its nominated
node and, when that completes the quorum, preempts and retries the group). The
group is schedulable when some member's Permit allowed it (the quorum is met). Then
every trial placement is undone (Unreserve, forget), in reverse order: the caller
places the members for real (`GroupAttempt.placed`) on the nodes the trial found, or
sends all of them back to the queue with `member_message`.

The same function serves the daemon (under its state lock) and simulate.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from policyd.engine.cycle import ScheduleResult, place, schedule_one
from policyd.framework import Code, Status
from policyd.framework.fit_error import Diagnosis
from policyd.framework.runtime import Framework
from policyd.model.cluster import ClusterState
from policyd.model.pod_groups import WORKLOAD_API, GroupKey, group_key
from policyd.model.records import Pod

# Upstream's errPodGroupUnschedulable and the group's texts.
GROUP_UNSCHEDULABLE = "pod group is unschedulable"


@dataclass(slots=True)
class MemberTrial:
    result: ScheduleResult  # node set: the member fitted there in the trial
    # Its Permit in the trial: None allowed, a WAIT status waiting for the quorum.
    permit: Status | None = None

    @property
    def fitted(self) -> bool:
        return self.result.node is not None


@dataclass(slots=True)
class GroupAttempt:
    members: list[MemberTrial] = field(default_factory=list)
    # Some member's Permit allowed it: the quorum is met on this snapshot.
    schedulable: bool = False
    # An error stopped the trial (a plugin failed): nobody is placed.
    error: Status | None = None

    @property
    def placed(self) -> list[ScheduleResult]:
        """The members to place for real, on their trial nodes (none unless the group
        is schedulable)."""
        if not self.schedulable or self.error is not None:
            return []
        return [m.result for m in self.members if m.fitted]

    def member_message(self, trial: MemberTrial) -> str:
        """What a member is told when it goes back to the queue: an unplaced member
        its own FitError (or error); a member that fitted in a group that is not
        schedulable, the group's verdict with its Permit's wait."""
        if self.error is not None and trial.result.error is None:
            return f"failed to schedule other pod from a pod group: {self.error.message}"
        if not trial.fitted:
            return trial.result.message
        return ", ".join((GROUP_UNSCHEDULABLE,
                          *(trial.permit.reasons if trial.permit is not None else ())))

    def unplaced(self, trial: MemberTrial | None, pod: Pod, num_nodes: int
                 ) -> ScheduleResult:
        """The result of a member that is not placed: its own (a FitError, an error),
        or, having fitted in a group short of its quorum, the group's verdict with no
        node; a member the trial never reached (an error stopped it) the group's
        error. Built on the trial's result, which it changes."""
        if trial is None:
            assert self.error is not None
            result = ScheduleResult(pod=pod, node=None, num_nodes=num_nodes)
            result.error = Status.error(self.member_message(MemberTrial(result)))
            result.message = result.error.message
            return result
        result = trial.result
        message = self.member_message(trial)
        if trial.fitted or (self.error is not None and result.error is None):
            result.node = None
            result.diagnosis = Diagnosis()
            if self.error is not None:
                result.error = Status.error(message)
        result.message = message
        return result

    @property
    def condition(self) -> tuple[str, str, str]:
        """The PodGroupScheduled condition upstream writes: (status, reason, message)."""
        if self.error is not None:
            return "False", "SchedulerError", (
                f"failed to schedule other pod from a pod group: {self.error.message}")
        if self.schedulable:
            return "True", "Scheduled", ""
        return "False", "Unschedulable", GROUP_UNSCHEDULABLE


def try_pod_group(fw: Framework, pods: list[Pod], cluster: ClusterState) -> GroupAttempt:
    """The group's pending `pods` (in scheduling order) tried on `cluster`, which is
    as before when it returns. When the profile holds the group to one topology domain
    (a policy's sameTopology rule) and the first trial does not place it, it is tried
    again in each domain of that key in turn (the domains' values in order), and the
    first trial that places it wins (upstream's TopologyAwareWorkloadScheduling tries
    placements likewise and scores them; policyd takes the first); when none does,
    the trial that fitted the most members is the answer."""
    attempt = _trial(fw, pods, cluster)
    group = group_key(pods[0]) if pods else None
    if attempt.schedulable or attempt.error is not None or group is None:
        return attempt
    keys = fw.group_topology_keys(pods[0])
    if not keys:
        return attempt
    key = keys[0]
    for value in sorted({info.node.labels[key] for info in cluster
                         if key in info.node.labels}):
        cluster.pod_groups.pinned[group] = (key, value)
        try:
            pinned = _trial(fw, pods, cluster)
        finally:
            del cluster.pod_groups.pinned[group]
        if pinned.schedulable or pinned.error is not None:
            return pinned
        if _fitted(pinned) > _fitted(attempt):
            attempt = pinned  # told as the closest the group came
    return attempt


def _fitted(attempt: GroupAttempt) -> int:
    return sum(1 for m in attempt.members if m.fitted)


def _trial(fw: Framework, pods: list[Pod], cluster: ClusterState) -> GroupAttempt:
    attempt = GroupAttempt()
    undo: list[tuple[ScheduleResult, str, str | None]] = []
    try:
        for pod in pods:
            result = schedule_one(fw, pod, cluster)
            trial = MemberTrial(result)
            attempt.members.append(trial)
            if result.node is None:
                if result.error is not None and result.error.code is Code.ERROR:
                    attempt.error = result.error
                    break
                continue
            node = result.node
            # Assuming spends a nomination; the trial gives it back (upstream's
            # unreserveAndForget in a pod group cycle).
            nominated = cluster.nominated_node(pod.uid)
            result = place(fw, cluster, result)
            if result.node is None:
                if nominated:
                    cluster.nominate(pod, nominated)
                if result.error is not None and result.error.code is Code.ERROR:
                    attempt.error = result.error
                    break
                continue
            undo.append((result, node, nominated))
            if result.permit_waits:
                trial.permit = result.permit_wait
            else:
                attempt.schedulable = True
    finally:
        for result, node, nominated in reversed(undo):
            assert result.cycle_state is not None
            fw.run_unreserve(result.cycle_state, result.pod, node)
            cluster.forget(result.pod)
            if nominated:
                cluster.nominate(result.pod, nominated)
            # The caller places it again from scratch: its cycle state is spent.
            result.permit_waits = result.permit_wait = None
            result.node = node
    return attempt


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """The answer for one pod group, for people (simulate, explain): which of its
    pending pods fit where in the group cycle, whether the group is placed, and what
    the others lack."""

    key: GroupKey
    min_count: int | None  # the quorum (None: not a gang)
    before: int  # its pods scheduled already (bound or assumed) before the cycle
    tried: int  # its pending pods the cycle tried
    fitted: tuple[tuple[str, str], ...]  # (pod key, node) in the trial
    placed: bool  # the group cycle placed them (pod by pod: its members kept their nodes)
    # The members that fit nowhere: each distinct reason with how many pods gave it.
    missing: tuple[tuple[str, int], ...]
    error: str = ""

    @property
    def nodes(self) -> list[str]:
        """The node set the group gets (would get), sorted."""
        return sorted({node for _, node in self.fitted})

    def describe(self) -> str:
        """One paragraph: `default/train (gang of minCount 16): 12 of 16 fit (on 3
        nodes: a, b, c); held, nothing placed: 4 short of its minCount. The 4 that do
        not fit: ...`."""
        quorum = (f"gang of minCount {self.min_count}" if self.min_count is not None
                  else "not a gang")
        head = f"pod group {self.key} ({quorum}"
        head += f", {self.before} scheduled already)" if self.before else ")"
        fit = f"{len(self.fitted)} of {self.tried} fit"
        if self.fitted:
            nodes = self.nodes
            fit += f" (on {len(nodes)} node{'s' if len(nodes) != 1 else ''}: " \
                   f"{', '.join(nodes)})"
        if self.error:
            verdict = f"not placed, the cycle failed: {self.error}"
        elif self.placed:
            verdict = "placed"
        else:
            short = (self.min_count or 0) - self.before - len(self.fitted)
            verdict = "held, nothing placed" + (
                f": {short} short of its minCount" if short > 0 else "")
        out = f"{head}: {fit}; {verdict}."
        for reason, count in self.missing:
            out += f" {count} that do{'es' if count == 1 else ''} not fit: {reason}"
        return out


def summarize(attempt: GroupAttempt, key: GroupKey, cluster: ClusterState,
              tried: int) -> GroupSummary:
    """`attempt`'s answer for people, on the cluster as the trial left it (unchanged)."""
    group = cluster.pod_groups.get(key)
    fitted = tuple((m.result.pod.key, m.result.node) for m in attempt.members
                   if m.result.node is not None)
    missing = Counter(m.result.message for m in attempt.members if m.result.node is None)
    return GroupSummary(
        key=key, min_count=group.min_count if group is not None else None,
        before=cluster.group_counts(key).scheduled, tried=tried, fitted=fitted,
        placed=bool(attempt.placed),
        missing=tuple(sorted(missing.items(), key=lambda kv: (-kv[1], kv[0]))),
        error=attempt.error.message if attempt.error is not None else "")


def summarize_pod_by_pod(key: GroupKey, results: list[ScheduleResult], before: int,
                         cluster: ClusterState) -> GroupSummary:
    """The answer for a group whose members were tried one by one (scheduler-plugins'
    Coscheduling: Permit holds them until the quorum, or gives their nodes back):
    `results` are its members' outcomes, `before` its pods scheduled beforehand."""
    group = cluster.pod_groups.get(key)
    fitted = tuple((r.pod.key, r.node) for r in results if r.node is not None)
    missing = Counter(r.message for r in results if r.node is None)
    return GroupSummary(
        key=key, min_count=group.min_count if group is not None else None,
        before=before, tried=len(results), fitted=fitted, placed=bool(fitted),
        missing=tuple(sorted(missing.items(), key=lambda kv: (-kv[1], kv[0]))))


def group_answer(fw: Framework, cluster: ClusterState, pod: Pod) -> GroupSummary | None:
    """For `explain`: the pod group cycle `pod` would be tried in (its scheduling.k8s.io
    group's pending pods of the same profile, in upstream's order: priority, then
    creation), on `cluster`, which is as before when it returns. None for a pod of no
    such group, or when the profile's GenericWorkload gate is off."""
    if not pod.scheduling_group or not fw.features.enabled("GenericWorkload"):
        return None
    key = GroupKey(WORKLOAD_API, pod.namespace, pod.scheduling_group)
    members = [p for p in cluster.group_pending(key)
               if p.scheduler_name == pod.scheduler_name and not p.deleting]
    if pod.uid not in {p.uid for p in members}:
        members.append(pod)
    members.sort(key=lambda p: (-p.priority, p.creation_timestamp, p.key))
    return summarize(try_pod_group(fw, members, cluster), key, cluster, len(members))
