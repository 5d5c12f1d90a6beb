"""Upstream's preemption Evaluator (pkg/scheduler/framework/preemption, v1.36) for one
pod: which nodes preemption might help, the dry run on each (SelectVictimsOnNode),
the cut after enough candidates (DryRunPreemption), and the choice among them
(pickOneNodeForPreemption).

A dry run asks the profile's own PreFilter and Filter plugins about the node with pods
taken off it, in one of two forms that give the same answer:

- incremental, as upstream (default_preemption.go SelectVictimsOnNode): PreFilter runs
  once per preemption; each node's dry run clones that CycleState and a copy of the
  node's NodeInfo, and pods leave and come back through the plugins' PreFilterExtensions
  (RemovePod/AddPod). A node costs what its own pods cost, not a pass over the cluster.
  Used when every PreFilter plugin of the profile has the extensions or reads no other
  pod (`Framework.pre_filter_state_follows_pods`) and PreFilter rejected nothing.
- rerun: the pods move in `ClusterState.what_if` (changed for the block, restored
  exactly, every plugin's view following the change log) and PreFilter reruns for each
  check. Correct for any plugin, at one PreFilter per check: the fallback, and what
  the incremental form is tested against (tests/unit/plugins/defaultpreemption/
  test_incremental.py). The two differ only where upstream's extensions differ from a
  fresh PreFilter (a terminating or `labelSelector: {}` victim in topology spread,
  ReadWriteOncePod claims of the same name in another namespace, a nominated pod with
  anti-affinity while InterPodAffinity's PreFilter skipped); there the incremental form
  is upstream's answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass

from policyd.framework.cycle_state import CycleState
from policyd.framework.fit_error import Diagnosis
from policyd.framework.runtime import BoundFilter, Framework
from policyd.framework.status import Code, Status
from policyd.model.cluster import ClusterState, nominated_node_name
from policyd.model.disruption import Budget
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.plugins.defaultpreemption.pdb import split_by_pdb_violation
from policyd.plugins.defaultpreemption.pod_fields import (
    PREEMPT_NEVER,
    importance_key,
    preemption_policy,
    start_time,
    terminating_by_preemption,
)

# Upstream's words, exactly (default_preemption.go, preemption.go).
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"

# Upstream adds MaxInt32+1 to every victim priority before summing, so that a node with
# a few negative-priority victims is not preferred to one with fewer of them.
_PRIORITY_OFFSET = 2**31


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node where evicting `victims` (most important first) makes the pod fit."""

    node: str
    victims: tuple[Pod, ...]
    num_pdb_violations: int


@dataclass(frozen=True, slots=True)
class Trial:
    """One node's dry run: the candidate it gave, or why it gave none."""

    node: str
    candidate: Candidate | None
    status: Status | None  # None when `candidate` is set


def ineligibility(pod: Pod, cluster: ClusterState, diagnosis: Diagnosis) -> str:
    """PodEligibleToPreemptOthers: "" when `pod` may preempt, else upstream's reason.

    A pod already nominated may not preempt again while a lower-priority pod on its
    nominated node is terminating because of a preemption (its own, most likely),
    unless the filters now rule that node out for good (UnschedulableAndUnresolvable)."""
    if preemption_policy(pod) == PREEMPT_NEVER:
        return NOT_ELIGIBLE_NEVER
    # The nominator's word when the pod's own status does not show it yet: a daemon
    # retrying the pod before its nominatedNodeName patch came back must not preempt
    # again while its first victims are terminating (seen in bench/preemption_bench.py
    # bursts: one preemptor took two or three victims).
    nominated = nominated_node_name(pod) or cluster.nominated_node(pod.uid) or ""
    if nominated:
        if node_status(diagnosis, nominated).code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return ""
        info = cluster.get(nominated)
        if info is not None and any(p.priority < pod.priority and terminating_by_preemption(p)
                                    for p in info.pods.values()):
            return NOT_ELIGIBLE_TERMINATING
    return ""


_DEFAULT_ABSENT = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


