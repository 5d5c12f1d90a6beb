"""Nominated pods in a cycle: upstream's RunFilterPluginsWithNominatedPods.

A pod that preemption nominated to a node is not bound there yet, but the space freed
for it must not go to a pod of lower or equal priority. So on a node holding nominated
pods of priority >= the pod's (other than the pod itself), the filters run twice:
once with those pods counted on the node, and (if that passes) once without them, as
every other node is filtered. Both must pass; the first failing pass's status is the
node's. Filters such as resources fail more easily with the nominated pods counted,
filters such as pod affinity more easily without them.

The first pass runs here, before the cycle's own PreFilter, in
`ClusterState.what_if(place=...)` with a fresh CycleState: PreFilter is rerun there
(upstream updates its PreFilter state with AddPod instead; rerunning is simpler and
exact, and costs one PreFilter per such node, only for nodes that hold nominated pods
and only while any exist). The second pass is the cycle's ordinary filtering.

For explain, the first pass also keeps every filter's verdict on each node it rejects
(with the nominated pods counted, the verdict that node got) and which pods were
counted there, so such a node is shown with its real reason rather than left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from policyd.framework.cycle_state import CycleState
from policyd.framework.fit_error import Diagnosis
from policyd.framework.interfaces import Verdict
from policyd.framework.runtime import Framework
from policyd.framework.status import Status
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod


@dataclass(slots=True)
class NominatedRejections:
    """The nodes the first pass rejects, with their statuses and the plugins that
    rejected; `error` when a plugin erred (the cycle fails with it). With `explain`:
    each rejected node's every filter verdict (`details`, `verdicts`) and the nominated pods that
    were counted on it (`counted`)."""

    node_to_status: dict[str, Status] = field(default_factory=dict)
    plugins: set[str] = field(default_factory=set)
    error: Status | None = None
    details: dict[str, dict[str, Status | None]] = field(default_factory=dict)
    verdicts: dict[str, dict[str, Sequence[Verdict]]] = field(default_factory=dict)
    counted: dict[str, list[Pod]] = field(default_factory=dict)


def yielded_to(cluster: ClusterState, pod: Pod) -> dict[str, list[Pod]]:
    """Node name -> the pods nominated there that `pod` must yield to: priority >=
    its own, itself excluded (addGENominatedPods)."""
    if not cluster.has_nominations:
        return {}
    out: dict[str, list[Pod]] = {}
    for node_name, pods in cluster.nominations().items():
        ge = [p for p in pods if p.priority >= pod.priority and p.uid != pod.uid]
        if ge and cluster.get(node_name) is not None:
            out[node_name] = ge
    return out


def first_pass(fw: Framework, pod: Pod, cluster: ClusterState, *, explain: bool = False
               ) -> NominatedRejections:
    """The filters with each node's nominated pods counted there, for the nodes that
    hold any `pod` yields to. Costs nothing while nothing is nominated. `explain` also
    keeps each rejected node's every filter verdict, taken in the same hypothetical
    state."""
    out = NominatedRejections()
    for node_name, pods in yielded_to(cluster, pod).items():
        with cluster.what_if(place=[(p, node_name) for p in pods]) as hypothetical:
            info = hypothetical.get(node_name)
            assert info is not None  # yielded_to keeps known nodes only
            state = CycleState(hypothetical.node_infos(), hypothetical)
            state.framework = fw
            _, status, rejected_by = fw.run_pre_filter(state, pod)
            if status is not None:
                if not status.is_rejected:
                    out.error = status
                    return out
                out.node_to_status[node_name] = status
                out.plugins |= rejected_by
                if explain:
                    out.details[node_name] = {status.plugin or "PreFilter": status}
                    out.counted[node_name] = pods
                continue
            diagnosis = Diagnosis()
            _, status = fw.run_filters(state, pod, [info], diagnosis)
            if status is not None:
                out.error = status
                return out
            if node_name in diagnosis.node_to_status:
                out.node_to_status[node_name] = diagnosis.node_to_status[node_name]
                out.plugins |= diagnosis.unschedulable_plugins
                if explain:
                    out.details[node_name] = fw.filter_details(state, pod, info)
                    if verdicts := fw.verdicts(state, pod, info):
                        out.verdicts[node_name] = verdicts
                    out.counted[node_name] = pods
    return out
