"""Schedule a batch of pods offline, in queue order, each placement counted before the
next: the answer to "will these 300 pods fit, and where?"."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from policyd.engine.scheduler import ScheduleResult, schedule_one
from policyd.framework.runtime import Framework
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod


@dataclass(slots=True)
class SimulationResult:
    results: list[ScheduleResult]
    gated: list[Pod]  # pods held back by spec.schedulingGates, as upstream holds them
    ignored: list[Pod]  # pending pods whose schedulerName no profile has

    @property
    def scheduled(self) -> int:
        return sum(1 for r in self.results if r.node is not None)


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
    placed pod is assumed on its node before the next pod is tried."""
    gated: list[Pod] = []
    ignored: list[Pod] = []
    queue: list[Pod] = []
    for pod in pods:
        if pod.scheduler_name not in frameworks or pod.node_name or pod.finished:
            ignored.append(pod)
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
        result = schedule_one(frameworks[pod.scheduler_name], pod, cluster)
        if result.node is not None:
            cluster.assume(pod, result.node)
        results.append(result)
        if progress is not None:
            progress(i + 1, len(ordered))
    return SimulationResult(results, gated, ignored)
