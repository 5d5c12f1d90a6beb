"""Turning what providers receive into numbers the cache accepts.

One place decides what a usable metric value is, so every provider drops the same
garbage with the same reason label: not a number, NaN, an infinity, or a negative value
where the metric says negatives are meaningless (latencies, loads). A dropped value is
never a scheduling input; it is counted in `policyd_node_metrics_errors_total`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from policyd.policy.jmes import JSON_NUMBER, json_number

NOT_A_NUMBER = "not_a_number"
NAN = "nan"
INFINITE = "infinite"
NEGATIVE = "negative"
BAD_RESPONSE = "bad_response"
MISSING_NODE_LABEL = "missing_node_label"
DUPLICATE = "duplicate"
_GO_SPECIALS = {"NaN": NAN, "+Inf": INFINITE, "-Inf": INFINITE, "Inf": INFINITE}


def clean_value(raw: Any, *, allow_negative: bool = False) -> tuple[float | None, str | None]:
    """(value, None) for a usable number, else (None, reason). Accepts numbers and
    numeric strings (Prometheus sends sample values as strings, annotations are
    strings); booleans are not numbers."""
    if isinstance(raw, bool) or raw is None:
        return None, NOT_A_NUMBER
    if isinstance(raw, int | float):
        try:
            value = float(raw)
        except OverflowError:  # an integer beyond float64
            return None, INFINITE
    elif isinstance(raw, str):
        # Prometheus spells its specials as Go does; anything else must be a JSON number,
        # the grammar policies read numbers with ("1_000", " 1", "0x10" are not numbers).
        special = _GO_SPECIALS.get(raw)
        if special is not None:
            return None, special
        number = json_number(raw)
        if number is None:  # not a JSON number, or one beyond float64 ("1e400")
            return None, INFINITE if JSON_NUMBER.fullmatch(raw) else NOT_A_NUMBER
        value = float(number)
    else:
        return None, NOT_A_NUMBER
    if math.isnan(value):
        return None, NAN
    if math.isinf(value):
        return None, INFINITE
    if value < 0 and not allow_negative:
        return None, NEGATIVE
    return value, None


def parse_vector(body: bytes, node_label: str, *, allow_negative: bool = False
                 ) -> tuple[dict[str, float], list[str]]:
    """Values per node from a Prometheus instant-query response body, and the reasons
    of everything dropped. Raises ValueError (reason `bad_response`) when the body is
    not a successful instant vector at all."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(doc, Mapping):
        raise ValueError("not a JSON object")
    if doc.get("status") != "success":
        raise ValueError(f"status {doc.get('status')!r}: {doc.get('error', '')}".rstrip(": "))
    data = doc.get("data")
    if not isinstance(data, Mapping) or not isinstance(data.get("result"), list):
        raise ValueError("no data.result list")
    if data.get("resultType") != "vector":
        raise ValueError(f"resultType {data.get('resultType')!r}, need an instant vector "
                         "(one series per node)")
    values: dict[str, float] = {}
    dropped: list[str] = []
    seen: set[str] = set()
    for series in data["result"]:
        if not isinstance(series, Mapping) or not isinstance(series.get("metric"), Mapping):
            dropped.append(BAD_RESPONSE)
            continue
        node = series["metric"].get(node_label)
        if not isinstance(node, str) or not node:
            dropped.append(MISSING_NODE_LABEL)
            continue
        sample = series.get("value")
        if not isinstance(sample, list) or len(sample) != 2:
            dropped.append(BAD_RESPONSE)
            continue
        if node in seen:
            # Two series for one node: the query does not aggregate by the node label,
            # and picking either would be arbitrary.
            dropped.append(DUPLICATE)
            values.pop(node, None)
            continue
        seen.add(node)
        value, reason = clean_value(sample[1], allow_negative=allow_negative)
        if reason is not None:
            dropped.append(reason)
            continue
        assert value is not None
        values[node] = value
    return values, dropped
