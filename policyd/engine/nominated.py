"""Nominated pods in a cycle: upstream's RunFilterPluginsWithNominatedPods.

A pod that preemption nominated to a node is not bound there yet, but the space freed
for it must not go to a pod of lower or equal priority. So on a node holding nominated
pods of priority >= the pod's (other than the pod itself), the filters run twice:
once with those pods counted on the node, and (if that passes) once without them, as
every other node is filtered. Both must pass; the first failing pass's status is the
node's. Filters such as resources fail more easily with the nominated pods counted,
filters such as pod affinity more easily without them.

The first pass runs here, after the cycle's own PreFilter, in one of the two forms
preemption's dry runs have (policyd.plugins.defaultpreemption.evaluator):
- incremental, as upstream's addGENominatedPods: per such node, a clone of the
  cycle's PreFilter state and a copy of the node, the nominated pods added to both
  (the state through the plugins' PreFilterExtensions); when the profile's PreFilter
  state follows pods (`Framework.pre_filter_state_follows_pods`);
- rerun otherwise: the nominated pods placed in `ClusterState.what_if` and PreFilter
  rerun there with a fresh CycleState (the cluster restored exactly afterwards).
The second pass is the cycle's ordinary filtering. A pod nominated itself asks its
own node first (`only`), and the other nodes only if that one fails.

For explain, the first pass also keeps every filter's verdict on each node it rejects
(with the nominated pods counted, the verdict that node got) and which pods were
counted there, so such a node is shown with its real reason rather than left out.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from policyd.framework.cycle_state import CycleState
from policyd.framework.fit_error import Diagnosis
from policyd.framework.interfaces import Verdict
from policyd.framework.runtime import Framework
from policyd.framework.status import Status
from policyd.model.cluster import ClusterState
from policyd.model.node_info import NodeInfo
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
    # The nodes the pass has asked about (rejected or not).
    checked: set[str] = field(default_factory=set)


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


def first_pass(fw: Framework, pod: Pod, cluster: ClusterState, state: CycleState, *,
               explain: bool = False, only: Collection[str] | None = None,
               out: NominatedRejections | None = None) -> NominatedRejections:
    """The filters with each node's nominated pods counted there, for the nodes that
    hold any `pod` yields to (of `only` when given), into `out` (a fresh one by
    default; a node `out` has checked already is not asked again). `state` is the
    cycle's, after PreFilter passed; it is never changed. Costs nothing while nothing
    is nominated. `explain` also keeps each rejected node's every filter verdict,
    taken in the same hypothetical state."""
    out = NominatedRejections() if out is None else out
    incremental = fw.pre_filter_state_follows_pods
    for node_name, pods in yielded_to(cluster, pod).items():
        if node_name in out.checked or (only is not None and node_name not in only):
            continue
        out.checked.add(node_name)
        if incremental:
            error = _incremental(fw, pod, cluster, state, node_name, pods, out, explain)
        else:
            error = _rerun(fw, pod, cluster, node_name, pods, out, explain)
        if error is not None:
            out.error = error
            return out
    return out


def _incremental(fw: Framework, pod: Pod, cluster: ClusterState, base: CycleState,
                 node_name: str, pods: list[Pod], out: NominatedRejections, explain: bool
                 ) -> Status | None:
    """addGENominatedPods and the filters on one node; an error is returned."""
    original = cluster.get(node_name)
    assert original is not None  # yielded_to keeps known nodes only
    added = fw.with_pods_added(base, pod, original, pods)
    if isinstance(added, Status):
        return added
    state, info = added
    status = fw.run_filters_on_node(state, pod, info)
    if status is None:
        return None
    if not status.is_rejected:
        return status
    out.node_to_status[node_name] = status
    out.plugins.add(status.plugin)
    if explain:
        _explain(fw, pod, state, info, pods, out)
    return None


def _rerun(fw: Framework, pod: Pod, cluster: ClusterState, node_name: str, pods: list[Pod],
           out: NominatedRejections, explain: bool) -> Status | None:
    """The nominated pods placed in the cluster for a moment, PreFilter rerun there,
    then the filters on the node; an error is returned."""
    with cluster.what_if(place=[(p, node_name) for p in pods]) as hypothetical:
        info = hypothetical.get(node_name)
        assert info is not None  # yielded_to keeps known nodes only
        state = CycleState(hypothetical.node_infos(), hypothetical)
        state.framework = fw
        _, status, rejected_by = fw.run_pre_filter(state, pod)
        if status is not None:
            if not status.is_rejected:
                return status
            out.node_to_status[node_name] = status
            out.plugins |= rejected_by
            if explain:
                out.details[node_name] = {status.plugin or "PreFilter": status}
                out.counted[node_name] = pods
            return None
        diagnosis = Diagnosis()
        _, status = fw.run_filters(state, pod, [info], diagnosis)
        if status is not None:
            return status
        if node_name in diagnosis.node_to_status:
            out.node_to_status[node_name] = diagnosis.node_to_status[node_name]
            out.plugins |= diagnosis.unschedulable_plugins
            if explain:
                _explain(fw, pod, state, info, pods, out)
    return None


def _explain(fw: Framework, pod: Pod, state: CycleState, info: NodeInfo, pods: list[Pod],
             out: NominatedRejections) -> None:
    """A rejected node's every filter verdict with the nominated pods counted."""
    out.details[info.name] = fw.filter_details(state, pod, info)
    if verdicts := fw.verdicts(state, pod, info):
        out.verdicts[info.name] = verdicts
    out.counted[info.name] = pods
