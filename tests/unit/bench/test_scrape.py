"""Histogram deltas from two Prometheus text scrapes, for both schedulers' names."""

from __future__ import annotations

from bench.e2e import scrape

BEFORE = """\
# HELP scheduler_scheduling_algorithm_duration_seconds [ALPHA] Scheduling algorithm latency
# TYPE scheduler_scheduling_algorithm_duration_seconds histogram
scheduler_scheduling_algorithm_duration_seconds_bucket{le="+Inf"} 1
scheduler_scheduling_algorithm_duration_seconds_sum 0.002
scheduler_scheduling_algorithm_duration_seconds_count 1
# TYPE scheduler_scheduling_attempt_duration_seconds histogram
scheduler_scheduling_attempt_duration_seconds_sum{profile="p",result="scheduled"} 0.01
scheduler_scheduling_attempt_duration_seconds_count{profile="p",result="scheduled"} 1
"""

AFTER = """\
# TYPE scheduler_scheduling_algorithm_duration_seconds histogram
scheduler_scheduling_algorithm_duration_seconds_bucket{le="+Inf"} 11
scheduler_scheduling_algorithm_duration_seconds_sum 0.022
scheduler_scheduling_algorithm_duration_seconds_count 11
# TYPE scheduler_scheduling_attempt_duration_seconds histogram
scheduler_scheduling_attempt_duration_seconds_sum{profile="p",result="scheduled"} 0.51
scheduler_scheduling_attempt_duration_seconds_count{profile="p",result="scheduled"} 11
scheduler_scheduling_attempt_duration_seconds_sum{profile="p",result="error"} 0.1
scheduler_scheduling_attempt_duration_seconds_count{profile="p",result="error"} 1
# TYPE scheduler_framework_extension_point_duration_seconds histogram
""" + "".join(
    f'scheduler_framework_extension_point_duration_seconds_{what}'
    f'{{extension_point="{point}",profile="p",status="Success"}} {value}\n'
    for point, total in (("Filter", 0.012), ("Score", 0.024))
    for what, value in (("sum", total), ("count", 11)))


def test_totals_add_label_sets_and_split_by_a_label() -> None:
    totals = scrape.histogram_totals(AFTER, "scheduler_scheduling_attempt_duration_seconds")
    assert totals[""].count == 12 and abs(totals[""].sum - 0.61) < 1e-9
    points = scrape.histogram_totals(
        AFTER, "scheduler_framework_extension_point_duration_seconds", "extension_point")
    assert set(points) == {"Filter", "Score"} and points["Score"].count == 11
    assert scrape.histogram_totals(AFTER, "no_such_histogram") == {}


def test_window_means_are_deltas_over_the_window() -> None:
    means = scrape.window_means_ms(BEFORE, AFTER, "kube-scheduler")
    # algorithm: (0.022 - 0.002) s over 10 observations = 2 ms
    assert means["algorithm_ms"] == 2.0 and means["algorithm_observations"] == 10
    # attempt: (0.61 - 0.01) s over 11 observations
    assert means["attempt_ms"] == round(600 / 11, 3) and means["attempt_observations"] == 11
    # extension points absent before: all of their sum, per attempt in the window
    assert means["ext:Filter_ms"] == round(12 / 11, 3)
    assert means["ext:Score_ms"] == round(24 / 11, 3)


def test_policyd_names() -> None:
    text = ("# TYPE scheduler_scheduling_algorithm_duration_seconds histogram\n"
            'scheduler_scheduling_algorithm_duration_seconds_sum{profile="p"} 0.003\n'
            'scheduler_scheduling_algorithm_duration_seconds_count{profile="p"} 3\n')
    means = scrape.window_means_ms("", text, "policyd")
    assert means["algorithm_ms"] == 1.0 and means["attempt_observations"] == 0
    assert "attempt_ms" not in means  # no observation: no mean, never a 0
    assert "ext:Filter_ms" not in means


def test_unknown_scheduler_has_no_metrics() -> None:
    assert scrape.window_means_ms(BEFORE, AFTER, "null") == {}
