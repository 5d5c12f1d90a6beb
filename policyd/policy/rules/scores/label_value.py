"""`labelValue` scores: points per value of a node label; `default` when the label is
missing or its value unlisted."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.policy.rules.base import FloatArray, NodeValue, ScoreRule
from policyd.policy.rules.scores import schemas

if TYPE_CHECKING:
    from policyd.model.table import IntArray, NodeTable


class LabelValueScore(ScoreRule):
    kind = schemas.LABEL_VALUE

    def __init__(self, spec: Mapping[str, Any]) -> None:
        super().__init__(spec)
        lv = spec["labelValue"]
        self.label: str = lv["label"]
        self.values_map: dict[str, float] = {str(k): float(v) for k, v in lv["values"].items()}
        self.default = float(lv.get("default", 0))

    def node_label_keys(self) -> tuple[str, ...]:
        return (self.label,)

    def bind(self, pod: Pod) -> NodeValue:
        label, values, default = self.label, self.values_map, self.default

        def value(info: NodeInfo) -> float | None:
            v = info.node.labels.get(label)
            return default if v is None else values.get(v, default)
        return value

    def values(self, value: NodeValue, pod: Pod, table: NodeTable,
               idx: IntArray) -> FloatArray:
        codes, vocab = table.label_codes(self.label)
        # Points per label code; the extra last slot (index -1, ABSENT) is the default.
        points = np.full(len(vocab) + 1, self.default, np.float64)
        for v, code in vocab.items():
            points[code] = self.values_map.get(v, self.default)
        return points[codes[idx]]