def node_status(diagnosis: Diagnosis, node: str) -> Status:
    """NodeToStatus.Get: the node's status, else the status of absent nodes (by
    default UnschedulableAndUnresolvable)."""
    status = diagnosis.node_to_status.get(node)
    if status is not None:
        return status
    return diagnosis.absent_nodes_status or _DEFAULT_ABSENT


def nodes_preemption_might_help(diagnosis: Diagnosis, nodes: Sequence[NodeInfo]
                                ) -> list[NodeInfo]:
    """NodesForStatusCode(Unschedulable): the nodes whose rejection removing pods may
    undo, in the cluster's node order. Upstream lists them in snapshot order when the
    absent nodes' status matches and in map order (random) otherwise; policyd uses one
    stable order, which the random offset then rotates."""
    statuses = diagnosis.node_to_status
    absent = (diagnosis.absent_nodes_status or _DEFAULT_ABSENT).code is Code.UNSCHEDULABLE
    # Thousands of nodes share a few status objects: each one's code is asked once.
    helps: dict[int, bool] = {}
    out = []
    for n in nodes:
        status = statuses.get(n.name)
        if status is None:
            if absent:
                out.append(n)
            continue
        verdict = helps.get(id(status))
        if verdict is None:
            verdict = helps[id(status)] = status.code is Code.UNSCHEDULABLE
        if verdict:
            out.append(n)
    return out


