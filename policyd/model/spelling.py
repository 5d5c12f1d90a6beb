"""Values from input files as their users wrote them, for messages.

A message about a bad value spells it the way YAML and JSON do (`null`, `true`, `1.5`,
`.inf`, `{"a": 1}`), never Python's `None`, `True` or `inf`: the people reading it wrote
YAML. Strings keep the single quotes the project's messages use for names (`'1K'`), and
long values are cut short. `closest` is the one "did you mean" for a name that names
nothing: a spelling that differs only by case first, then the nearest by difflib.
"""

from __future__ import annotations

import difflib
import heapq
import json
import math
from collections.abc import Sequence
from typing import Any

SHOWN_VALUE_MAX = 60  # characters of a long string, mapping or list quoted in a message


def show_value(value: Any) -> str:
    if isinstance(value, str):
        text = repr(value)
        return text if len(text) <= SHOWN_VALUE_MAX else text[:SHOWN_VALUE_MAX - 4] + "...'"
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return repr(value)
    if isinstance(value, int):
        return str(value) if abs(value) < 10**SHOWN_VALUE_MAX else "a very long integer"
    try:
        text = json.dumps(value, ensure_ascii=False, default=str, separators=(", ", ": "))
    except (ValueError, TypeError, RecursionError):
        text = f"<{type(value).__name__}>"
    return text if len(text) <= SHOWN_VALUE_MAX else text[:SHOWN_VALUE_MAX - 3] + "..."


# difflib compares at most this many candidates (a few tenths of a second); of more (the
# pods of a big cluster), those sharing the longest prefix with the name, then nearest
# in length: a misspelling keeps most of a name's start.
_COMPARED_MAX = 2000


def closest(name: str, candidates: Sequence[str], n: int = 1) -> list[str]:
    """Up to `n` of `candidates` that a misspelt `name` most likely meant: those equal
    to it but for case first, then difflib's closest (ratio 0.6 or more)."""
    folded = name.lower()
    out = [c for c in candidates if c.lower() == folded and c != name][:n]
    if len(out) < n:
        compared = list(candidates)
        if len(compared) > _COMPARED_MAX:
            compared = heapq.nlargest(_COMPARED_MAX, compared, key=lambda c: (
                _shared_prefix(c, name), -abs(len(c) - len(name))))
        out += [c for c in difflib.get_close_matches(name, compared, n=n + 1, cutoff=0.6)
                if c not in out and c != name][:n - len(out)]
    return out


def _shared_prefix(a: str, b: str) -> int:
    """How many leading characters `a` and `b` have in common."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))
