"""Markdown tables from the runs' JSON: the median of a cell's repeats and their range,
each ratio (policyd vs kube-scheduler, each scheduler vs the null schedulers) as the
median and range of per-repeat ratios, where repeat r of one scheduler is paired with
repeat r of the other (they ran next to each other in the interleaved order), the
windows, the placement quality replay, policyd's CPU split by thread, and the checks.

Rendering reads only the JSON document (`document()` builds it), so docs/performance.md's
tables are regenerated from committed results by `bench.readme_tables`.

A cell with a run that failed a check or a deadline shows FAILED instead of its rate:
a scheduler that ignores a constraint, or did not finish, never shows a fast number.
Results written before issue 27's protocol (no `protocol` field) render with a line
saying what their window and kube-scheduler row were.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from bench.e2e.pacing import KEPT_UP_SHARE
from bench.e2e.schedulers import KNOWN_SCHEDULERS, KUBE_SCHEDULER, NULL, NULL_EVENTS, is_null
from bench.e2e.threads import GROUP_NAMES

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
        key = (s["workload"], s["nodes"], s["pods"], s.get("rate"), bool(s.get("pinned")))
        cells.setdefault(key, {}).setdefault(s["scheduler"], []).append(run)
    return cells


def _cores(key: tuple[Any, ...]) -> str:
    return "pinned" if key[4] else "shared"


def _ordered(per_scheduler: dict[str, list[Run]]) -> list[tuple[str, list[Run]]]:
    rank = {name: i for i, name in enumerate(KNOWN_SCHEDULERS)}
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


def _rates_by_repeat(runs: Sequence[Run]) -> dict[int, float]:
    """Each repeat's pods/s, for the runs that did not fail."""
    return {int(r["spec"].get("repeat", i)): float(r["figures"]["pods_per_s"])
            for i, r in enumerate(runs)
            if not r["failed"] and r["figures"].get("pods_per_s")}


def paired_ratios(runs: Sequence[Run], others: Sequence[Run]) -> list[float]:
    """runs' rate / others' rate for each repeat both have (repeat r with repeat r)."""
    mine, theirs = _rates_by_repeat(runs), _rates_by_repeat(others)
    return [mine[r] / theirs[r] for r in sorted(mine.keys() & theirs.keys()) if theirs[r]]


def _ceiling_runs(cells: dict[tuple[Any, ...], dict[str, list[Run]]], key: tuple[Any, ...],
                  null: str) -> list[Run]:
    """A null scheduler's runs in the cell `key` or, where it did not run that workload
    or every run of it failed a check (round-robin breaks MixedShapes' resource limits),
    at the same node count and cores (it evaluates nothing: the workload only changes
    the pod bodies it binds), taking the first such cell."""
    own = cells[key].get(null)
    if own and not all(r["failed"] for r in own):
        return own
    for (_, nodes, _, _, pinned), other in cells.items():
        theirs = other.get(null)
        if nodes == key[1] and pinned == key[4] and theirs and \
                not all(r["failed"] for r in theirs):
            return theirs
    return []


def _ratio(runs: Sequence[Run], others: Sequence[Run]) -> str:
    """`median (min–max)` of the paired ratios; FAILED rows and missing pairs show –."""
    if any(r["failed"] for r in runs) or not others:
        return "–"
    return spread(paired_ratios(runs, others), 2)


