"""`metric` scores: a node metric from the cache providers fill in the background (never
I/O here).

A value missing from the cache, older than its provider's maxAge or beyond +-2^53
(normalization.MAX_RAW_VALUE, applied by the compiler) is missing;
`missing: worst` scores 0, `neutral` 50, `skip` leaves the rule out of that node's
weighted mean. Missing values are always left out of min/max.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from policyd.model.node_info import NodeInfo
from policyd.model.node_metrics import EMPTY as EMPTY_METRICS
from policyd.model.node_metrics import MetricSnapshot, MetricsReader
from policyd.model.records import Pod
from policyd.policy.rules.base import FloatArray, NodeValue, ScoreRule
from policyd.policy.rules.scores import schemas

if TYPE_CHECKING:
    from policyd.model.table import IntArray, NodeTable


class _MetricValue:
    """A metric rule bound to one cycle: the snapshot and the time it is judged at, taken
    once in PreScore so that Score, NormalizeScore and the column path all read the same
    values whatever the providers publish meanwhile."""

    __slots__ = ("now", "snap")

    def __init__(self, snap: MetricSnapshot | None, now: float) -> None:
        self.snap = snap
        self.now = now

    def __call__(self, info: NodeInfo) -> float | None:
        snap = self.snap
        return None if snap is None else snap.get(info.node.name, self.now)


class MetricScore(ScoreRule):
    """`missing` says what a node without a fresh value scores: `worst` 0 (like every
    missing value), `neutral` 50, or `skip`: the rule does not count for that node (the
    policy's score is the weighted mean of the node's other rules). Until `source` is
    set (the policy's `use_metrics`), every value is missing."""

    kind = schemas.METRIC

    def __init__(self, spec: Mapping[str, Any]) -> None:
        super().__init__(spec)
        m = spec["metric"]
        self.metric: str = m["name"]
        self.reverse = m.get("prefer", "highest") == "lowest"
        self.missing: str = m.get("missing", "worst")
        self.source: MetricsReader = EMPTY_METRICS
        # (table, its version, snapshot generation, values, timestamps) per table:
        # node order changes only with the table's version, values with the generation.
        self._column: tuple[weakref.ref[NodeTable], int, int, FloatArray,
                            FloatArray] | None = None

    def bind(self, pod: Pod) -> NodeValue:
        source = self.source
        return _MetricValue(source.snapshot(self.metric), source.now())

    def values(self, value: NodeValue, pod: Pod, table: NodeTable,
               idx: IntArray) -> FloatArray:
        if not isinstance(value, _MetricValue):
            return super().values(value, pod, table, idx)
        snap = value.snap
        if snap is None:
            return np.full(idx.size, np.nan, np.float64)
        cached = self._column
        if cached is None or cached[0]() is not table or cached[1] != table.version \
                or cached[2] != snap.generation:
            nan = (math.nan, math.nan)
            entries = [snap.values.get(info.node.name, nan) for info in table.infos]
            vals = np.fromiter((e[0] for e in entries), np.float64, len(entries))
            stamps = np.fromiter((e[1] for e in entries), np.float64, len(entries))
            cached = (weakref.ref(table), table.version, snap.generation, vals, stamps)
            self._column = cached
        vals, stamps = cached[3][idx], cached[4][idx]
        # The same test as MetricSnapshot.get: older than max_age is missing.
        stale = ~(value.now - stamps <= snap.max_age)
        return np.where(stale, np.nan, vals)
