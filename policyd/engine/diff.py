"""The impact of a policy or profile change on one cluster: `policyd diff`'s comparison.

Two versions (each a set of served profiles and the policies they run) are asked the
same questions about the same pods, and only what differs is reported:

- every pending pod is scheduled by `schedule_one` under both versions, each on the
  cluster as it is (one pod at a time, nothing placed: the question is "does this pod
  fit, and where", not "where do all of them go together"); a pod fits when some node is
  feasible. Where both place it, the nodes tied at the best total are compared, not
  the random draw among them: the same best nodes are the same placement, overlapping
  ones a tie, disjoint ones a move (with each choice's weighted total);
- every bound pod is audited (`engine.audit`) on its own node with itself taken off it,
  under both versions, and only the verdicts that differ count: a new violation (the
  new version rejects the node, the old one did not) or a fixed one. Only the policies
  that differ between the versions are asked: a policy whose document is the same in
  both gives the same verdict in both, so at 50,000 pods a change to one policy costs
  the pods that policy applies to. When the rest of a profile changed (built-in
  plugins, their args, feature gates: the caller says so), each bound pod's node is
  also run through the built-in filters of both versions, PreFilter first;
- the pending pods of a pod group that a version places as one (a scheduling.k8s.io
  group under GenericWorkload, a scheduler-plugins group under Coscheduling) are not
  compared one by one but as their group, through the answer explain and simulate give
  (`simulate.group_answer`): whether the group would be placed whole or held, and on
  which nodes. Two placements on other nodes are reported as "may move": the group
  cycle draws among tied nodes for each member, so other nodes alone do not prove a
  change;
- optionally a sample of bound pods is rescheduled the same way as pending ones (taken
  off their node first), to show what a reschedule would move.

One `ClusterState` per version, shared by every question (the caller may pass the same
one twice when both versions run under the same feature gates: nothing here changes it
for longer than one question); a scheduler-plugins group is simulated pod by pod, which
changes a state, so each such group gets a fresh one from the version's `scratch`. The
engine does not import the policy package: a policy is anything with `DiffPolicy`'s
shape, as `CompiledPolicy` has.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from policyd.engine.audit import (
    CheckedPolicy,
    PolicyChooser,
    SkippedPod,
    Violation,
    audit,
)
from policyd.engine.cycle import ScheduleResult, schedule_one
from policyd.engine.pod_group import GroupSummary, summarize_pod_by_pod
from policyd.engine.profiles import unserved_reason
from policyd.engine.simulate import group_answer
from policyd.framework.cycle_state import CycleState
from policyd.framework.runtime import Framework
from policyd.model.cluster import ClusterState
from policyd.model.node_info import NodeInfo
from policyd.model.pod_groups import COSCHEDULING_API, COSCHEDULING_PLUGIN, GroupKey, group_key
from policyd.model.records import Pod

# PodChange.change: what a version change does to one pod's placement.
STARTS_FITTING = "starts-fitting"
STOPS_FITTING = "stops-fitting"
MOVES = "moves"
TIE = "tie"  # the best nodes differ, but some are best in both versions
SAME = "same"  # the same best nodes (one, or the same tied set) in both versions
STILL_UNFIT = "still-unfit"
# Changes that are reported in detail (SAME and STILL_UNFIT are only counted).
CHANGES = (STARTS_FITTING, STOPS_FITTING, MOVES, TIE)

# Outcome.status
FITS = "fits"
UNSCHEDULABLE = "unschedulable"
ERROR = "error"
NOT_SERVED = "not-served"

# The tied best nodes kept by name per outcome; the count is always exact.
MAX_TIED_NAMES = 5
# A built-in filter's rejection has no policy or rule: it is the plugin's.
BUILTIN_MODE = "Enforce"  # policyd.policy.policy_schema.ENFORCE


class DiffPolicy(CheckedPolicy, Protocol):
    """A compiled policy as the diff reads it: audit's shape and its document, whose
    content tells a changed policy from an unchanged one."""

    @property
    def document(self) -> Mapping[str, Any]: ...


@dataclass(slots=True)
class Version:
    """One side of the comparison."""

    frameworks: Mapping[str, Framework]
    """schedulerName -> the profile that serves it (`serving_profiles`)."""
    cluster: ClusterState
    policies: Sequence[DiffPolicy]
    """Every compiled policy of every profile, once by metadata.name."""
    choose: PolicyChooser
    """Which of them judge a bound pod (audit's chooser: its profile's, or all)."""
    scratch: Callable[[], ClusterState] | None = None
    """A fresh copy of `cluster` (read again from the same input), for a
    scheduler-plugins pod group's simulation; None: such groups' pods are compared one
    by one."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """One pod's cycle under one version."""

    status: str  # FITS, UNSCHEDULABLE, ERROR, NOT_SERVED
    node: str | None = None
    total: int | None = None  # the chosen node's weighted total (None: not scored)
    tied: int = 0  # nodes at the best total (1: a clear winner; 0: not scored)
    best: tuple[str, ...] = ()  # the first of them in the cluster's node order
    feasible: int = 0
    message: str = ""  # why it does not fit, the error, or why no profile serves it


