"""Schedule a batch of pods offline, in queue order, each placement counted before the
next: the answer to "will these 300 pods fit, and where?"."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from policyd.engine.cycle import ScheduleResult, reserve, schedule_one
from policyd.engine.profiles import unserved_reason
from policyd.framework.runtime import Framework
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod


@dataclass(frozen=True, slots=True)
class SkippedPod:
    """A pod the scheduling queue would never try, and why, in words for users."""

    pod: Pod
    reason: str


@dataclass(slots=True)
class SimulationResult:
    results: list[ScheduleResult]
    gated: list[Pod]  # pods held back by spec.schedulingGates, as upstream holds them
    skipped: list[SkippedPod]  # pods no cycle would run for (see `skip_reason`)

    @property
    def scheduled(self) -> int:
        return sum(1 for r in self.results if r.node is not None)


def skip_reason(pod: Pod, frameworks: Mapping[str, Framework]) -> str | None:
    """Why kube-scheduler would not run a scheduling cycle for `pod`, or None.

    Finished and bound pods never enter its queue; a pod no profile serves is another
    scheduler's; a pod being deleted is dropped when popped (`skipPodSchedule`).
    Scheduling gates are not a skip: such a pod waits (see `SimulationResult.gated`)."""
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
    `skipped` or `gated`, none is dropped."""
    gated: list[Pod] = []
    skipped: list[SkippedPod] = []
    queue: list[Pod] = []
    for pod in pods:
        reason = skip_reason(pod, frameworks)
        if reason is not None:
            skipped.append(SkippedPod(pod, reason))
        elif pod.scheduling_gates:
            gated.append(pod)
        else:
            queue.append(pod)
    # One queue across profiles, ordered by the first profile's QueueSort: upstream
    # requires every profile to use the same QueueSort plugin.
    first = next(iter(frameworks.values()))
    ordered = queue_order(first, queue)
    results = []
    for i, pod in enumerate(ordered):
        fw = frameworks[pod.scheduler_name]
        result = schedule_one(fw, pod, cluster)
        if result.node is not None:
            cluster.assume(pod, result.node)
            # What Reserve takes (VolumeBinding's chosen PVs and provisioning) stays
            # taken: offline there is no PreBind, the assumption is the outcome.
            result = reserve(fw, result)
            if result.node is None:
                cluster.forget(pod)
        results.append(result)
        if progress is not None:
            progress(i + 1, len(ordered))
    return SimulationResult(results, gated, skipped)
