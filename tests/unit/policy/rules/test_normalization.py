"""Normalization of one rule's raw values into 0..100, and the weighted mean."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from policyd.policy.rules.normalization import combine, normalize, normalize_array


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