@dataclass(frozen=True, slots=True)
class PodChange:
    """A pod under both versions, and what the change does to it."""

    pod: str  # namespace/name
    bound_to: str  # its current node ("" for a pending pod)
    old: Outcome
    new: Outcome
    change: str  # one of STARTS_FITTING ... STILL_UNFIT
    old_node_now: int | None = None
    """The old choice's total under the new version (None: not feasible or not scored
    there); with `new.total`, how much better the new choice is."""

    @property
    def shift(self) -> int | None:
        """The chosen node's total, new minus old, when both versions scored."""
        if self.old.total is None or self.new.total is None:
            return None
        return self.new.total - self.old.total


@dataclass(frozen=True, slots=True)
class GroupChange:
    """A pod group's pending pods under both versions, tried as the group."""

    group: str  # the group's key, `namespace/name` (and its API when not the built-in one)
    pods: int  # its pending pods compared
    old: GroupSummary
    new: GroupSummary
    # Whether each version tried them as one group (else one by one, each on the
    # cluster as it is: `placed` then means some of them fit).
    old_whole: bool
    new_whole: bool
    change: str  # STARTS_FITTING (held -> placed), STOPS_FITTING, TIE (placed on other
    # nodes: may move), SAME (placed on the same nodes), STILL_UNFIT (held in both)


@dataclass(frozen=True, slots=True)
class PolicyChange:
    policy: str  # metadata.name
    change: str  # added, removed, changed


@dataclass(slots=True)
class DiffResult:
    policies: list[PolicyChange]
    pending: list[PodChange]  # every pending pod compared, changed or not
    rescored: list[PodChange]  # the bound pods sampled with `rescore_bound`
    new_violations: list[Violation]
    fixed_violations: list[Violation]
    bound_checked: int  # bound pods whose node was judged under both versions
    skipped: list[SkippedPod]  # bound pods not judged (finished, node missing...)
    builtins_checked: bool  # whether the built-in filters were compared too
    pending_skipped: int = 0  # pending pods no version's profile serves
    counts: dict[str, int] = field(default_factory=dict)
    # Pending pods of pod groups, compared by group (not in `pending`).
    groups: list[GroupChange] = field(default_factory=list)

    def changed(self, pods: Iterable[PodChange]) -> list[PodChange]:
        return [c for c in pods if c.change in CHANGES]


def fingerprint(policy: DiffPolicy) -> str:
    """The policy's document as canonical JSON: equal for the same content, whatever
    file or object it came from and in whatever key order."""
    return json.dumps(policy.document, sort_keys=True, default=str)


def diff(old: Version, new: Version, pods: Sequence[Pod], *, builtins_changed: bool = False,
         rescore_bound: int = 0, seed: int | None = None,
         progress: Callable[[str, int, int], None] | None = None) -> DiffResult:
    """Compare `old` and `new` on `pods` (the cluster's, pending and bound; each
    version's cluster holds the bound ones on their nodes and is left as it was).
    `builtins_changed`: the profiles differ in more than their policies, so the
    built-in filters are compared on bound pods too. `rescore_bound`: reschedule this
    many bound pods, a sample drawn with `seed`."""
    result = DiffResult(policies=policy_changes(old.policies, new.policies), pending=[],
                        rescored=[], new_violations=[], fixed_violations=[],
                        bound_checked=0, skipped=[], builtins_checked=builtins_changed)
    pending = [p for p in pods if not p.node_name and not p.finished and not p.deleting]
    grouped: dict[GroupKey, list[Pod]] = {}
    for i, pod in enumerate(pending):
        if (unserved_reason(pod, old.frameworks) is not None
                and unserved_reason(pod, new.frameworks) is not None):
            result.pending_skipped += 1
            continue
        key = group_key(pod)
        if key is not None and (_as_group(old, pod) or _as_group(new, pod)):
            grouped.setdefault(key, []).append(pod)
            continue
        result.pending.append(_compare(old, new, pod))
        if progress is not None:
            progress("pending", i + 1, len(pending))
    result.groups = [_compare_group(old, new, key, members)
                     for key, members in sorted(grouped.items(), key=lambda kv: str(kv[0]))]
    _compare_bound(old, new, pods, builtins_changed, result)
    if rescore_bound:
        result.rescored = _rescore(old, new, pods, rescore_bound, seed)
    for c in (*result.pending, *result.rescored):
        result.counts[c.change] = result.counts.get(c.change, 0) + 1
    return result


