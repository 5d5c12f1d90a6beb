"""One scheduling cycle: PreFilter, Filter, PreScore, Score, select host (schedulePod).

The offline commands and the daemon call the same `schedule_one`; `explain=True` also
keeps every plugin's verdict on every node, which costs more and changes nothing in
the decision.

Policies in Audit mode run after Filter, on the nodes the enforced filters left
feasible, and change nothing either: each audited rule's would-be rejections become
an `AuditFinding` on the result (none when no node is feasible: there is nothing to
count). A profile without audited policies pays nothing for them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np

from policyd.engine.nominated import NominatedRejections, first_pass
from policyd.framework.cycle_state import CycleState
from policyd.framework.fit_error import NO_NODES_AVAILABLE, Diagnosis, fit_error_message
from policyd.framework.interfaces import PostFilterResult, Verdict
from policyd.framework.runtime import AuditOutcome, Framework, ScoreResult
from policyd.framework.status import Code, Status
from policyd.model.cluster import ClusterState, nominated_node_name
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.model.table import IntArray, NodeTable


@dataclass(frozen=True, slots=True)
class AuditFinding:
    """One filter rule of a policy in Audit mode, judged in one cycle on the nodes the
    enforced filters left feasible: it would have rejected `rejected` of those
    `considered` nodes, with `reason`; `chosen_violates` says whether the node the pod
    was given is one of them (None: no node was chosen)."""

    policy: str  # metadata.name
    plugin: str  # spec.pluginName
    rule: str  # the rule's id
    rejected: int
    considered: int
    reason: str
    chosen_violates: bool | None
    # The rejected nodes' names, on the reference path and explain only (the fast path
    # counts them without building names).
    rejected_nodes: tuple[str, ...] = ()

    def describe(self, chosen: str | None = None) -> str:
        """One line for people: `policy hw-encrypt (Audit), rule hw-encrypt-node: would
        not fit on 7 of 12 feasible nodes (the chosen node n3 among them): node(s)
        didn't offer hardware encryption`; `chosen` names the node the pod was given."""
        where = ""
        if chosen is not None and self.chosen_violates is not None:
            where = (f" (the chosen node {chosen} among them)" if self.chosen_violates
                     else f" (the chosen node {chosen} passes)")
        return (f"policy {self.policy} (Audit), rule {self.rule}: would not fit on "
                f"{self.rejected} of {self.considered} feasible nodes{where}: "
                f"{self.reason}")


@dataclass(slots=True)
class ScheduleResult:
    pod: Pod
    node: str | None  # the chosen node, None when none fits or the cycle failed
    num_nodes: int
    # Unschedulable: the FitError message. Error: the error. Success: "".
    message: str = ""
    error: Status | None = None  # an internal error (plugin crash, invalid score)
    diagnosis: Diagnosis = field(default_factory=Diagnosis)
    # Names of the nodes that passed every filter; on the fast path kept as indices into
    # the table's names and turned into a list only if someone asks (the daemon does not).
    _feasible: list[str] | None = None
    _feasible_idx: tuple[Any, IntArray] | None = None
    scores: ScoreResult | None = None
    # Fast path: each feasible node's weighted total, aligned with the feasible indices
    # (None when nothing was scored: one node fits, or none). `policyd diff` reads it to
    # tell a moved placement from a tie; the daemon never looks.
    totals: IntArray | None = None
    # explain only: node -> plugin -> verdict (None = passed), every plugin run.
    filter_details: dict[str, dict[str, Status | None]] = field(default_factory=dict)
    # explain only: node -> plugin -> its verdict on each part of the pod it judges
    # separately (VolumeBinding: each claim).
    verdicts: dict[str, dict[str, Sequence[Verdict]]] = field(default_factory=dict)
    # explain only: node -> the pods nominated there (by an earlier preemption) that
    # were counted on it when it was rejected: the pod yields to them (see nominated).
    nominated_counted: dict[str, list[str]] = field(default_factory=dict)
    # explain only: each PostFilter plugin's account (preemption: node, victims, why
    # other candidates lost).
    post_filter_notes: dict[str, list[str]] = field(default_factory=dict)
    # The cycle's state, which Reserve, Unreserve and PreBind read after the decision.
    cycle_state: CycleState | None = None
    # Unschedulable: what PostFilter found can make the pod fit (preemption), if any.
    post_filter: PostFilterResult | None = None
    # Every rule of the profile's audited policies that was judged in this cycle, those
    # that would have rejected no node included (see `findings`).
    audits: list[AuditFinding] = field(default_factory=list)
    # Permit said Wait (`permit`): plugin -> the longest it holds the pod, in seconds.
    # The pod keeps its node; whoever binds adds it to the framework's waiting pods.
    permit_waits: dict[str, float] | None = None
    permit_wait: Status | None = None  # and the Wait status (its reasons)

    @property
    def feasible(self) -> list[str]:
        if self._feasible is None:
            if self._feasible_idx is None:
                self._feasible = []
            else:
                names, idx = self._feasible_idx
                self._feasible = names[idx].tolist()
        return self._feasible

    @feasible.setter
    def feasible(self, names: list[str]) -> None:
        self._feasible = names

    @property
    def unschedulable(self) -> bool:
        return self.node is None and self.error is None

    @property
    def findings(self) -> list[AuditFinding]:
        """The audited rules that would have rejected at least one feasible node."""
        return [a for a in self.audits if a.rejected]


def schedule_one(
    fw: Framework, pod: Pod, cluster: ClusterState, *, explain: bool = False,
    reference: bool = False,
) -> ScheduleResult:
    """Schedule one pod. The default path evaluates nodes as columns (`NodeTable`);
    `reference=True` runs the plain per-node path that the fast one is tested against,
    and `explain=True` (which implies it) keeps every plugin's verdict on every node."""
    if not explain and not reference:
        return _schedule_fast(fw, pod, cluster)
    nodes = cluster.node_infos()
    state = CycleState(nodes, cluster)
    state.framework = fw
    result = ScheduleResult(pod=pod, node=None, num_nodes=len(nodes), cycle_state=state)
    diagnosis = result.diagnosis
    if not nodes:
        # Upstream fails before PreFilter with ErrNoNodesAvailable, not a FitError.
        result.message = NO_NODES_AVAILABLE
        return result

    names, status, rejected_by = fw.run_pre_filter(state, pod)
    diagnosis.unschedulable_plugins |= rejected_by
    if status is not None:
        if status.code is Code.ERROR:
            return _failed(result, status)
        diagnosis.pre_filter_message = status.message
        diagnosis.absent_nodes_status = status
        _post_filter(fw, state, pod, result)
        if explain:
            result.post_filter_notes = fw.post_filter_notes(state)
            for n in nodes:
                result.filter_details[n.name] = {status.plugin or "PreFilter": status}
        return result

    # A pod nominated by an earlier preemption tries that node first, and alone
    # (evaluateNominatedNode): it is likely the only one that fits.
    own = nominated_node_name(pod)
    own_info = cluster.get(own) if own else None
    nominated_fit: str | None = None
    rejections = _NO_REJECTIONS
    if own_info is not None:
        rejections = _nominated_first_pass(fw, pod, cluster, state, explain=explain,
                                           only=(own,))
        if rejections.error is not None:
            return _failed(result, rejections.error)
        if own in rejections.node_to_status:
            _note_rejection(diagnosis, rejections, own)
        else:
            fits, status = fw.run_filters(state, pod, [own_info], diagnosis)
            if status is not None:
                return _failed(result, status)
            if fits:
                nominated_fit = own
                if not explain:
                    result.feasible = [own]
                    result.node = own
                    if fw.audits:
                        _settle(result, fw.run_audits(state, pod, fits), 1, 0, [own])
                    return result

    rejections = _nominated_first_pass(fw, pod, cluster, state, rejections, explain=explain)
    if rejections.error is not None:
        return _failed(result, rejections.error)
    candidates = nodes
    if names is not None:
        candidates = [n for n in nodes if n.name in names]
        diagnosis.absent_nodes_status = Status.unresolvable(
            f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(rejected_by))}]")
    if rejections.node_to_status:
        for n in candidates:
            if n.name in rejections.node_to_status:
                _note_rejection(diagnosis, rejections, n.name)
        candidates = [n for n in candidates if n.name not in rejections.node_to_status]

    feasible, status = fw.run_filters(state, pod, candidates, diagnosis)
    if status is not None:
        return _failed(result, status)
    if explain:
        _explain_filters(fw, state, pod, result, nodes, names, rejections, own)
    result.feasible = names_feasible = [n.name for n in feasible]
    audits = fw.run_audits(state, pod, feasible) if fw.audits and feasible else []

    def settle(chosen: str | None) -> ScheduleResult:
        if audits:
            at = names_feasible.index(chosen) if chosen in names_feasible else None
            _settle(result, audits, len(feasible), at, names_feasible)
        return result

    if nominated_fit is not None:
        # explain: every node's verdicts as usual, the decision as the cycle makes it.
        result.node = nominated_fit
        return settle(nominated_fit)
    if not feasible:
        _post_filter(fw, state, pod, result)
        if explain:
            result.post_filter_notes = fw.post_filter_notes(state)
        return result

    if len(feasible) == 1 and not explain:
        # Upstream skips scoring when only one node fits: nothing to choose between.
        result.node = feasible[0].name
        return settle(result.node)
    status = fw.run_pre_score(state, pod, feasible)
    if status is not None:
        return settle(_failed(result, status).node)
    scores, status = fw.run_score(state, pod, feasible)
    result.scores = scores
    if status is not None:
        return settle(_failed(result, status).node)
    chosen: NodeInfo = feasible[0] if len(feasible) == 1 else fw.select_host(scores)
    result.node = chosen.name
    return settle(result.node)


