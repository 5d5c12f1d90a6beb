"""The preemption tables of docs/performance.md, from bench/results/preemption-latest.json
(rows of both `bench.preemption_bench` benches, as it writes them)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any


def _range(values: Sequence[float], digits: int = 1) -> str:
    """The median, and the range when the runs differ."""
    med = round(statistics.median(values), digits)
    lo, hi = round(min(values), digits), round(max(values), digits)
    return f"{med:g}" if lo == hi else f"{med:g} ({lo:g}–{hi:g})"


def markdown(doc: Mapping[str, Any]) -> str:
    rows = doc["rows"]
    out = [f"Measured {doc['date']} on {doc['machine']}; "
           + "; ".join(f"`{c}`" for c in doc["commands"]) + ".", ""]
    engine = [r for r in rows if r["bench"] == "engine"]
    if engine:
        out += ["Engine alone, one preemption (`schedule_one` with its dry runs), this "
                "process's CPU:", "",
                "| nodes | shape | dry runs | preemptions | CPU ms (median, min) | wall ms |",
                "|---:|---|---|---:|---:|---:|"]
        out += [f"| {r['nodes']} | {r['shape']} | {r['form']} | {r['preemptions']} | "
                f"{r['cpu_ms_median']:g} ({r['cpu_ms_min']:g}) | {r['wall_ms_median']:g} |"
                for r in engine]
        out.append("")
    side = [r for r in rows if r["bench"] == "side-by-side"]
    if side:
        out += ["Side by side on the local API server, per preemptor (POST to bind; CPU "
                "from /proc, 10 ms ticks), medians over the runs (range):", "",
                "| nodes | shape | scheduler | runs | one at a time: CPU ms | wall ms | "
                "burst: preemptors | CPU ms per preemptor | wall s | extra victims | "
                "failed checks |",
                "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        cells: dict[tuple[int, str, str], list[Mapping[str, Any]]] = {}
        for r in side:
            cells.setdefault((r["nodes"], r["shape"], r["scheduler"]), []).append(r)
        for (nodes, shape, scheduler), runs in cells.items():
            done = [r for r in runs if "burst_cpu_s" in r]
            failed = [f for r in runs for f in r["failures"]]
            if not done:
                out.append(f"| {nodes} | {shape} | {scheduler} | {len(runs)} | – | – | – | "
                           f"– | – | – | {len(failed)}: {failed[0][:80]} |")
                continue
            out.append(
                f"| {nodes} | {shape} | {scheduler} | {len(runs)} | "
                f"{_range([c for r in done for c in r['single_cpu_ms']])} | "
                f"{_range([r['single_wall_ms_median'] for r in done])} | "
                f"{done[0]['burst']} | "
                f"{_range([r['burst_cpu_ms_per_preemptor'] for r in done])} | "
                f"{_range([r['burst_wall_s'] for r in done], 2)} | "
                f"{sum(_extra(r) for r in done)} | "
                + (f"{len(failed)}: {'; '.join(failed)[:120]}" if failed else "none")
                + " |")
    return "\n".join(out) + "\n"


def _extra(row: Mapping[str, Any]) -> int:
    """Victims beyond one per preemptor."""
    return int(row.get("extra_victims", 0))