def policy_changes(old: Sequence[DiffPolicy], new: Sequence[DiffPolicy]) -> list[PolicyChange]:
    """Which policies the new version adds, removes or changes, by name."""
    before = {p.policy_name: fingerprint(p) for p in old}
    after = {p.policy_name: fingerprint(p) for p in new}
    out = [PolicyChange(n, "removed") for n in before if n not in after]
    out += [PolicyChange(n, "added") for n in after if n not in before]
    out += [PolicyChange(n, "changed") for n in after if n in before and after[n] != before[n]]
    out.sort(key=lambda c: c.policy)
    return out


# ---- placements --------------------------------------------------------------------

def _outcome(version: Version, pod: Pod) -> tuple[Outcome, ScheduleResult | None]:
    fw = version.frameworks.get(pod.scheduler_name)
    if fw is None:
        return Outcome(NOT_SERVED, message=unserved_reason(pod, version.frameworks) or ""
                       ), None
    result = schedule_one(fw, pod, version.cluster)
    if result.error is not None:
        return Outcome(ERROR, message=result.error.message), result
    if result.node is None:
        return Outcome(UNSCHEDULABLE, message=result.message), result
    feasible = _feasible_idx(result)
    if result.totals is None or feasible is None:
        # One feasible node: the cycle does not score (nothing to choose between).
        return Outcome(FITS, node=result.node, tied=1, best=(result.node,),
                       feasible=1 if feasible is None else int(feasible.size)), result
    rows = _best_rows(result)
    names = version.cluster.table().name_array
    return Outcome(FITS, node=result.node, total=_total_of(version, result, result.node),
                   tied=int(rows.size), best=tuple(names[rows[:MAX_TIED_NAMES]].tolist()),
                   feasible=int(feasible.size)), result


def _best_rows(result: ScheduleResult) -> Any:
    """The table rows of the nodes at the best total of a scored `result`, ascending
    (the feasible rows are)."""
    feasible = _feasible_idx(result)
    assert result.totals is not None and feasible is not None
    return feasible[result.totals == result.totals.max()]


def _feasible_idx(result: ScheduleResult) -> Any:
    found = result._feasible_idx
    return None if found is None else found[1]


def _total_of(version: Version, result: ScheduleResult | None, node: str) -> int | None:
    """`node`'s weighted total in `result`, None when it was not feasible or not scored."""
    if result is None or result.totals is None:
        return None
    feasible = _feasible_idx(result)
    row = version.cluster.table().index.get(node)
    if feasible is None or row is None:
        return None
    at = np.flatnonzero(feasible == row)
    return int(result.totals[int(at[0])]) if at.size else None


def _compare(old: Version, new: Version, pod: Pod, bound_to: str = "") -> PodChange:
    before, ran_before = _outcome(old, pod)
    after, ran_after = _outcome(new, pod)
    if before.status != FITS or after.status != FITS:
        if before.status == FITS:
            change = STOPS_FITTING
        elif after.status == FITS:
            change = STARTS_FITTING
        else:
            change = STILL_UNFIT
        return PodChange(pod.key, bound_to, before, after, change)
    assert before.node is not None and after.node is not None
    same, overlap = _compare_best(old, ran_before, new, ran_after)
    if same:
        change = SAME  # the same candidates: whichever the draw picks, it could pick alike
    elif overlap:
        change = TIE  # either version could draw a node the other could too
    else:
        change = MOVES
    return PodChange(pod.key, bound_to, before, after, change,
                     _total_of(new, ran_after, before.node))


