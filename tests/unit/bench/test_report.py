"""The e2e report's tables: medians and ranges of repeats, ratios per paired repeat
(vs kube-scheduler, of the null schedulers), FAILED instead of a number for a cell with
a failed run, the windows, the placement quality and policyd's CPU split."""

from __future__ import annotations

from typing import Any

from bench.e2e import report


def _run(scheduler: str, pods_per_s: float, *, failed: bool = False, mode: str = "capacity",
         rate: float | None = None, repeat: int = 0, pinned: bool = False,
         **figures: Any) -> dict[str, Any]:
    return {"spec": {"mode": mode, "workload": "SchedulingBasic", "scheduler": scheduler,
                     "nodes": 500, "pods": 1000, "rate": rate, "repeat": repeat,
                     "pinned": pinned},
            "failed": failed,
            "failures": ["check anti_affinity_held: 2 share a node"] if failed else [],
            "figures": {"pods_per_s": pods_per_s, "cpu_ms_per_pod": 2.0,
                        "synced_s": 1.0, "peak_rss_mb": 100.0, **figures},
            "metrics": {"algorithm_ms": 0.5, "attempt_ms": 3.0},
            "checks": {"every_measured_pod_bound": {"held": not failed}}}


def _doc(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return report.document(runs, machine="m", date="2026-12-01", commands=["cmd"], qps=5000.0,
                           burst=5000, protocol=2)


def test_spread() -> None:
    assert report.spread([3.0, 1.0, 2.0]) == "2.0 (1.0–3.0)"
    assert report.spread([2.0, None]) == "2.0"
    assert report.spread([None]) == "–"


def _row(table: str, scheduler: str) -> list[str]:
    line = next(r for r in table.splitlines() if f"| {scheduler} |" in r)
    return [c.strip() for c in line.strip("|").split("|")]


def test_capacity_table_medians_and_ratios_per_paired_repeat() -> None:
    rates = {"kube-scheduler": (200, 220, 210), "policyd": (190, 240, 230),
             "null": (250, 200, 240)}
    runs = [_run(name, r[i], repeat=i) for i in range(3) for name, r in rates.items()]
    table = report.capacity_table(_doc(runs))
    policyd = _row(table, "policyd")
    assert policyd[3:7] == ["shared", "policyd", "3", "230.0 (190.0–240.0)"]
    # Each repeat against the same repeat of the other scheduler, not medians divided.
    assert policyd[7] == report.spread([190 / 200, 240 / 220, 230 / 210], 2)
    assert policyd[8] == report.spread([190 / 250, 240 / 200, 230 / 240], 2)
    assert policyd[8] == "0.96 (0.76–1.20)"
    assert policyd[-1] == "3/3 held (1 checks)"
    assert _row(table, "kube-scheduler")[7] == "–"  # not a ratio to itself
    assert _row(table, "null")[8] == "–"


def test_only_repeats_both_schedulers_have_are_paired() -> None:
    runs = [_run("policyd", 100, repeat=0), _run("policyd", 300, repeat=1),
            _run("null", 200, repeat=1)]
    assert report.paired_ratios(runs[:2], runs[2:]) == [1.5]


def test_a_failed_run_never_shows_a_rate() -> None:
    runs = [_run("policyd", 500, failed=True), _run("policyd", 200, repeat=1),
            _run("null", 250, repeat=1)]
    row = _row(report.capacity_table(_doc(runs)), "policyd")
    assert row[6] == "FAILED" and row[8] == "–"
    assert row[-1] == "FAILED 1/2: check anti_affinity_held"


def test_pinned_runs_are_a_cell_of_their_own() -> None:
    runs = [_run("policyd", 100), _run("null", 200),
            _run("policyd", 150, pinned=True), _run("null", 150, pinned=True)]
    table = report.capacity_table(_doc(runs))
    shares = {line.split("|")[4].strip(): line.split("|")[9].strip()
              for line in table.splitlines() if "| policyd |" in line}
    assert shares == {"shared": "0.50", "pinned": "1.00"}


def test_rate_table_counts_kept_up_runs() -> None:
    runs = [_run("policyd", 0, mode="rate", rate=100.0, kept_up=True, p50_ms=40.0,
                 p99_ms=90.0, arrival_rate=99.5, bind_rate=99.0),
            _run("policyd", 0, mode="rate", rate=100.0, kept_up=False, p50_ms=60.0,
                 p99_ms=900.0, arrival_rate=99.0, bind_rate=80.0)]
    row = _row(report.rate_table(_doc(runs)), "policyd")
    assert row[2:4] == ["100", "shared"] and row[8] == "50 (40–60)" and row[10] == "1/2"
    runs[1]["figures"]["arrival_met"] = False
    row = _row(report.rate_table(_doc(runs)), "policyd")
    assert row[10] == "1/2 (arrival short of the asked rate in 1)"


def test_markdown_has_only_the_tables_with_runs() -> None:
    text = report.markdown(_doc([_run("policyd", 100)]))
    assert "Capacity" in text and "Fixed arrival rate" not in text
    assert text.startswith("Measured 2026-12-01 on m")


def test_share_of_null_falls_back_to_the_null_runs_at_the_same_node_count() -> None:
    other = _run("policyd", 100)
    other["spec"]["workload"] = "PolicyMix"
    runs = [_run("null", 250), other]
    assert _row(report.capacity_table(_doc(runs)), "policyd")[8] == "0.40"


def test_share_of_the_null_scheduler_with_events_in_its_own_column() -> None:
    runs = [_run("policyd", 300), _run("null", 600), _run("null-events", 400)]
    table = report.capacity_table(_doc(runs))
    assert _row(table, "policyd")[8:10] == ["0.50", "0.75"]
    assert _row(table, "null-events")[8:10] == ["–", "–"]  # not a share of itself
    # Without null-events runs the column stays empty rather than borrowing the plain one.
    assert _row(report.capacity_table(_doc(runs[:2])), "policyd")[8:10] == ["0.50", "–"]


def test_the_api_servers_cpu_per_pod_is_shown_where_recorded() -> None:
    with_api = _run("policyd", 300, apiserver_cpu_ms_per_pod=1.9)
    table = report.capacity_table(_doc([with_api, _run("null", 600)]))
    assert _row(table, "policyd")[11] == "1.90"
    assert _row(table, "null")[11] == "–"  # an older result without the figure


def test_windows_quality_and_cpu_split_tables() -> None:
    policyd = _run("policyd", 400, pods_per_s_to_last_bind=500.0, start_to_done_s=6.0,
                   start_to_last_bind_s=5.5,
                   events_after_last_bind_s=0.5, bound=1000, bound_before_warm_up=0)
    policyd["quality"] = {"better_share": 0.001, "mean_regret": 0.01, "below_best": 0.002,
                          "did_not_fit": 0, "spread_ratio": 1.0, "held": True,
                          "max_spread_ratio": 1.15}
    policyd["cpu_split"] = {"scheduling loop": 0.6, "binders": 0.2, "event posting": 0.1,
                            "informers": 0.1, "other": 0.0}
    null = _run("null", 800)
    null["quality"] = {"better_share": 0.16, "mean_regret": 0.4, "below_best": 0.2,
                       "did_not_fit": 116, "spread_ratio": 1.35, "held": False,
                       "max_spread_ratio": 1.15}
    text = report.markdown(_doc([policyd, null]))
    assert "predate" not in text
    windows = _row(report.windows_table(_doc([policyd, null])), "policyd")
    assert windows[4:10] == ["400.0", "500.0", "0.50", "1.0", "5.5", "6.0"]
    quality = report.quality_table(_doc([policyd, null]))
    assert _row(quality, "null")[5:8] == ["116", "1.35x", "0/1 (none without room, spread "
                                                             "<= 1.15x)"]
    assert _row(quality, "null")[8] == "0.1600"
    assert _row(quality, "policyd")[7].startswith("1/1")
    split = report.cpu_split_table(_doc([policyd, null])).splitlines()[-1]
    assert "| 0.60 (60%) | 0.20 (20%) | 0.10 (10%) | 0.10 (10%) | 0.00 (0%) |" in split


def test_results_before_the_protocol_say_so() -> None:
    doc = _doc([_run("policyd", 100)])
    del doc["protocol"]
    assert "predate issue 27's protocol" in report.markdown(doc)


def test_a_null_cell_that_failed_its_checks_is_no_ceiling() -> None:
    # Round-robin overcommits MixedShapes' nodes: the SchedulingBasic null rate is used.
    basic = _run("null", 400)
    mixed_null = _run("null", 900, failed=True)
    mixed = _run("policyd", 100)
    for run in (mixed_null, mixed):
        run["spec"]["workload"] = "MixedShapes"
    table = report.capacity_table(_doc([basic, mixed_null, mixed]))
    line = next(r for r in table.splitlines() if r.startswith("| MixedShapes") and "policyd" in r)
    assert line.split("|")[9].strip() == "0.25"
