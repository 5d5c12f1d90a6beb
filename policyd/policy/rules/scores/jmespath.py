"""`jmespath` scores: a JMESPath expression over {pod, node} giving a number.

A missing field is null; a result that is not a number, a number beyond +-2^53
(normalization.MAX_RAW_VALUE, applied by the compiler), or an evaluation error, is a
missing value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.policy.jmes import Expression, number
from policyd.policy.rules.base import NodeValue, ScoreRule
from policyd.policy.rules.scores import schemas


class JmesScore(ScoreRule):
    kind = schemas.JMESPATH

    def __init__(self, spec: Mapping[str, Any]) -> None:
        super().__init__(spec)
        self.expr = Expression(spec["jmespath"])

    def bind(self, pod: Pod) -> NodeValue:
        raw = pod.raw
        search = self.expr.search

        def value(info: NodeInfo) -> float | None:
            try:
                return number(search({"pod": raw, "node": info.node.raw}))
            except Exception:  # a runtime error counts as a missing value
                return None
        return value