def _compare_best(old: Version, ran_old: ScheduleResult | None, new: Version,
                  ran_new: ScheduleResult | None) -> tuple[bool, bool]:
    """Whether the two versions' best nodes are the same, and whether they overlap.
    Compared as table rows when both versions share one cluster state (thousands of
    identical nodes tie: no names are built), else by name."""
    assert ran_old is not None and ran_new is not None
    rows_old, rows_new = _rows_of(ran_old, old), _rows_of(ran_new, new)
    if old.cluster is not new.cluster:
        rows_old = np.sort(old.cluster.table().name_array[rows_old])
        rows_new = np.sort(new.cluster.table().name_array[rows_new])
    if rows_old.size == rows_new.size and bool(np.array_equal(rows_old, rows_new)):
        return True, True
    return False, bool(np.isin(rows_old, rows_new, assume_unique=True).any())


def _rows_of(result: ScheduleResult, version: Version) -> Any:
    """The best rows of a placed `result`: the chosen node's alone when it was not
    scored (one node fits)."""
    if result.totals is None or _feasible_idx(result) is None:
        assert result.node is not None
        return np.array([version.cluster.table().index[result.node]], np.int64)
    return _best_rows(result)


def _rescore(old: Version, new: Version, pods: Sequence[Pod], n: int,
             seed: int | None) -> list[PodChange]:
    """`n` bound pods drawn at random (`seed`), each rescheduled under both versions
    as if it were pending: taken off its node in each version's cluster, then put back."""
    bound = sorted((p for p in pods if p.node_name and not p.finished and not p.deleting
                    and old.cluster.get(p.node_name) is not None),
                   key=lambda p: p.key)
    sample = random.Random(seed).sample(bound, min(n, len(bound)))
    sample.sort(key=lambda p: p.key)
    out: list[PodChange] = []
    for pod in sample:
        # As the pod would come back to the queue: no spec.nodeName (NodeName's filter
        # would keep it on its node), a fresh memo (nothing cached for the bound copy).
        pending = dataclasses.replace(pod, node_name="", cache={})
        with old.cluster.what_if(remove=[pod]):
            if new.cluster is old.cluster:
                out.append(_compare(old, new, pending, pod.node_name))
                continue
            with new.cluster.what_if(remove=[pod]):
                out.append(_compare(old, new, pending, pod.node_name))
    return out


# ---- pod groups --------------------------------------------------------------------

def _as_group(version: Version, pod: Pod) -> bool:
    """Whether `version`'s profile for `pod` places its group as one (what
    `simulate.group_answer` answers for)."""
    fw = version.frameworks.get(pod.scheduler_name)
    if fw is None:
        return False
    if pod.scheduling_group:
        return fw.features.enabled("GenericWorkload")
    key = group_key(pod)
    return (key is not None and key.api == COSCHEDULING_API
            and any(pl.name == COSCHEDULING_PLUGIN for pl in fw.permit_plugins))


def _group_outcome(version: Version, key: GroupKey, members: list[Pod]
                   ) -> tuple[GroupSummary, bool]:
    """The group's answer under `version` (the answer takes all its pending members,
    whichever is asked), and whether it was tried as one group: not when the version
    does not place it as one, or no state can be spared for a scheduler-plugins group;
    then each member alone."""
    pod = members[0]
    fw = version.frameworks.get(pod.scheduler_name)
    if fw is not None and _as_group(version, pod):
        if pod.scheduling_group:
            summary = group_answer(fw, version.cluster, pod)  # the state as it was after
        elif version.scratch is not None:
            summary = group_answer(fw, version.scratch(), pod)
        else:
            summary = None
        if summary is not None:
            return summary, True
    results = [ran for _, ran in (_outcome(version, p) for p in members) if ran is not None]
    before = version.cluster.group_counts(key).scheduled
    return summarize_pod_by_pod(key, results, before, version.cluster), False


def _compare_group(old: Version, new: Version, key: GroupKey, members: list[Pod]
                   ) -> GroupChange:
    (before, old_whole), (after, new_whole) = (_group_outcome(old, key, members),
                                               _group_outcome(new, key, members))
    if before.placed and after.placed:
        change = SAME if before.nodes == after.nodes else TIE
    elif after.placed:
        change = STARTS_FITTING
    elif before.placed:
        change = STOPS_FITTING
    else:
        change = STILL_UNFIT
    return GroupChange(str(key), len(members), before, after, old_whole, new_whole, change)


# ---- bound pods --------------------------------------------------------------------

