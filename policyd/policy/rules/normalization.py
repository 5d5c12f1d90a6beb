"""Score rules' raw values over the feasible nodes -> 0..100, and their weighted mean.

Missing values (None; NaN in columns) score 0 after normalization, whatever `reverse`
says, and are left out of min/max; a rule's `missing` setting then adjusts them
(`apply_missing`). `normalize` and `normalize_array` are the per-node and the column
forms of the same integers.

A raw value counts only within +-MAX_RAW_VALUE (2^53): `usable` and `usable_array` (the
per-node and the column form) make anything else missing before it is normalized, so
what a node label, annotation, metric or JMESPath result holds (1e308, -1e308, a huge
integer) never reaches arithmetic that overflows (v * 100, highest - lowest).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from policyd.framework import MAX_NODE_SCORE
from policyd.policy import schema_parts
from policyd.policy.rules.base import FloatArray, ScoreRule

if TYPE_CHECKING:
    from policyd.model.table import IntArray

# A rule's 0..100 and the policy's combined score are node scores like any plugin's.
MAX_SCORE = MAX_NODE_SCORE
NEUTRAL_SCORE = MAX_SCORE // 2  # `missing: neutral`
# The largest magnitude a raw value may have: 2^53, the last integer float64 holds
# exactly. Within it, (highest - lowest) * 100 and value * 100 stay finite (far below
# float64's 1.8e308); beyond it a value is treated as missing. docs/policy-language.md
# states the same bound, and the reference evaluator restates it.
MAX_RAW_VALUE = float(schema_parts.MAX_RAW_VALUE)


def usable(value: float | None) -> float | None:
    """A raw value as normalization takes it: finite and within +-MAX_RAW_VALUE, else
    None (missing)."""
    if value is None or not -MAX_RAW_VALUE <= value <= MAX_RAW_VALUE:  # NaN fails too
        return None
    return value


def usable_array(raw: FloatArray) -> FloatArray:
    """`usable` over a column: NaN (missing) wherever the value is out of range."""
    # Comparisons with NaN and infinities are False without a floating-point warning.
    return np.where(np.abs(raw) <= MAX_RAW_VALUE, raw, np.nan)


def _pct(num: float, den: float) -> int:
    # A tiny epsilon so that exact ratios computed in floating point (x*100/x) floor
    # to the integer they are, not one below.
    return max(0, min(MAX_SCORE, math.floor(num * MAX_SCORE / den + 1e-9)))


def normalize(method: str, reverse: bool, raw: Sequence[float | None]) -> list[int]:
    """One rule's raw values over the nodes -> 0..100. Missing values score 0."""
    out = [0] * len(raw)
    if method == "none":
        for i, v in enumerate(raw):
            if v is not None:
                s = max(0, min(MAX_SCORE, math.floor(v + 1e-9)))
                out[i] = MAX_SCORE - s if reverse else s
        return out
    if method == "max":
        # DefaultNormalizeScore: value * 100 / highest; reversed, 100 minus that;
        # negative values count as 0; all zero: 0 (reversed: 100).
        present = [max(0.0, v) for v in raw if v is not None]
        hi = max(present, default=0.0)
        for i, v in enumerate(raw):
            if v is None:
                continue
            s = _pct(max(0.0, v), hi) if hi > 0 else 0
            out[i] = MAX_SCORE - s if reverse else s
        return out
    # minmax: lowest present value 0, highest 100; all equal: 100.
    present = [v for v in raw if v is not None]
    if not present:
        return out
    lo, hi = min(present), max(present)
    for i, v in enumerate(raw):
        if v is None:
            continue
        s = MAX_SCORE if hi == lo else _pct(v - lo, hi - lo)
        if hi != lo and reverse:
            s = MAX_SCORE - s
        out[i] = s
    return out


def normalize_array(method: str, reverse: bool, raw: FloatArray) -> IntArray:
    """`normalize` over a column (NaN = missing); the same integers, element by element:
    the float operations happen in the same order, so they round the same way."""
    present = ~np.isnan(raw)
    out = np.zeros(raw.size, np.int64)
    if not present.any():
        return out
    v = np.where(present, raw, 0.0)
    if method == "none":
        s = np.clip(np.floor(v + 1e-9), 0, MAX_SCORE).astype(np.int64)
        s = MAX_SCORE - s if reverse else s
    elif method == "max":
        v = np.maximum(v, 0.0)
        hi = float(v[present].max())
        if hi > 0:
            s = np.clip(np.floor(v * MAX_SCORE / hi + 1e-9), 0, MAX_SCORE).astype(np.int64)
        else:
            s = np.zeros(raw.size, np.int64)
        s = MAX_SCORE - s if reverse else s
    else:
        lo, hi = float(v[present].min()), float(v[present].max())
        if hi == lo:
            s = np.full(raw.size, MAX_SCORE, np.int64)
        else:
            s = np.clip(np.floor((v - lo) * MAX_SCORE / (hi - lo) + 1e-9), 0,
                        MAX_SCORE).astype(np.int64)
            s = MAX_SCORE - s if reverse else s
    out[present] = s[present]
    return out


def combine(weights: Sequence[int], per_rule: Sequence[Sequence[int]], n: int,
            counted: Sequence[Sequence[bool] | None] | None = None) -> list[int]:
    """Weighted mean of the rules' 0..100 scores per node (integer division).

    `counted[k]` (None: every node) says on which nodes rule k counts at all: a
    `missing: skip` metric rule is left out of the mean of nodes without a value; a
    node on which no rule counts scores 0."""
    if counted is None or all(c is None for c in counted):
        wsum = sum(weights)
        out = [0] * n
        for w, scores in zip(weights, per_rule, strict=True):
            for i, s in enumerate(scores):
                out[i] += w * s
        return [t // wsum for t in out] if wsum else out
    totals = [0] * n
    wsums = [0] * n
    for w, scores, mask in zip(weights, per_rule, counted, strict=True):
        for i, s in enumerate(scores):
            if mask is None or mask[i]:
                totals[i] += w * s
                wsums[i] += w
    return [t // ws if ws else 0 for t, ws in zip(totals, wsums, strict=True)]


def apply_missing(rule: ScoreRule, raw: Sequence[float | None], scores: list[int]
                  ) -> list[bool] | None:
    """Adjust one rule's normalized scores for its `missing` setting; returns on which
    nodes it counts (None: all)."""
    if rule.missing == "worst":
        return None
    if rule.missing == "neutral":
        for i, v in enumerate(raw):
            if v is None:
                scores[i] = NEUTRAL_SCORE
        return None
    return [v is not None for v in raw]