class Evaluator:
    """Dry runs of one pod's preemption on one cluster, with one profile's plugins."""

    def __init__(self, framework: Framework, pod: Pod, cluster: ClusterState,
                 budgets: Sequence[Budget], nominated: Mapping[str, Sequence[Pod]],
                 incremental: bool | None = None) -> None:
        self.framework = framework
        self.pod = pod
        self.cluster = cluster
        self.budgets = budgets
        self.nominated = nominated
        # The set of nodes does not change during dry runs, only their pods.
        self.all_nodes = cluster.node_infos()
        # Which form the dry runs take (see the module docstring); None: incremental
        # when the profile's PreFilter plugins allow it.
        self.incremental = (framework.pre_filter_state_follows_pods if incremental is None
                            else incremental)
        self._base: CycleState | None = None
        # Whether any PreFilterExtensions plugin runs for the pod (did not Skip): when
        # none does, no dry run changes the PreFilter state, and none copies it.
        self._extensions = False

    def _base_state(self) -> CycleState | None:
        """The PreFilter state every incremental dry run clones, computed once; None
        when PreFilter rejected the pod (the rerun form then reports it per node)."""
        if self._base is None and self.incremental:
            state = CycleState(self.all_nodes, self.cluster)
            state.framework = self.framework
            _, status, _ = self.framework.run_pre_filter(state, self.pod)
            if status is not None:
                self.incremental = False
                return None
            self._base = state
            self._extensions = self.framework.pre_filter_extensions_run(state)
        return self._base

    def dry_run(self, potential: Sequence[NodeInfo], offset: int, num_candidates: int
                ) -> tuple[list[Candidate], dict[str, Status], list[Trial]]:
        """DryRunPreemption, one node after another from `offset` (wrapping around):
        stops once it has a candidate without PDB violations and `num_candidates` in
        all. Each kind of candidate is kept up to `num_candidates`; those without
        violations come first. Returns the candidates, the status of every node that
        gave none, and every trial in order (for explain)."""
        clean: list[Candidate] = []
        violating: list[Candidate] = []
        statuses: dict[str, Status] = {}
        trials: list[Trial] = []
        n = len(potential)
        for i in range(n):
            info = potential[(offset + i) % n]
            victims, violations, status = self.select_victims_on_node(info)
            if status is None and victims:
                candidate = Candidate(info.name, victims, violations)
                kept = clean if violations == 0 else violating
                if len(kept) < num_candidates:
                    kept.append(candidate)
                trials.append(Trial(info.name, candidate, None))
                if clean and len(clean) + len(violating) >= num_candidates:
                    break
                continue
            if status is None:
                status = Status.error(f'expected at least one victim pod on node "{info.name}"')
            statuses[info.name] = status
            trials.append(Trial(info.name, None, status))
        return clean + violating, statuses, trials

    def select_victims_on_node(self, info: NodeInfo
                               ) -> tuple[tuple[Pod, ...], int, Status | None]:
        """SelectVictimsOnNode: (victims most important first, how many of them break a
        PodDisruptionBudget, None) or ((), 0, why the node is no candidate).

        Every lower-priority pod on the node (bound or assumed) goes; if the pod then
        fits, victims are given back one by one, most important first, those whose
        eviction would break a budget before the others, as long as the pod still
        fits."""
        base = self._base_state() if self.incremental else None
        if base is not None:
            return self._select_incremental(base, info)
        return self._select_rerun(info)

    def _select_incremental(self, base: CycleState, original: NodeInfo
                            ) -> tuple[tuple[Pod, ...], int, Status | None]:
        """SelectVictimsOnNode on a clone of the PreFilter state and of the node."""
        pod = self.pod
        fw = self.framework
        extensions = self._extensions
        # Upstream removes them in the node's order, then sorts (the order matters to
        # PodTopologySpread's critical paths).
        potential = [p for p in original.pods.values() if p.priority < pod.priority]
        if not potential:
            return (), 0, Status.unresolvable(NO_VICTIMS)
        state = base.clone() if extensions else base
        info = original.clone()
        for p in potential:
            info.remove_pod(p)
            if extensions:
                status = fw.run_pre_filter_extension_remove_pod(state, pod, p, info)
                if status is not None:
                    return (), 0, status
        ahead = [p for p in self.nominated.get(info.name, ())
                 if p.priority >= pod.priority and p.uid != pod.uid]
        status = self._incremental_filters(state, info, ahead)
        if status is not None:
            return (), 0, status
        # Every filter passed on this node: those that read the node alone pass in
        # every later check too, which then asks only the others (same verdicts).
        filters = fw.pod_dependent_filters
        potential.sort(key=importance_key)
        violating, clean = split_by_pdb_violation(potential, self.budgets)
        victims: list[Pod] = []
        violations = 0
        for group, breaks_budget in ((violating, True), (clean, False)):
            for p in group:
                info.add_pod(p)
                if extensions:
                    status = fw.run_pre_filter_extension_add_pod(state, pod, p, info)
                    if status is not None:
                        return (), 0, status
                status = self._incremental_filters(state, info, ahead, filters)
                if status is None:
                    continue
                # Anything but success, an error too, makes `p` a victim (upstream).
                info.remove_pod(p)
                if extensions:
                    status = fw.run_pre_filter_extension_remove_pod(state, pod, p, info)
                    if status is not None:
                        return (), 0, status
                victims.append(p)
                violations += breaks_budget
        if violating and clean:
            victims.sort(key=importance_key)
        return tuple(victims), violations, None

    def _incremental_filters(self, state: CycleState, info: NodeInfo, ahead: Sequence[Pod],
                             filters: Sequence[BoundFilter] | None = None) -> Status | None:
        """RunFilterPluginsWithNominatedPods on the dry run's own state and node copy:
        with `ahead` (the node's nominated pods of at least the pod's priority) added
        to clones of both (addGENominatedPods), then, when there were any, without
        them. `filters`: which (all by default), as `Framework.run_filters_on_node`."""
        pod = self.pod
        fw = self.framework
        if ahead:
            added = fw.with_pods_added(state, pod, info, ahead)
            if isinstance(added, Status):
                return added
            with_ahead, placed = added
            status = fw.run_filters_on_node(with_ahead, pod, placed, filters)
            if status is not None:
                return status
        return fw.run_filters_on_node(state, pod, info, filters)

    def _select_rerun(self, info: NodeInfo) -> tuple[tuple[Pod, ...], int, Status | None]:
        """SelectVictimsOnNode with the pods moved in the cluster and PreFilter rerun
        for every check."""
        pod = self.pod
        node = info.name
        potential = [p for p in info.pods.values() if p.priority < pod.priority]
        if not potential:
            return (), 0, Status.unresolvable(NO_VICTIMS)
        potential.sort(key=importance_key)
        violating, clean = split_by_pdb_violation(potential, self.budgets)
        victims: list[Pod] = []
        violations = 0
        # Every potential victim leaves for the whole block; a reprieved one comes back
        # for the rest of it (its own what_if, kept open), a victim's is closed at once:
        # each pod moves once or twice, not once per later check.
        with self.cluster.what_if(remove=potential), ExitStack() as reprieved:
            status = self.filters_with_nominated_pods(node)
            if status is not None:
                return (), 0, status
            for group, breaks_budget in ((violating, True), (clean, False)):
                for p in group:
                    back = self.cluster.what_if(place=[(p, node)])
                    back.__enter__()
                    try:
                        fits = self.filters_with_nominated_pods(node) is None
                    except BaseException:
                        back.__exit__(None, None, None)
                        raise
                    if fits:
                        reprieved.push(back)
                        continue
                    back.__exit__(None, None, None)
                    victims.append(p)
                    violations += breaks_budget
        if violating and clean:
            victims.sort(key=importance_key)
        return tuple(victims), violations, None

    def filters_with_nominated_pods(self, node: str) -> Status | None:
        """RunFilterPluginsWithNominatedPods on `node` as the cluster is now: None when
        the pod fits. Nominated pods of at least the pod's priority count on their
        node first; when there are any, the pod must also fit without them (a
        nominated pod may land elsewhere, and pod affinity may need it absent)."""
        pod = self.pod
        ahead = [p for p in self.nominated.get(node, ())
                 if p.priority >= pod.priority and p.uid != pod.uid]
        if ahead:
            with self.cluster.what_if(place=[(p, node) for p in ahead]):
                status = self._filters(node)
            if status is not None:
                return status
        return self._filters(node)

    def _filters(self, node: str) -> Status | None:
        """PreFilter over the current state, then the filters on `node`."""
        fw = self.framework
        cluster = self.cluster
        info = cluster.get(node)
        if info is None:
            return Status.unresolvable(f'node "{node}" not found')
        # The same NodeInfo objects as before the what_if: it changes them in place.
        state = CycleState(self.all_nodes, cluster)
        state.framework = fw
        _, status, _ = fw.run_pre_filter(state, self.pod)
        if status is not None:
            return status
        diagnosis = Diagnosis()
        feasible, error = fw.run_filters(state, self.pod, [info], diagnosis)
        if error is not None:
            return error
        return None if feasible else diagnosis.node_to_status[node]