def reserve(fw: Framework, result: ScheduleResult) -> ScheduleResult:
    """Run Reserve for a decided pod, already assumed on `result.node` by the caller
    (schedulingCycle's order). On success `result` comes back unchanged. On failure
    every Reserve plugin has unreserved, and the result says why with no node: a
    rejection as upstream's FitError over the one chosen node, an error as an error.
    The caller then forgets the assumption."""
    node, state = result.node, result.cycle_state
    if node is None or state is None:
        return result
    status = fw.run_reserve(state, result.pod, node)
    if status is None:
        return result
    return _refused_after_reserve(fw, result, node, state, status)


def permit(fw: Framework, result: ScheduleResult) -> ScheduleResult:
    """Run Permit for a pod `reserve` kept on its node (the scheduling cycle's last
    step). Allowed: `result` unchanged. Wait: `result.permit_waits` says for how long
    per plugin. Rejected or failed: every Reserve plugin has unreserved, and the
    result says why with no node, as after a failed Reserve (upstream builds the same
    FitError over the one node); the caller forgets the assumption."""
    node, state = result.node, result.cycle_state
    if node is None or state is None or not fw.permit_plugins:
        return result
    status, waits = fw.run_permit(state, result.pod, node)
    if status is None:
        return result
    if status.code is Code.WAIT:
        result.permit_waits = waits
        result.permit_wait = status
        return result
    return _refused_after_reserve(fw, result, node, state, status)