def _changed_only(mine: PolicyChooser, theirs: PolicyChooser) -> PolicyChooser:
    """`mine`, without the policies `theirs` gives the same pod with the same content:
    those judge the pod alike in both versions. Memoized per schedulerName, the only
    thing audit's choosers look at."""
    memo: dict[Hashable, Sequence[CheckedPolicy] | None] = {}

    def choose(pod: Pod) -> Sequence[CheckedPolicy] | None:
        key = pod.scheduler_name
        if key not in memo:
            policies = mine(pod)
            other = theirs(pod) or ()
            same = {(p.policy_name, fingerprint(p)) for p in other}  # type: ignore[arg-type]
            memo[key] = None if policies is None else [
                p for p in policies
                if (p.policy_name, fingerprint(p)) not in same]  # type: ignore[arg-type]
        return memo[key]
    return choose


def _key(v: Violation) -> tuple[str, str, str, str]:
    return (v.pod, v.policy, v.plugin, v.rule)


def _compare_bound(old: Version, new: Version, pods: Sequence[Pod], builtins: bool,
                   result: DiffResult) -> None:
    before = audit(old.cluster, pods, _changed_only(old.choose, new.choose))
    after = audit(new.cluster, pods, _changed_only(new.choose, old.choose))
    was = {_key(v) for v in before.violations}
    now = {_key(v) for v in after.violations}
    result.new_violations = [v for v in after.violations if _key(v) not in was]
    result.fixed_violations = [v for v in before.violations if _key(v) not in now]
    result.bound_checked = after.checked
    result.skipped = after.skipped
    if builtins:
        added, fixed = _compare_builtins(old, new, pods)
        result.new_violations += added
        result.fixed_violations += fixed
    order = lambda v: (v.policy, v.plugin, v.pod, v.rule)  # noqa: E731
    result.new_violations.sort(key=order)
    result.fixed_violations.sort(key=order)


def _compare_builtins(old: Version, new: Version, pods: Sequence[Pod]
                      ) -> tuple[list[Violation], list[Violation]]:
    """The built-in filters of each version's profile on each bound pod's own node,
    the pod taken off it: the verdicts that differ, as violations of the plugin."""
    added: list[Violation] = []
    fixed: list[Violation] = []
    # PreFilter's view of every node: the same NodeInfo objects throughout (taking a
    # pod off its node changes its NodeInfo in place), listed once per version.
    old_nodes, new_nodes = old.cluster.node_infos(), new.cluster.node_infos()
    for pod in pods:
        if not pod.node_name or pod.finished or pod.deleting:
            continue
        if old.cluster.get(pod.node_name) is None:
            continue  # audit lists it as skipped
        was = _builtin_verdict(old, pod, old_nodes)
        now = _builtin_verdict(new, pod, new_nodes)
        if now is not None and (was is None or was[0] != now[0]):
            added.append(Violation(pod.key, pod.node_name, "", now[0], "", BUILTIN_MODE,
                                   now[1]))
        if was is not None and (now is None or now[0] != was[0]):
            fixed.append(Violation(pod.key, pod.node_name, "", was[0], "", BUILTIN_MODE,
                                   was[1]))
    return added, fixed


def _builtin_verdict(version: Version, pod: Pod, nodes: Sequence[NodeInfo]
                     ) -> tuple[str, str] | None:
    """(plugin, message) of the first built-in filter (or PreFilter) that rejects the
    pod's own node in this version, or None when they all pass (or no profile serves
    the pod here)."""
    fw = version.frameworks.get(pod.scheduler_name)
    if fw is None:
        return None
    policies = {p.name for p in version.policies}
    filters = tuple(bf for bf in fw.filters if bf.name not in policies)
    cluster = version.cluster
    with cluster.what_if(remove=[pod]):
        info = cluster.get(pod.node_name)
        assert info is not None
        state = CycleState(nodes, cluster)
        state.framework = fw
        names, status, _ = fw.run_pre_filter(state, pod)
        if status is not None:
            if status.plugin in policies:
                return None  # a policy's own PreFilter: audit judged its rules
            return (status.plugin or "PreFilter", status.message)
        if names is not None and pod.node_name not in names:
            return ("PreFilter", f"node {pod.node_name} not among the nodes PreFilter kept")
        found = fw.run_filters_on_node(state, pod, info, filters)
    if found is None:
        return None
    return (found.plugin or "Filter", found.message)
