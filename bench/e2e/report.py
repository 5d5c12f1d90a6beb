"""Markdown tables from the runs' JSON: the median of a cell's repeats and their range,
each scheduler's capacity as a share of the null scheduler's, and the checks.

Rendering reads only the JSON document (`document()` builds it), so docs/performance.md's
tables are regenerated from committed results by `bench.readme_tables`.

A cell with a run that failed a check or a deadline shows FAILED instead of its rate:
a scheduler that ignores a constraint, or did not finish, never shows a fast number.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from bench.e2e.pacing import KEPT_UP_SHARE
from bench.e2e.schedulers import NULL, NULL_EVENTS, SCHEDULERS, is_null

Doc = dict[str, Any]
Run = dict[str, Any]


def document(runs: Sequence[Run], **context: Any) -> Doc:
    """The JSON written by `--json`: every run with every field, plus `context`
    (machine, command line, date, ...)."""
    return {**context, "kept_up_rule": KEPT_UP_RULE, "runs": list(runs)}


KEPT_UP_RULE = (
    f"every pod bound; bind rate (pods / first creation to last bind) >= {KEPT_UP_SHARE} x "
    f"achieved arrival rate; least-squares slope of the backlog (created - bound, every "
    f"second of the arrival window) <= {1 - KEPT_UP_SHARE:.2f} x arrival rate")


def spread(values: Sequence[float | None], digits: int = 1) -> str:
    """`median (min–max)` of the values that exist; one value alone; `–` for none."""
    present = [float(v) for v in values if v is not None]
    if not present:
        return "–"
    med = statistics.median(present)
    if len(present) == 1 or min(present) == max(present):
        return f"{med:.{digits}f}"
    return f"{med:.{digits}f} ({min(present):.{digits}f}–{max(present):.{digits}f})"


def _median(values: Sequence[float | None]) -> float | None:
    present = [float(v) for v in values if v is not None]
    return statistics.median(present) if present else None


def _cells(runs: Sequence[Run], mode: str) -> dict[tuple[Any, ...], dict[str, list[Run]]]:
    cells: dict[tuple[Any, ...], dict[str, list[Run]]] = {}
    for run in runs:
        s = run["spec"]
        if s["mode"] != mode:
            continue
        key = (s["workload"], s["nodes"], s["pods"], s.get("rate"))
        cells.setdefault(key, {}).setdefault(s["scheduler"], []).append(run)
    return cells


def _ordered(per_scheduler: dict[str, list[Run]]) -> list[tuple[str, list[Run]]]:
    rank = {name: i for i, name in enumerate(SCHEDULERS)}
    return sorted(per_scheduler.items(), key=lambda kv: rank.get(kv[0], len(rank)))


def _checks(runs: Sequence[Run]) -> str:
    failed = [r for r in runs if r["failed"]]
    if not failed:
        names = sorted({k for r in runs for k in r.get("checks", {})})
        return f"{len(runs)}/{len(runs)} held ({len(names)} checks)"
    reasons = sorted({f.split(":")[0] for r in failed for f in r["failures"]})
    return f"FAILED {len(failed)}/{len(runs)}: {'; '.join(reasons)}"


def _figure(runs: Sequence[Run], key: str, digits: int = 1) -> str:
    return spread([r["figures"].get(key) for r in runs if not r["failed"]], digits)


def _metric(runs: Sequence[Run], key: str, digits: int = 2) -> str:
    return spread([r["metrics"].get(key) for r in runs if not r["failed"]], digits)


def _null_rate(null: Sequence[Run]) -> float | None:
    if not null or any(r["failed"] for r in null):
        return None
    return _median([r["figures"].get("pods_per_s") for r in null])


def _ceiling(cells: dict[tuple[Any, ...], dict[str, list[Run]]], key: tuple[Any, ...],
             null: str) -> float | None:
    """A null scheduler's median rate in the cell `key` or, where it did not run that
    workload, over its runs at the same node count (it evaluates nothing: the workload
    only changes the pod bodies it binds)."""
    nodes = key[1]
    return _null_rate(cells[key].get(null) or [
        r for (_, n, _, _), other in cells.items() if n == nodes for r in other.get(null, [])])


def _share(rate: float | None, ceiling: float | None) -> str:
    return "–" if rate is None or not ceiling else f"{rate / ceiling:.2f}"


def capacity_table(doc: Doc) -> str:
    """One row per cell and scheduler. "of null" divides by the null scheduler's
    median, "of null+ev" by that of the null scheduler posting Scheduled events (see
    `_ceiling`); the API server's CPU per pod is what it spent on each bound pod while
    that scheduler ran (results written before it was recorded show –)."""
    rows = ["| workload | nodes | pods | scheduler | runs | pods/s | of null | of null+ev "
            "| CPU ms/pod | API server ms/pod | algorithm ms | attempt ms | start to synced s "
            "| peak RSS MiB | checks |",
            "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    cells = _cells(doc["runs"], "capacity")
    for key, per in cells.items():
        workload, nodes, pods, _ = key
        plain, with_events = _ceiling(cells, key, NULL), _ceiling(cells, key, NULL_EVENTS)
        for scheduler, runs in _ordered(per):
            failed = any(r["failed"] for r in runs)
            rate = None if failed or is_null(scheduler) else _median(
                [r["figures"].get("pods_per_s") for r in runs])
            rows.append(
                f"| {workload} | {nodes} | {pods} | {scheduler} | {len(runs)} | "
                f"{'FAILED' if failed else _figure(runs, 'pods_per_s')} | "
                f"{_share(rate, plain)} | {_share(rate, with_events)} | "
                f"{_figure(runs, 'cpu_ms_per_pod', 2)} | "
                f"{_figure(runs, 'apiserver_cpu_ms_per_pod', 2)} | "
                f"{_metric(runs, 'algorithm_ms')} | "
                f"{_metric(runs, 'attempt_ms')} | {_figure(runs, 'synced_s')} | "
                f"{_figure(runs, 'peak_rss_mb', 0)} | {_checks(runs)} |")
    return "\n".join(rows)


def rate_table(doc: Doc) -> str:
    rows = ["| workload | nodes | arrival pods/s (asked) | scheduler | runs | arrival "
            "achieved | binds/s | p50 ms | p99 ms | kept up | CPU ms/pod | checks |",
            "|---|---:|---:|---|---:|---:|---:|---:|---:|---|---:|---|"]
    for (workload, nodes, _pods, rate), per in _cells(doc["runs"], "rate").items():
        for scheduler, runs in _ordered(per):
            kept = sum(bool(r["figures"].get("kept_up")) and not r["failed"] for r in runs)
            short = sum(r["figures"].get("arrival_met") is False for r in runs)
            kept_text = f"{kept}/{len(runs)}" + (
                f" (arrival short of the asked rate in {short})" if short else "")
            rows.append(
                f"| {workload} | {nodes} | {rate:g} | {scheduler} | {len(runs)} | "
                f"{_figure(runs, 'arrival_rate')} | {_figure(runs, 'bind_rate')} | "
                f"{_figure(runs, 'p50_ms', 0)} | {_figure(runs, 'p99_ms', 0)} | "
                f"{kept_text} | {_figure(runs, 'cpu_ms_per_pod', 2)} | "
                f"{_checks(runs)} |")
    return "\n".join(rows)


def markdown(doc: Doc) -> str:
    """Every table the document has runs for, with one line saying where and how."""
    commands = "; ".join(f"`{c}`" for c in doc.get("commands", []))
    parts = [f"Measured {doc.get('date', '?')} on {doc.get('machine', '?')}; client "
             f"QPS/burst {doc.get('qps', '?')}/{doc.get('burst', '?')} for every "
             f"scheduler; {commands}."]
    if any(r["spec"]["mode"] == "capacity" for r in doc["runs"]):
        parts += ["", "Capacity (median of the repeats, range in brackets):", "",
                  capacity_table(doc)]
    if any(r["spec"]["mode"] == "rate" for r in doc["runs"]):
        parts += ["", f"Fixed arrival rate; kept up = {doc.get('kept_up_rule', KEPT_UP_RULE)}:",
                  "", rate_table(doc)]
    return "\n".join(parts) + "\n"