def place(fw: Framework, cluster: ClusterState, result: ScheduleResult) -> ScheduleResult:
    """The scheduling cycle's end for a decided pod: assume it on `result.node`, run
    Reserve, then Permit; on a refusal the assumption is forgotten and the result says
    why (no node). A pod Permit holds keeps its node with `permit_waits` set: the
    caller holds it among its waiting pods."""
    assert result.node is not None
    cluster.assume(result.pod, result.node)
    result = reserve(fw, result)
    if result.node is not None:
        result = permit(fw, result)
    if result.node is None:
        cluster.forget(result.pod)
    return result


def refused_after_permit(fw: Framework, result: ScheduleResult, outcome: Status
                         ) -> ScheduleResult:
    """A pod that waited at Permit was rejected (or timed out, or was preempted):
    as `permit`'s refusal, with the wait's outcome (an error worded as upstream's
    WaitOnPermit words it). The caller forgets the assumption."""
    node, state = result.node, result.cycle_state
    assert node is not None and state is not None
    result.permit_waits = None
    if not outcome.is_rejected:
        outcome = wait_refusal(node, outcome)[0]
    return _refused_after_reserve(fw, result, node, state, outcome)


def wait_refusal(node: str, outcome: Status) -> tuple[Status, Diagnosis | None]:
    """How a pod whose wait at Permit on `node` ended in `outcome` is told (upstream's
    bindingCycle after WaitOnPermit): a rejection as the FitError over that one node,
    with its diagnosis; anything else (preempted) as WaitOnPermit's error."""
    if not outcome.is_rejected:
        return Status(Code.ERROR, (f"waiting on permit for pod: {outcome.message}",),
                      outcome.plugin), None
    diagnosis = _one_node(node, outcome)
    return Status(outcome.code, (fit_error_message(1, diagnosis),), outcome.plugin), diagnosis


