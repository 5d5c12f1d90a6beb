"""`cel` scores: a CEL expression over `pod` and `node` (see policyd/policy/celexpr.py)
giving a number.

An int, uint or double is the raw value; anything else (a dyn expression that gave a
string), a number beyond +-2^53 (normalization.MAX_RAW_VALUE, applied by the
compiler) or an evaluation error is a missing value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.policy.celexpr import CelInput
from policyd.policy.rules.base import NodeValue, ScoreRule
from policyd.policy.rules.scores import schemas


class CelScore(ScoreRule):
    kind = schemas.CEL

    def __init__(self, spec: Mapping[str, Any]) -> None:
        super().__init__(spec)
        self.expr = CelInput(spec["cel"], self.id)

    def node_label_keys(self) -> tuple[str, ...]:
        return self.expr.node_label_keys()

    def bind(self, pod: Pod) -> NodeValue:
        evaluate = self.expr.bind(pod.raw)

        def value(info: NodeInfo) -> float | None:
            try:
                v = evaluate(info.node)
            except Exception:  # an evaluation error counts as a missing value
                return None
            if isinstance(v, bool) or not isinstance(v, int | float):
                return None
            try:
                f = float(v)
            except OverflowError:  # a uint beyond float64 cannot happen; stay safe
                return None
            return f if math.isfinite(f) else None
        return value
