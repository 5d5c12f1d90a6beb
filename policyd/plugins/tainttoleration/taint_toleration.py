"""TaintToleration: NoSchedule/NoExecute taints a pod does not tolerate rule a node out;
untolerated PreferNoSchedule taints only lower its score.

Filter reason is 1.34+'s `node(s) had untolerated taint(s)` (no taint named: upstream
dropped the `{key: value}` detail so that the FailedScheduling message aggregates).
Tolerations with the alpha comparison operators (Gt/Lt, feature gate
TaintTolerationComparisonOperators, off by default in 1.36) are not supported: the pod
decoder rejects them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from policyd.framework import MAX_NODE_SCORE, CycleState, PluginError, Status
from policyd.framework.events import (
    NODE,
    POD,
    QUEUE,
    QUEUE_SKIP,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
    queue_if_self,
)
from policyd.framework.interfaces import default_normalize_score, default_normalize_vector
from policyd.model.node_info import NodeInfo
from policyd.model.records import Node, Pod, Taint, Toleration
from policyd.model.row_memo import RowMemo
from policyd.model.table import BoolArray, IntArray, NodeTable
from policyd.plugins import names
from policyd.problems import field_problem

DEFAULT_WEIGHT = 3

ERR_REASON_UNTOLERATED = "node(s) had untolerated taint(s)"

_REJECT = Status.unresolvable(ERR_REASON_UNTOLERATED)
_PRE_SCORE_KEY = "TaintToleration/prefer_no_schedule_tolerations"
_NODE_KEY = "TaintToleration/taints"


def _node_taints(node: Node) -> tuple[tuple[Taint, ...], tuple[Taint, ...]]:
    """The node's (NoSchedule+NoExecute, PreferNoSchedule) taints, split once per Node
    record: a node update replaces the record, so the memo can never be stale."""
    split = node.cache.get(_NODE_KEY)
    if split is None:
        hard = tuple(t for t in node.taints if t.effect in ("NoSchedule", "NoExecute"))
        prefer = tuple(t for t in node.taints if t.effect == "PreferNoSchedule")
        split = (hard, prefer)
        node.cache[_NODE_KEY] = split
    return split


def _tolerated(tolerations: Sequence[Toleration], taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


def prefer_no_schedule_tolerations(pod: Pod) -> tuple[Toleration, ...]:
    """Tolerations that can match a PreferNoSchedule taint (an empty effect matches
    every effect)."""
    return tuple(t for t in pod.tolerations if t.effect in ("", "PreferNoSchedule"))


def _per_taint_set(table: NodeTable, rows: IntArray
                   ) -> tuple[list[tuple[Taint, ...]], IntArray]:
    """(taint sets, position of each row's set among them) for `rows`: every
    set of the table when there are no more of them than rows (the usual few), else only
    the distinct sets of the rows (a cluster with many distinct taint sets)."""
    sets = table.taint_sets
    ids = table.taint_set_id[rows]
    if len(sets) <= rows.size:
        return sets, ids
    distinct, inverse = np.unique(ids, return_inverse=True)
    return [sets[t] for t in distinct.tolist()], inverse.reshape(rows.shape)


def _tolerated_rows(table: NodeTable, tolerations: tuple[Toleration, ...],
                    rows: IntArray) -> BoolArray:
    """Whether `tolerations` tolerate every NoSchedule/NoExecute taint of each row,
    decided once per taint set."""
    sets, position = _per_taint_set(table, rows)
    ok = np.fromiter(
        (all(_tolerated(tolerations, t) for t in taints
             if t.effect in ("NoSchedule", "NoExecute")) for taints in sets),
        np.bool_, len(sets))
    verdicts: BoolArray = ok[position]
    return verdicts


def _untolerated_prefer_rows(table: NodeTable, tolerations: tuple[Toleration, ...],
                             rows: IntArray) -> IntArray:
    """How many PreferNoSchedule taints of each row `tolerations` leave untolerated,
    counted once per taint set."""
    sets, position = _per_taint_set(table, rows)
    counts = np.fromiter(
        (sum(1 for t in taints if t.effect == "PreferNoSchedule"
             and not _tolerated(tolerations, t)) for taints in sets),
        np.int64, len(sets))
    per_row: IntArray = counts[position]
    return per_row


class TaintToleration:
    name = names.TAINT_TOLERATION
    # Its Filter reads the node alone, never the pods on it (framework/interfaces.py).
    filter_reads_node_pods = False

    def __init__(self) -> None:
        # A pod's verdict on a node depends only on its tolerations and the node's taint
        # set: kept per tolerations between pods (see policyd.model.row_memo).
        self._filter_memo: RowMemo[tuple[Toleration, ...]] = RowMemo(_tolerated_rows)
        self._score_memo: RowMemo[tuple[Toleration, ...]] = RowMemo(_untolerated_prefer_rows)

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        hard = _node_taints(node.node)[0]
        if not hard:
            return None
        tolerations = pod.tolerations
        for taint in hard:
            if not _tolerated(tolerations, taint):
                return _REJECT
        return None

    def filter_mask(self, state: CycleState, pod: Pod, table: NodeTable,
                    idx: IntArray) -> BoolArray:
        mask = self._filter_memo.get(table, pod.tolerations, idx)
        assert mask is not None  # _tolerated_rows never declines
        return mask

    def pre_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> Status | None:
        state.write(_PRE_SCORE_KEY, prefer_no_schedule_tolerations(pod))
        return None

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        prefer = _node_taints(node.node)[1]
        if not prefer:
            return 0
        tolerations = state.get(_PRE_SCORE_KEY)
        if tolerations is None:
            # PreScore did not run (disabled in the profile). Upstream returns an Error
            # here; computing it is cheap and gives the score PreScore would have.
            tolerations = prefer_no_schedule_tolerations(pod)
        return sum(1 for taint in prefer if not _tolerated(tolerations, taint))

    def score_vector(self, state: CycleState, pod: Pod, table: NodeTable,
                     idx: IntArray) -> IntArray:
        tolerations = state.get(_PRE_SCORE_KEY)
        if tolerations is None:
            tolerations = prefer_no_schedule_tolerations(pod)
        counts = self._score_memo.get(table, tolerations, idx)
        assert counts is not None  # _untolerated_prefer_rows never declines
        return counts

    def normalize_vector(self, state: CycleState, pod: Pod, table: NodeTable,
                         idx: IntArray, scores: IntArray) -> IntArray:
        return default_normalize_vector(MAX_NODE_SCORE, True, scores)

    def normalize_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], scores: list[int]
    ) -> Status | None:
        # More untolerated PreferNoSchedule taints -> lower score.
        default_normalize_score(MAX_NODE_SCORE, True, scores)
        return None

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        # A node whose taints the pod now tolerates; the pod gained a toleration.
        return (
            ClusterEventWithHint(ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                                 _after_node_change),
            ClusterEventWithHint(ClusterEvent(POD, ActionType.UPDATE_POD_TOLERATION),
                                 queue_if_self),
        )


def _untolerated(pod: Pod, node: Node) -> bool:
    return not all(_tolerated(pod.tolerations, t) for t in _node_taints(node)[0])


def _after_node_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """Queue when the node went from having an untolerated taint (or not existing) to
    having none."""
    if not isinstance(new, Node) or _untolerated(pod, new):
        return QUEUE_SKIP
    was_untolerated = not isinstance(old, Node) or _untolerated(pod, old)
    return QUEUE if was_untolerated else QUEUE_SKIP


def new(args: Mapping[str, Any] | None = None) -> TaintToleration:
    if args:
        raise PluginError(names.TAINT_TOLERATION,
                          [field_problem("", "TaintToleration takes no arguments")])
    return TaintToleration()
