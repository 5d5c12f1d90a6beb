"""The engine benchmark's table, from its JSON rows (so the docs/performance.md table can be
regenerated from committed results without rerunning anything)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

COLUMNS = ("workload", "nodes", "pods", "placed", "node churn", "gc.freeze", "pods/s",
           "pods/CPU-s", "p50 ms", "p99 ms", "peak RSS MB")
TEXT_COLUMNS = frozenset({"workload", "node churn", "gc.freeze"})  # left-aligned


def churn_label(row: Mapping[str, Any]) -> str:
    period = row.get("churnPeriod", 0)
    if not period:
        return "off"
    return f"every {period:g} s ({row.get('nodeUpdates', 0)} updates)"


def markdown(rows: Iterable[Mapping[str, Any]]) -> str:
    """One line per run, in the order given; rows written before churn and the
    gc.freeze switch existed read as churn off, freeze on (what that bench did)."""
    lines = ["| " + " | ".join(COLUMNS) + " |",
             "|" + "".join("---|" if c in TEXT_COLUMNS else "---:|" for c in COLUMNS)]
    for r in rows:
        cells = [r["workload"], r["nodes"], r["pods"], r["placed"], churn_label(r),
                 "on" if r.get("gcFreeze", True) else "off", r["podsPerSecond"],
                 r["podsPerCpuSecond"], r["p50ms"], r["p99ms"], r["peakRssMB"]]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def cost_by_node_count(rows: Iterable[Mapping[str, Any]], workload: str = "SchedulingBasic"
                       ) -> list[str]:
    """One sentence per (churn, freeze) setting with `workload` rows: its median time
    per pod at each node count. Generated, so the page prose that quotes these
    figures follows the table when the bench is rerun."""
    groups: dict[tuple[str, bool], list[Mapping[str, Any]]] = {}
    for r in rows:
        if r["workload"] == workload:
            # By the churn period, not the label: the update count differs per run.
            period = r.get("churnPeriod", 0)
            churn = f"every {period:g} s" if period else "off"
            groups.setdefault((churn, bool(r.get("gcFreeze", True))), []).append(r)
    sentences = []
    for (churn, freeze), group in groups.items():
        group = sorted(group, key=lambda r: r["nodes"])
        steps = ", ".join(f"{r['p50ms']:g} ms at {r['nodes']} nodes" for r in group)
        sentences.append(
            f"{workload} (node churn {churn}, gc.freeze {'on' if freeze else 'off'}), "
            f"median time per pod: {steps}.")
    return sentences


def peak_rss_at_most_nodes(rows: list[Mapping[str, Any]]) -> str:
    """The highest peak RSS of any run at the largest node count measured."""
    most = max(r["nodes"] for r in rows)
    top = max((r for r in rows if r["nodes"] == most), key=lambda r: r["peakRssMB"])
    return (f"Highest peak RSS at {most} nodes: {top['peakRssMB']:g} MB "
            f"({top['workload']}).")


FREEZE_NOTE = ("gc.freeze on: the loaded cluster was moved out of the garbage collector's "
               "reach before the pods were placed, as `policyd run` does once its caches "
               "first synced (`--gc-freeze`; off by default).")


def readme(doc: list[Mapping[str, Any]] | Mapping[str, Any]) -> str:
    """docs/performance.md's engine block: when and how it was measured (results written before
    the bench recorded that are a bare list of rows), the table, a note when any row ran
    with gc.freeze (the rows written before the switch existed did), and the
    per-node-count sentences."""
    parts = []
    if isinstance(doc, Mapping):
        rows = doc["rows"]
        parts.append(f"Measured {doc['date']} on {doc['machine']}: `{doc['command']}`\n")
    else:
        rows = doc
    parts.append(markdown(rows))
    if any(r.get("gcFreeze", True) for r in rows):
        parts.append(FREEZE_NOTE + "\n")
    parts.append(" ".join([*cost_by_node_count(rows), peak_rss_at_most_nodes(rows)]) + "\n")
    return "\n".join(parts)
