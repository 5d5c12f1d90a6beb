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

from dataclasses import dataclass, field

from policyd.engine.cycle import ScheduleResult, place, schedule_one
from policyd.framework import Code, Status
from policyd.framework.fit_error import Diagnosis
from policyd.framework.runtime import Framework
from policyd.model.cluster import ClusterState
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
    """One trial of the group's pending `pods` (in scheduling order) on `cluster`,
    which is as before when it returns."""
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