def _one_node(node: str, status: Status) -> Diagnosis:
    """Upstream's FitError diagnosis over the one chosen node a later step refused."""
    diagnosis = Diagnosis(node_to_status={node: status})
    if status.plugin:
        diagnosis.unschedulable_plugins.add(status.plugin)
    return diagnosis


def _refused_after_reserve(fw: Framework, result: ScheduleResult, node: str,
                           state: CycleState, status: Status) -> ScheduleResult:
    """Reserve or Permit said no on `node`: unreserve, and say why as upstream does (a
    rejection: a FitError over the one node; an error: the error)."""
    fw.run_unreserve(state, result.pod, node)
    result.node = None
    if not status.is_rejected:
        return _failed(result, status)
    result.num_nodes = 1
    result.diagnosis = _one_node(node, status)
    result.message = fit_error_message(1, result.diagnosis)
    return result


def _post_filter(fw: Framework, state: CycleState, pod: Pod, result: ScheduleResult
                 ) -> None:
    """No node fits: run PostFilter (when the profile has such plugins) and write the
    FailedScheduling message, PostFilter's part included, as upstream's schedulePod
    does; an erring PostFilter's message goes into it too."""
    diagnosis = result.diagnosis
    if fw.post_filter_plugins:
        result.post_filter, status = fw.run_post_filter(state, pod, diagnosis)
        diagnosis.post_filter_message = status.message
    result.message = fit_error_message(result.num_nodes, diagnosis)


def _nominated_first_pass(fw: Framework, pod: Pod, cluster: ClusterState, state: CycleState,
                          rejections: NominatedRejections | None = None, *,
                          explain: bool = False, only: Collection[str] | None = None
                          ) -> NominatedRejections:
    """`first_pass` (into `rejections`, the nodes it checked already skipped), or the
    shared empty result while nothing is nominated."""
    if not cluster.has_nominations:
        return _NO_REJECTIONS
    return first_pass(fw, pod, cluster, state, explain=explain, only=only,
                      out=None if rejections is _NO_REJECTIONS else rejections)