def capacity_table(doc: Doc) -> str:
    """One row per cell and scheduler. "vs kube-scheduler" divides each repeat's rate by
    kube-scheduler's in the same repeat of the cell; "of null" and "of null+ev" by the
    null scheduler's and the null scheduler posting events (see `_ceiling_runs`); each
    shown as the median of those per-repeat ratios and their range. The API server's
    CPU per pod is what it spent on each bound pod while that scheduler ran."""
    rows = ["| workload | nodes | pods | cores | scheduler | runs | pods/s | vs kube-scheduler "
            "| of null | of null+ev | CPU ms/pod | API server ms/pod | algorithm ms "
            "| attempt ms | peak RSS MiB | checks |",
            "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    cells = _cells(doc["runs"], "capacity")
    for key, per in cells.items():
        workload, nodes, pods, _, _ = key
        plain, with_events = _ceiling_runs(cells, key, NULL), _ceiling_runs(cells, key, NULL_EVENTS)
        kube = per.get(KUBE_SCHEDULER, [])
        for scheduler, runs in _ordered(per):
            failed = any(r["failed"] for r in runs)
            real = not is_null(scheduler)
            rows.append(
                f"| {workload} | {nodes} | {pods} | {_cores(key)} | {scheduler} | {len(runs)} | "
                f"{'FAILED' if failed else _figure(runs, 'pods_per_s')} | "
                f"{_ratio(runs, kube) if scheduler != KUBE_SCHEDULER else '–'} | "
                f"{_ratio(runs, plain) if real else '–'} | "
                f"{_ratio(runs, with_events) if real else '–'} | "
                f"{_figure(runs, 'cpu_ms_per_pod', 2)} | "
                f"{_figure(runs, 'apiserver_cpu_ms_per_pod', 2)} | "
                f"{_metric(runs, 'algorithm_ms')} | {_metric(runs, 'attempt_ms')} | "
                f"{_figure(runs, 'peak_rss_mb', 0)} | {_checks(runs)} |")
    return "\n".join(rows)


def windows_table(doc: Doc) -> str:
    """What the choice of window does to each rate: the earlier window (to the last
    bind), how long after it the last Scheduled event was seen, and the whole life of
    the scheduler (process start, start-up and cache sync included, to done)."""
    rows = ["| workload | nodes | cores | scheduler | pods/s | pods/s to last bind "
            "| events after last bind s | start to synced s | start to last bind s "
            "| start to done s | pods/s from start | CPU ms/pod from start |",
            "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key, per in _cells(doc["runs"], "capacity").items():
        for scheduler, runs in _ordered(per):
            rows.append(
                f"| {key[0]} | {key[1]} | {_cores(key)} | {scheduler} | "
                f"{_figure(runs, 'pods_per_s')} | {_figure(runs, 'pods_per_s_to_last_bind')} | "
                f"{_figure(runs, 'events_after_last_bind_s', 2)} | {_figure(runs, 'synced_s')} | "
                f"{_figure(runs, 'start_to_last_bind_s')} | "
                f"{_figure(runs, 'start_to_done_s')} | {_figure(runs, 'pods_per_s_from_start')} | "
                f"{_figure(runs, 'cpu_from_start_ms_per_pod', 2)} |")
    return "\n".join(rows)


def _quality(runs: Sequence[Run], key: str, digits: int) -> str:
    return spread([r["quality"].get(key) for r in runs if r.get("quality")], digits)


def quality_table(doc: Doc) -> str:
    """The placement quality of every run that has one, the null schedulers' included
    (recorded for them, not a check: they ignore scores by design). The check: no pod on
    a node without room for it, and the final utilisation spread at most the bound times
    the best-score placement's; beside it, replayed in bind order, the share of fitting
    nodes that scored higher than the one each pod got."""
    rows = ["| workload | nodes | cores | scheduler | runs | pods on a node without room "
            "| utilisation spread vs best-score placement | held | nodes scoring higher, "
            "bind order (share) | mean regret (points) |",
            "|---|---:|---|---|---:|---:|---:|---|---:|---:|"]
    for key, per in _cells(doc["runs"], "capacity").items():
        for scheduler, runs in _ordered(per):
            replayed = [r for r in runs if r.get("quality")]
            if not replayed:
                continue
            held = sum(bool(r["quality"]["held"]) for r in replayed)
            bound = replayed[0]["quality"].get("max_spread_ratio")
            rows.append(
                f"| {key[0]} | {key[1]} | {_cores(key)} | {scheduler} | {len(replayed)} | "
                f"{_quality(replayed, 'did_not_fit', 0)} | "
                f"{_quality(replayed, 'spread_ratio', 2)}x | "
                f"{held}/{len(replayed)} (none without room, spread <= {bound}x) | "
                f"{_quality(replayed, 'better_share', 4)} | "
                f"{_quality(replayed, 'mean_regret', 2)} |")
    return "\n".join(rows)


def cpu_split_table(doc: Doc) -> str:
    """policyd's CPU over the window by thread group, ms per counted pod, with each
    group's share of the process's CPU in brackets (medians over the repeats)."""
    head = " | ".join(GROUP_NAMES)
    rows = [f"| workload | nodes | cores | runs | CPU ms/pod | {head} |",
            "|---|---:|---|---:|---:|" + "---:|" * len(GROUP_NAMES)]
    for key, per in _cells(doc["runs"], "capacity").items():
        runs = [r for r in per.get("policyd", []) if r.get("cpu_split") and not r["failed"]]
        if not runs:
            continue
        cells = []
        for group in GROUP_NAMES:
            per_pod, shares = [], []
            for r in runs:
                split, counted = r["cpu_split"], _counted(r)
                total = sum(split.values())
                if counted:
                    per_pod.append(split.get(group, 0.0) * 1000 / counted)
                if total:
                    shares.append(100 * split.get(group, 0.0) / total)
            share = _median(shares)
            cells.append(f"{spread(per_pod, 2)}" + (f" ({share:.0f}%)" if share is not None
                                                     else ""))
        rows.append(f"| {key[0]} | {key[1]} | {_cores(key)} | {len(runs)} | "
                    f"{_figure(runs, 'cpu_ms_per_pod', 2)} | {' | '.join(cells)} |")
    return "\n".join(rows)


def _counted(run: Run) -> int:
    """Pods counted in a capacity run's window (bound after the warm-up pod)."""
    f = run["figures"]
    return int(f.get("bound", 0)) - int(f.get("bound_before_warm_up", 0))


def rate_table(doc: Doc) -> str:
    rows = ["| workload | nodes | arrival pods/s (asked) | cores | scheduler | runs | arrival "
            "achieved | binds/s | p50 ms | p99 ms | kept up | CPU ms/pod | checks |",
            "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---|---:|---|"]
    for key, per in _cells(doc["runs"], "rate").items():
        workload, nodes, _pods, rate, _ = key
        for scheduler, runs in _ordered(per):
            kept = sum(bool(r["figures"].get("kept_up")) and not r["failed"] for r in runs)
            short = sum(r["figures"].get("arrival_met") is False for r in runs)
            kept_text = f"{kept}/{len(runs)}" + (
                f" (arrival short of the asked rate in {short})" if short else "")
            rows.append(
                f"| {workload} | {nodes} | {rate:g} | {_cores(key)} | {scheduler} | {len(runs)} | "
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
    if doc.get("protocol") is None:
        parts += ["", "These runs predate issue 27's protocol: the window ends at the last "
                      "bind (Scheduled events still being posted), the kube-scheduler row "
                      "has contention profiling on (its v1 default), no run is pinned, and "
                      "ratios are of medians, not per repeat."]
    capacity = [r for r in doc["runs"] if r["spec"]["mode"] == "capacity"]
    if capacity:
        parts += ["", "Capacity (median of the repeats, range in brackets; ratios per "
                      "repeat, repeats paired in interleaving order):", "",
                  capacity_table(doc)]
    if any("start_to_done_s" in r["figures"] for r in capacity):
        parts += ["", "Windows: the same runs measured to the last bind, and from the "
                      "scheduler's process start:", "", windows_table(doc)]
    if any(r.get("quality") for r in capacity):
        parts += ["", "Placement quality under kube-scheduler's default resource scoring "
                      "(bench/e2e/quality.py; the null schedulers' shown, not checked):", "",
                  quality_table(doc)]
    if any(r.get("cpu_split") for r in capacity):
        parts += ["", "policyd's CPU over the window by thread (ms per pod, share of its "
                      "CPU; /proc/PID/task/*/stat):", "", cpu_split_table(doc)]
    if any(r["spec"]["mode"] == "rate" for r in doc["runs"]):
        parts += ["", f"Fixed arrival rate; kept up = {doc.get('kept_up_rule', KEPT_UP_RULE)}:",
                  "", rate_table(doc)]
    return "\n".join(parts) + "\n"
