"""kube-scheduler's utilization shapes (`helper.FunctionShape`): the piecewise-linear
scores of NodeResourcesFit's RequestedToCapacityRatio and of VolumeBinding's storage
capacity scoring (StorageCapacityScoring), and upstream's one validation of a shape
(validateFunctionShape), shared so both plugins read and score a shape alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from policyd.plugins.helper.plugin_args import Problems, check_unknown_fields, parse_int, type_name
from policyd.problems import field_problem

# config.MaxCustomPriorityScore: shape scores are 0..10 and get scaled to the
# scheduler's 0..100.
MAX_CUSTOM_PRIORITY_SCORE = 10
MAX_UTILIZATION = 100


def go_div(a: int, b: int) -> int:
    """Go's integer division: truncates toward zero (Python's // floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


@dataclass(frozen=True, slots=True)
class ShapePoint:
    utilization: int
    score: int


def broken_linear_function(shape: Sequence[ShapePoint]) -> Callable[[int], int]:
    """helper.BuildBrokenLinearFunction: piecewise linear through the points, flat
    before the first and after the last; integer arithmetic truncating like Go."""
    points = tuple(shape)

    def f(p: int) -> int:
        for i, point in enumerate(points):
            if p <= point.utilization:
                if i == 0:
                    return points[0].score
                prev = points[i - 1]
                return prev.score + go_div((point.score - prev.score) * (p - prev.utilization),
                                           point.utilization - prev.utilization)
        return points[-1].score
    return f


def parse_shape(value: Any, path: str, problems: Problems) -> list[ShapePoint]:
    """validateFunctionShape: at least one point, utilization strictly increasing in
    [0, 100], score in [0, 10]."""
    if value is None or value == []:
        problems.append(field_problem(path, "Required value: at least one point must be specified"))
        return []
    if not isinstance(value, list):
        problems.append(field_problem(path, f"must be a list, not {type_name(value)}"))
        return []
    points: list[ShapePoint] = []
    for i, item in enumerate(value):
        ipath = f"{path}[{i}]"
        if not isinstance(item, dict):
            problems.append(field_problem(ipath, f"must be an object, not {type_name(item)}"))
            return []
        check_unknown_fields(item, ("utilization", "score"), ipath, problems)
        utilization = parse_int(item.get("utilization", 0), f"{ipath}.utilization", problems)
        score = parse_int(item.get("score", 0), f"{ipath}.score", problems)
        if utilization is None or score is None:
            return []
        points.append(ShapePoint(utilization, score))
    for i in range(1, len(points)):
        if points[i - 1].utilization >= points[i].utilization:
            problems.append(field_problem(f"{path}[{i}].utilization",
                             f"Invalid value: {points[i].utilization}: values must be sorted "
                             "in increasing order"))
            break
    for i, point in enumerate(points):
        if not 0 <= point.utilization <= MAX_UTILIZATION:
            problems.append(field_problem(f"{path}[{i}].utilization",
                             f"Invalid value: {point.utilization}: not in valid range "
                             f"[0, {MAX_UTILIZATION}]"))
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            problems.append(field_problem(f"{path}[{i}].score",
                             f"Invalid value: {point.score}: not in valid range "
                             f"[0, {MAX_CUSTOM_PRIORITY_SCORE}]"))
    return points