def _explain_filters(fw: Framework, state: CycleState, pod: Pod, result: ScheduleResult,
                     nodes: Sequence[NodeInfo], names: set[str] | None,
                     rejections: NominatedRejections, own: str) -> None:
    """Every node once, in the cluster's order, with the verdict the diagnosis holds
    for it: PreFilter's for a node it narrowed away (but the pod's own nominated
    node, tried first whatever PreFilter said); the nominated pods' pass for a node
    it rejected (those pods counted there); else every filter's."""
    diagnosis = result.diagnosis
    for n in nodes:
        name = n.name
        narrowed = names is not None and name not in names and name != own
        if name in rejections.node_to_status and not narrowed:
            result.filter_details[name] = rejections.details.get(
                name, {"Filter": rejections.node_to_status[name]})
            result.nominated_counted[name] = [p.key for p in rejections.counted.get(name, ())]
            if name in rejections.verdicts:
                result.verdicts[name] = rejections.verdicts[name]
            continue
        if narrowed:
            assert diagnosis.absent_nodes_status is not None
            result.filter_details[name] = {"PreFilter": diagnosis.absent_nodes_status}
            continue
        result.filter_details[name] = fw.filter_details(state, pod, n)
        if verdicts := fw.verdicts(state, pod, n):
            result.verdicts[name] = verdicts


# Shared and never written to: a cycle without nominations allocates nothing for them.
_NO_REJECTIONS = NominatedRejections()


def _note_rejection(diagnosis: Diagnosis, rejections: NominatedRejections, node: str
                    ) -> None:
    """A node the nominated pods' pass rejected: its status is the node's reason."""
    status = rejections.node_to_status[node]
    diagnosis.node_to_status[node] = status
    if status.plugin:
        diagnosis.unschedulable_plugins.add(status.plugin)


def _settle(result: ScheduleResult, audits: Sequence[AuditOutcome], considered: int,
            chosen: int | None, names: Sequence[str] | None = None) -> None:
    """The audited rules' outcomes over the `considered` feasible nodes as findings on
    `result`; `chosen` is the chosen node's position among them (None: none), `names`
    their names when the rejected ones should be named (the reference path)."""
    for a in audits:
        rejected = a.rejected
        violates = None
        if chosen is not None:
            at = int(np.searchsorted(rejected, chosen))
            violates = at < rejected.size and int(rejected[at]) == chosen
        result.audits.append(AuditFinding(
            a.policy, a.plugin, a.rule, int(rejected.size), considered, a.reason, violates,
            tuple(names[i] for i in rejected.tolist()) if names is not None else ()))


def _failed(result: ScheduleResult, status: Status) -> ScheduleResult:
    result.error = status
    result.message = status.message
    return result


class _IndexedNodes(Sequence[NodeInfo]):
    """The feasible NodeInfos as a sequence built on first use: most PreScore plugins
    never look at it on the fast path, and a list of 5000 costs a quarter millisecond."""

    __slots__ = ("_idx", "_infos", "_list")

    def __init__(self, infos: list[NodeInfo], idx: IntArray) -> None:
        self._infos = infos
        self._idx = idx
        self._list: list[NodeInfo] | None = None

    def _items(self) -> list[NodeInfo]:
        if self._list is None:
            infos = self._infos
            self._list = [infos[i] for i in self._idx.tolist()]
        return self._list

    def __len__(self) -> int:
        return int(self._idx.size)

    @overload
    def __getitem__(self, i: int) -> NodeInfo: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[NodeInfo]: ...
    def __getitem__(self, i: int | slice) -> NodeInfo | Sequence[NodeInfo]:
        return self._items()[i]

    def __iter__(self) -> Iterator[NodeInfo]:
        return iter(self._items())


