"""`numeric` scores: a number read from a node label or annotation.

A missing or non-numeric value is missing (it scores 0 whatever `prefer` says), and so
is a number beyond +-2^53 (normalization.MAX_RAW_VALUE, applied by the compiler).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from policyd.model.records import Pod
from policyd.policy.jmes import number
from policyd.policy.rules.base import FloatArray, NodeValue, ScoreRule
from policyd.policy.rules.scores import schemas

if TYPE_CHECKING:
    from policyd.model.table import IntArray, NodeTable


class NumericScore(ScoreRule):
    kind = schemas.NUMERIC

    def __init__(self, spec: Mapping[str, Any]) -> None:
        super().__init__(spec)
        num = spec["numeric"]
        self.from_label = "label" in num
        self.key: str = num["label"] if self.from_label else num["annotation"]
        if num.get("prefer", "highest") == "lowest":
            self.reverse = True
        # (table, its version, the annotation's numbers on every node): annotations
        # change only with node records, which bump the table's version.
        self._column: tuple[weakref.ref[NodeTable], int, FloatArray] | None = None

    def _annotation_column(self, table: NodeTable) -> FloatArray:
        cached = self._column
        if cached is not None and cached[0]() is table and cached[1] == table.version:
            return cached[2]
        key, nan = self.key, math.nan
        column = np.fromiter(
            (nan if (v := number(info.node.annotations.get(key))) is None else v
             for info in table.infos), np.float64, len(table.infos))
        self._column = (weakref.ref(table), table.version, column)
        return column

    def node_label_keys(self) -> tuple[str, ...]:
        return (self.key,) if self.from_label else ()

    def bind(self, pod: Pod) -> NodeValue:
        key = self.key
        if self.from_label:
            return lambda info: number(info.node.labels.get(key))
        return lambda info: number(info.node.annotations.get(key))

    def values(self, value: NodeValue, pod: Pod, table: NodeTable,
               idx: IntArray) -> FloatArray:
        if not self.from_label:
            return self._annotation_column(table)[idx]
        codes, vocab = table.label_codes(self.key)
        numbers = np.full(len(vocab) + 1, np.nan, np.float64)
        for v, code in vocab.items():
            n = number(v)
            if n is not None:
                numbers[code] = n
        return numbers[codes[idx]]
