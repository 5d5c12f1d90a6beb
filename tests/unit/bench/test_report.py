"""The e2e report's tables: medians and ranges of repeats, the share of the null
scheduler, and FAILED instead of a number for a cell with a failed run."""

from __future__ import annotations

from typing import Any

from bench.e2e import report


def _run(scheduler: str, pods_per_s: float, *, failed: bool = False, mode: str = "capacity",
         rate: float | None = None, **figures: Any) -> dict[str, Any]:
    return {"spec": {"mode": mode, "workload": "SchedulingBasic", "scheduler": scheduler,
                     "nodes": 500, "pods": 1000, "rate": rate},
            "failed": failed,
            "failures": ["check anti_affinity_held: 2 share a node"] if failed else [],
            "figures": {"pods_per_s": pods_per_s, "cpu_ms_per_pod": 2.0,
                        "synced_s": 1.0, "peak_rss_mb": 100.0, **figures},
            "metrics": {"algorithm_ms": 0.5, "attempt_ms": 3.0},
            "checks": {"every_measured_pod_bound": {"held": not failed}}}


def _doc(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return report.document(runs, machine="m", date="2026-12-01", commands=["cmd"], qps=5000.0,
                           burst=5000)


def test_spread() -> None:
    assert report.spread([3.0, 1.0, 2.0]) == "2.0 (1.0–3.0)"
    assert report.spread([2.0, None]) == "2.0"
    assert report.spread([None]) == "–"


def _row(table: str, scheduler: str) -> list[str]:
    line = next(r for r in table.splitlines() if f"| {scheduler} |" in r)
    return [c.strip() for c in line.strip("|").split("|")]


def test_capacity_table_medians_and_share_of_null() -> None:
    runs = [_run("kube-scheduler", 200), _run("policyd", 190), _run("null", 250),
            _run("kube-scheduler", 220), _run("policyd", 240), _run("null", 200),
            _run("kube-scheduler", 210), _run("policyd", 230), _run("null", 240)]
    table = report.capacity_table(_doc(runs))
    policyd = _row(table, "policyd")
    assert policyd[4:7] == ["3", "230.0 (190.0–240.0)", f"{230 / 240:.2f}"]
    assert policyd[-1] == "3/3 held (1 checks)"
    assert _row(table, "null")[6] == "–"


def test_a_failed_run_never_shows_a_rate() -> None:
    runs = [_run("policyd", 500, failed=True), _run("policyd", 200), _run("null", 250)]
    row = _row(report.capacity_table(_doc(runs)), "policyd")
    assert row[5] == "FAILED" and row[6] == "–"
    assert row[-1] == "FAILED 1/2: check anti_affinity_held"


def test_rate_table_counts_kept_up_runs() -> None:
    runs = [_run("policyd", 0, mode="rate", rate=100.0, kept_up=True, p50_ms=40.0,
                 p99_ms=90.0, arrival_rate=99.5, bind_rate=99.0),
            _run("policyd", 0, mode="rate", rate=100.0, kept_up=False, p50_ms=60.0,
                 p99_ms=900.0, arrival_rate=99.0, bind_rate=80.0)]
    row = _row(report.rate_table(_doc(runs)), "policyd")
    assert row[2] == "100" and row[7] == "50 (40–60)" and row[9] == "1/2"
    runs[1]["figures"]["arrival_met"] = False
    row = _row(report.rate_table(_doc(runs)), "policyd")
    assert row[9] == "1/2 (arrival short of the asked rate in 1)"


def test_markdown_has_only_the_tables_with_runs() -> None:
    text = report.markdown(_doc([_run("policyd", 100)]))
    assert "Capacity" in text and "Fixed arrival rate" not in text
    assert text.startswith("Measured 2026-12-01 on m")


def test_share_of_null_falls_back_to_the_null_runs_at_the_same_node_count() -> None:
    other = _run("policyd", 100)
    other["spec"]["workload"] = "PolicyMix"
    runs = [_run("null", 200), _run("null", 300), other]
    assert _row(report.capacity_table(_doc(runs)), "policyd")[6] == "0.40"


def test_share_of_the_null_scheduler_with_events_in_its_own_column() -> None:
    runs = [_run("policyd", 300), _run("null", 600), _run("null-events", 400)]
    table = report.capacity_table(_doc(runs))
    assert _row(table, "policyd")[6:8] == ["0.50", "0.75"]
    assert _row(table, "null-events")[6:8] == ["–", "–"]  # not a share of itself
    # Without null-events runs the column stays empty rather than borrowing the plain one.
    assert _row(report.capacity_table(_doc(runs[:2])), "policyd")[6:8] == ["0.50", "–"]


def test_the_api_servers_cpu_per_pod_is_shown_where_recorded() -> None:
    with_api = _run("policyd", 300, apiserver_cpu_ms_per_pod=1.9)
    table = report.capacity_table(_doc([with_api, _run("null", 600)]))
    assert _row(table, "policyd")[9] == "1.90"
    assert _row(table, "null")[9] == "–"  # an older result without the figure