def _schedule_fast(fw: Framework, pod: Pod, cluster: ClusterState) -> ScheduleResult:
    table = cluster.table()
    nodes = table.infos
    state = CycleState(nodes, cluster)
    state.framework = fw
    state.table = table
    result = ScheduleResult(pod=pod, node=None, num_nodes=len(nodes), cycle_state=state)
    if not nodes:
        result.message = NO_NODES_AVAILABLE
        return result
    names, status, rejected_by = fw.run_pre_filter(state, pod)
    if status is not None:
        # Rare: let the reference path build the diagnosis and message.
        return schedule_one(fw, pod, cluster, reference=True)
    own = nominated_node_name(pod)
    own_row = table.index.get(own) if own else None
    rejections = _NO_REJECTIONS
    if own_row is not None:
        rejections = _nominated_first_pass(fw, pod, cluster, state, only=(own,))
        if rejections.error is not None:
            return _failed(result, rejections.error)
    if own_row is not None and own not in rejections.node_to_status:
        fits, status = fw.run_filters_fast(state, pod, table, np.array([own_row], np.int64))
        if status is not None:
            return _failed(result, status)
        if fits.size:
            result._feasible_idx = (table.name_array, fits)
            result.node = own
            if fw.audits:
                _settle(result, fw.run_audits_fast(state, pod, table, fits), 1, 0)
            return result
    rejections = _nominated_first_pass(fw, pod, cluster, state, rejections)
    if rejections.error is not None:
        return _failed(result, rejections.error)
    if names is None:
        idx = np.arange(len(nodes))
    else:
        idx = np.array(sorted(table.index[n] for n in names if n in table.index), np.int64)
    if rejections.node_to_status:
        rows = [table.index[n] for n in rejections.node_to_status if n in table.index]
        idx = idx[~np.isin(idx, np.array(rows, np.int64))]
    feasible, status = fw.run_filters_fast(state, pod, table, idx)
    if status is not None:
        return _failed(result, status)
    if feasible.size == 0:
        # The reasons of the nodes the nominated pods' pass rejected (of the
        # candidates, and the pod's own nominated node), then every other node's.
        # (PreFilter narrows to a set of names: `names`, None when it kept them all.)
        for n in rejections.node_to_status:
            if n in table.index and (n == own or names is None or n in names):
                _note_rejection(result.diagnosis, rejections, n)
        if own_row is not None and own not in rejections.node_to_status and not bool(
                np.isin(own_row, idx)):
            # Tried alone first and failed, though PreFilter narrowed it away:
            # upstream keeps that node's own reason.
            idx = np.union1d(idx, np.array([own_row], np.int64))
        return _diagnose(fw, state, pod, table, idx, names, rejected_by, result)
    result._feasible_idx = (table.name_array, feasible)
    # Judged before scoring, settled once the chosen node is known.
    audits = fw.run_audits_fast(state, pod, table, feasible) if fw.audits else None
    if feasible.size == 1:
        result.node = table.names[int(feasible[0])]
        if audits:
            _settle(result, audits, 1, 0)
        return result
    feasible_infos = _IndexedNodes(nodes, feasible)
    status = fw.run_pre_score(state, pod, feasible_infos)
    if status is None:
        totals, status = fw.run_score_fast(state, pod, table, feasible, feasible_infos)
    if status is not None:
        if audits:
            _settle(result, audits, int(feasible.size), None)
        return _failed(result, status)
    at = fw.select_index(totals)
    result.totals = totals
    result.node = table.names[int(feasible[at])]
    if audits:
        _settle(result, audits, int(feasible.size), at)
    return result


def _diagnose(fw: Framework, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray,
              names: set[str] | None, rejected_by: set[str],
              result: ScheduleResult) -> ScheduleResult:
    """No node fits: every rejected node's reason, from the plugins' reference `filter`
    (what `schedule_one(reference=True)` reports, without rerunning PreFilter)."""
    diagnosis = result.diagnosis
    diagnosis.unschedulable_plugins |= rejected_by
    if names is not None:
        diagnosis.absent_nodes_status = Status.unresolvable(
            f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(rejected_by))}]")
    left, status = fw.run_filter_diagnosis(state, pod, table, idx, diagnosis)
    if status is not None:
        return _failed(result, status)
    result._feasible_idx = (table.name_array, left)  # empty unless a mask lied
    _post_filter(fw, state, pod, result)
    return result
