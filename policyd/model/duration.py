"""Go durations (`time.ParseDuration`), as Kubernetes configuration writes them.

Here, below both, because the profile (`config`) and plugin args (DynamicResourcesArgs'
`filterTimeout`) read them, and plugins may not import the config layer.
"""

from __future__ import annotations

import math
import re

from policyd.model.spelling import show_value

_DURATION = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0,
                 "m": 60.0, "h": 3600.0}


# Go's time.Duration is int64 nanoseconds: ParseDuration refuses anything longer than
# 2562047h47m16.854775807s (about 292 years) as "invalid duration".
MAX_DURATION_SECONDS = (2**63 - 1) / 1e9
MAX_DURATION = "2562047h47m16.854775807s"


class DurationTooLong(ValueError):
    """A well-formed duration Go cannot hold; the message says the bound."""

    def __init__(self) -> None:
        super().__init__(f"longer than {MAX_DURATION}, the longest a Go time.Duration "
                         "(int64 nanoseconds) holds")


def parse_duration(text: str) -> float:
    """Seconds in a Go duration ("15s", "1m30s", "500ms", "-2s", "0"); ValueError when
    `text` is not one (DurationTooLong when it is one Go cannot hold)."""
    if not isinstance(text, str):
        raise ValueError(f"not a duration: {show_value(text)}")
    body = text[1:] if text[:1] in "+-" else text
    sign = -1.0 if text.startswith("-") else 1.0
    if body == "0":
        return 0.0
    if len(body) > 64:  # Go's durations end at about 290 years: a few dozen characters
        raise ValueError(f"not a duration: {show_value(text)}")
    # Anchored matches, one after another: scanning for matches anywhere would retry
    # the digit run from every position (quadratic on a long string of digits).
    pos, total = 0, 0.0
    while pos < len(body) and (m := _DURATION.match(body, pos)) is not None:
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if not body or pos != len(body) or not math.isfinite(total):
        raise ValueError(f"not a duration: {show_value(text)}")
    if total > MAX_DURATION_SECONDS:
        raise DurationTooLong
    return sign * total


def format_duration(seconds: float) -> str:
    """`seconds` as Go's Duration.String() writes it ("10s", "1m30s", "1h0m0s",
    "1.5s", "500ms", "0s"): upstream's messages print durations with %v."""
    ns = round(seconds * 1e9)
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns == 0:
        return "0s"
    if ns < 1_000:
        return f"{sign}{ns}ns"
    if ns < 1_000_000_000:
        unit, per = ("µs", 1_000) if ns < 1_000_000 else ("ms", 1_000_000)
        return sign + _with_fraction(ns, per) + unit
    whole, rest = divmod(ns, 1_000_000_000)
    text = _with_fraction(whole % 60 * 1_000_000_000 + rest, 1_000_000_000) + "s"
    minutes = whole // 60
    if minutes:
        text = f"{minutes % 60}m{text}"
        if minutes // 60:
            text = f"{minutes // 60}h{text}"
    return sign + text


def _with_fraction(value: int, per: int) -> str:
    """value/per in decimal, without trailing zeros (Go's fmtFrac)."""
    whole, rest = divmod(value, per)
    if not rest:
        return str(whole)
    digits = len(str(per)) - 1
    return f"{whole}.{rest:0{digits}d}".rstrip("0")
