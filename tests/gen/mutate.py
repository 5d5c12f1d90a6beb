"""Malformed variants of API objects for the decode fuzz tests: a few leaves (or whole
subtrees) replaced by junk values, or keys dropped."""

from __future__ import annotations

import copy
import random
from collections.abc import Sequence
from typing import Any


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


def mutate(obj: dict[str, Any], rng: random.Random, n: int, junk: Sequence[Any]
           ) -> dict[str, Any]:
    """A copy of `obj` with `n` places changed: a key dropped (one time in five, where
    the place is in a map) or its value replaced by a copy of one of `junk`."""
    obj = copy.deepcopy(obj)
    for _ in range(n):
        paths = _paths(obj)
        if not paths:
            break
        path = rng.choice(paths)
        target = obj
        for p in path[:-1]:
            target = target[p]
        if rng.random() < 0.2 and isinstance(target, dict):
            del target[path[-1]]
        else:
            target[path[-1]] = copy.deepcopy(rng.choice(junk))
    return obj
