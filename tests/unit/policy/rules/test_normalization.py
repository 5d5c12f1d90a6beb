"""Normalization of one rule's raw values into 0..100, and the weighted mean."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from policyd.policy.rules.normalization import (
    MAX_RAW_VALUE,
    combine,
    normalize,
    normalize_array,
    usable,
    usable_array,
)


@pytest.mark.parametrize(("method", "reverse", "raw", "expected"), [
    ("none", False, [0, 50.7, 100, 150, -3, None], [0, 50, 100, 100, 0, 0]),
    ("none", True, [0, 30, None], [100, 70, 0]),
    ("max", False, [0, 5, 10, None], [0, 50, 100, 0]),
    ("max", True, [0, 5, 10, None], [100, 50, 0, 0]),
    ("max", False, [0, 0], [0, 0]),
    ("max", True, [0, 0], [100, 100]),
    ("max", False, [-5, 5], [0, 100]),
    ("minmax", False, [10, 15, 20, None], [0, 50, 100, 0]),
    ("minmax", True, [10, 15, 20, None], [100, 50, 0, 0]),
    ("minmax", False, [3, 3], [100, 100]),
    ("minmax", False, [None, None], [0, 0]),
    ("minmax", False, [0.1, 0.2, 0.3], [0, 50, 100]),
    ("minmax", False, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [0, 11, 22, 33, 44, 55, 66, 77, 88, 100]),
])
def test_normalize(method: str, reverse: bool, raw: list[float | None],
                   expected: list[int]) -> None:
    assert normalize(method, reverse, raw) == expected


def test_combine_is_a_weighted_mean_with_integer_division() -> None:
    assert combine([80, 20], [[100, 67, 0], [50, 100, 100]], 3) == [90, 73, 20]
    assert combine([1, 2], [[100, 0], [0, 100]], 2) == [33, 66]


@pytest.mark.parametrize("seed", range(200))
def test_normalize_array_is_normalize_per_element(seed: int) -> None:
    rng = random.Random(seed)
    pool = [0.0, 1.0, 100.0, -2.5, 0.1, 0.2, 0.3, 1e-12, 1e15, 33.3333, None]
    raw = [rng.choice(pool) if rng.random() < 0.5 else rng.uniform(-50, 250)
           for _ in range(rng.randint(0, 12))]
    for method in ("none", "max", "minmax"):
        for reverse in (False, True):
            column = np.array([math.nan if v is None else v for v in raw], np.float64)
            assert normalize_array(method, reverse, column).tolist() == normalize(
                method, reverse, raw)


# Values at and beyond the raw-value bound, and what `usable` makes of each.
_LIMITS = [(2.0**53, 2.0**53), (-(2.0**53), -(2.0**53)), (2.0**53 + 2, None),
           (1e308, None), (-1e308, None), (math.inf, None), (-math.inf, None),
           (math.nan, None), (5e-324, 5e-324), (-0.0, -0.0), (None, None)]


@pytest.mark.parametrize(("value", "expected"), _LIMITS)
def test_usable_keeps_values_within_two_to_the_53(value: float | None,
                                                  expected: float | None) -> None:
    assert MAX_RAW_VALUE == 2**53
    assert usable(value) == expected
    column = np.array([math.nan if value is None else value], np.float64)
    got = usable_array(column)[0]
    assert (math.isnan(got) if expected is None else got == expected)


@pytest.mark.parametrize("seed", range(50))
def test_usable_values_normalize_into_0_to_100_without_warnings(seed: int) -> None:
    rng = random.Random(seed)
    pool = [1e308, -1e308, 2.0**53, -(2.0**53), 2.0**53 + 2, 9.9e307, 1e-300, 0.0, 5.0,
            math.inf, math.nan, None]
    raw = [rng.choice(pool) for _ in range(rng.randint(1, 8))]
    kept = [usable(v) for v in raw]
    column = usable_array(np.array([math.nan if v is None else v for v in raw], np.float64))
    # An overflow, a division by zero or an invalid cast raises here (underflow is
    # numpy's default "ignore": it rounds toward 0, which floor takes as is).
    with np.errstate(over="raise", divide="raise", invalid="raise"):
        for method in ("none", "max", "minmax"):
            for reverse in (False, True):
                want = normalize(method, reverse, kept)
                assert all(0 <= s <= 100 for s in want)
                assert normalize_array(method, reverse, column).tolist() == want
