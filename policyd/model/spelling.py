"""Values from input files as their users wrote them, for messages.

A message about a bad value spells it the way YAML and JSON do (`null`, `true`, `1.5`,
`.inf`, `{"a": 1}`), never Python's `None`, `True` or `inf`: the people reading it wrote
YAML. Strings keep the single quotes the project's messages use for names (`'1K'`), and
long values are cut short.
"""

from __future__ import annotations

import json
import math
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
