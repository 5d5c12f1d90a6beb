"""One small protocol per extension point; a plugin implements only what it needs.

The runner discovers a plugin's extension points from the methods it has. Every method
receives plain records (Pod, NodeInfo) and returns values: `None` means Success.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from policyd.framework.cycle_state import CycleState
from policyd.framework.status import Status
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.model.table import BoolArray, IntArray, NodeTable


@runtime_checkable
class Plugin(Protocol):
    name: str


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    def less(self, a: Pod, b: Pod) -> bool:
        """Whether `a` should be scheduled before `b`."""


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[set[str] | None, Status | None]:
        """Compute per-pod data once. Returns (node names to restrict to or None for all,
        status). A Skip status means this plugin's Filter does not run for the pod; a
        rejection stops the cycle with its message."""


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        """Whether `pod` fits `node`; None when it does."""


@runtime_checkable
class FilterAllPlugin(Plugin, Protocol):
    def filter_all(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> list[Status | None]:
        """The batch form of `filter`, one result per node in order, for plugins that can
        evaluate many nodes at once faster than one call per node (vectorized). Must give
        exactly the results `filter` gives; tests compare the two."""


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> Status | None:
        """Compute per-pod scoring data over the feasible nodes. Skip: Score not run."""


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        """The node's raw score. Raising is an internal error (an Error status)."""


@runtime_checkable
class NormalizeScorePlugin(Plugin, Protocol):
    def normalize_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], scores: list[int]
    ) -> Status | None:
        """Rewrite `scores` (aligned with `nodes`) in place into [0, 100]."""


def default_normalize_score(max_priority: int, reverse: bool, scores: list[int]) -> None:
    """helper.DefaultNormalizeScore: scale to [0, max_priority] by the highest score;
    reversed, subtract from max_priority (all max when every score is 0)."""
    max_count = max(scores, default=0)
    if max_count == 0:
        if reverse:
            for i in range(len(scores)):
                scores[i] = max_priority
        return
    for i, s in enumerate(scores):
        s = max_priority * s // max_count
        scores[i] = max_priority - s if reverse else s


@runtime_checkable
class VectorFilterPlugin(Plugin, Protocol):
    def filter_mask(
        self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray
    ) -> BoolArray | None:
        """Pass/fail for the nodes `table.infos[idx]` at once (True = passes), or None
        when this pod needs the per-node `filter`. Must agree with `filter` exactly; the
        reasons of rejected nodes come from `filter` when they are needed."""


@runtime_checkable
class VectorScorePlugin(Plugin, Protocol):
    def score_vector(
        self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray
    ) -> IntArray | None:
        """Raw scores of the nodes `table.infos[idx]`, or None to use per-node `score`.
        If the plugin normalizes, `normalize_vector` must exist too."""


@runtime_checkable
class VectorNormalizePlugin(Plugin, Protocol):
    def normalize_vector(
        self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray, scores: IntArray
    ) -> IntArray:
        """The normalized form of `scores`, exactly as `normalize_score` computes it."""


def default_normalize_vector(max_priority: int, reverse: bool, scores: IntArray) -> IntArray:
    """`default_normalize_score` over an array (integer division as upstream)."""
    max_count = int(scores.max()) if scores.size else 0
    if max_count == 0:
        return np.full_like(scores, max_priority) if reverse else scores
    out = max_priority * scores // max_count
    return max_priority - out if reverse else out
