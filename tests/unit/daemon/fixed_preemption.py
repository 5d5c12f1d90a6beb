"""A tiny PostFilter plugin for tests of what runs around a preemption decision (the
daemon's actions, simulate): it always picks one fixed node, with every pod there of
lower priority than the preemptor as victims. Not DefaultPreemption: no candidate
search, no reprieve, no PodDisruptionBudgets."""

from __future__ import annotations

from policyd.framework.cycle_state import CycleState
from policyd.framework.fit_error import Diagnosis
from policyd.framework.interfaces import PostFilterResult
from policyd.framework.status import Code, Status
from policyd.model.records import Pod

NOT_HELPFUL = "preemption: test plugin found no victims"


class PreemptOn:
    """Nominate `node` and evict its lower-priority pods; when there are none (or
    they are already going), say so as an Unschedulable status without a result."""

    name = "PreemptOn"

    def __init__(self, node: str) -> None:
        self.node = node
        self.calls: list[str] = []

    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis
                    ) -> tuple[PostFilterResult | None, Status]:
        self.calls.append(pod.key)
        cluster = state.cluster
        assert cluster is not None
        info = cluster.get(self.node)
        lower = [p for p in (info.pods.values() if info is not None else ())
                 if p.priority < pod.priority]
        if not lower or any(p.deleting for p in lower):
            return None, Status(Code.UNSCHEDULABLE, (NOT_HELPFUL,))
        clear = tuple(p for p in cluster.nominated_pods(self.node)
                      if p.priority < pod.priority)
        return PostFilterResult(self.node, tuple(lower), clear), Status(Code.SUCCESS)