def _latest_start(c: Candidate) -> float:
    """The earliest start among the victims of the highest priority (bigger wins)."""
    top = c.victims[0].priority
    return min(start_time(p) for p in c.victims if p.priority == top)


# pickOneNodeForPreemption's criteria in order; each scores a candidate, highest wins,
# and the next one only runs among those tied on the best score.
CRITERIA: tuple[tuple[str, Callable[[Candidate], float]], ...] = (
    ("fewest PodDisruptionBudget violations", lambda c: -c.num_pdb_violations),
    ("lowest highest-priority victim", lambda c: -c.victims[0].priority),
    ("lowest sum of victim priorities",
     lambda c: -sum(p.priority + _PRIORITY_OFFSET for p in c.victims)),
    ("fewest victims", lambda c: -len(c.victims)),
    ("latest start of the highest-priority victims", _latest_start),
)
FIRST = "first in dry-run order"


def pick_one_node(candidates: Sequence[Candidate]) -> tuple[Candidate, dict[str, str]]:
    """The chosen candidate, and for every other one the criterion it lost on.
    With ties on every criterion the first candidate wins (upstream: the first in map
    iteration order, i.e. an unspecified one)."""
    if not candidates:
        raise ValueError("no candidates to choose from")
    lost: dict[str, str] = {}
    remaining = list(candidates)
    for criterion, score in CRITERIA:
        if len(remaining) == 1:
            break
        scores = [score(c) for c in remaining]
        best = max(scores)
        for c, s in zip(remaining, scores, strict=True):
            if s != best:
                lost[c.node] = criterion
        remaining = [c for c, s in zip(remaining, scores, strict=True) if s == best]
    for c in remaining[1:]:
        lost[c.node] = FIRST
    return remaining[0], lost
