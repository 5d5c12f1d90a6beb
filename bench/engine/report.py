"""The engine benchmark's table, from its JSON rows (so the README table can be
regenerated from committed results without rerunning anything)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

COLUMNS = ("workload", "nodes", "pods", "placed", "node churn", "gc.freeze", "pods/s",
           "pods/CPU-s", "p50 ms", "p99 ms", "peak RSS MB")


def churn_label(row: Mapping[str, Any]) -> str:
    period = row.get("churnPeriod", 0)
    if not period:
        return "off"
    return f"every {period:g} s ({row.get('nodeUpdates', 0)} updates)"


def markdown(rows: Iterable[Mapping[str, Any]]) -> str:
    """One line per run, in the order given; rows written before churn and the
    gc.freeze switch existed read as churn off, freeze on (what that bench did)."""
    lines = ["| " + " | ".join(COLUMNS) + " |",
             "|---|" + "---:|" * (len(COLUMNS) - 1)]
    for r in rows:
        cells = [r["workload"], r["nodes"], r["pods"], r["placed"], churn_label(r),
                 "on" if r.get("gcFreeze", True) else "off", r["podsPerSecond"],
                 r["podsPerCpuSecond"], r["p50ms"], r["p99ms"], r["peakRssMB"]]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"
