"""docs/performance.md's engine block (`bench.engine.report.readme`): the table, the gc.freeze
note for rows that froze, and the generated sentences that quote the figures."""

from __future__ import annotations

from typing import Any

from bench.engine.report import FREEZE_NOTE, markdown, readme

# Rows as bench/results/engine-latest.json holds them: written before node churn and the
# gc.freeze switch, so they carry neither key (the bench froze then).
OLD: list[dict[str, Any]] = [
    {"workload": "SchedulingBasic", "nodes": n, "pods": 100, "placed": 100,
     "podsPerSecond": pps, "podsPerCpuSecond": pps, "p50ms": p50, "p99ms": p50 * 2,
     "peakRssMB": rss}
    for n, pps, p50, rss in ((500, 5000.0, 0.2, 80.0), (5000, 1500.0, 0.6, 90.0))]
BIG_OTHER = {"workload": "TopologySpreading", "nodes": 5000, "pods": 100, "placed": 100,
             "podsPerSecond": 1400.0, "podsPerCpuSecond": 1400.5, "p50ms": 0.7,
             "p99ms": 0.9, "peakRssMB": 120.5}
NEW = {"workload": "SchedulingBasic", "nodes": 5000, "pods": 100, "placed": 100,
       "churnPeriod": 10.0, "nodeUpdates": 50, "gcFreeze": False, "podsPerSecond": 1200.0,
       "podsPerCpuSecond": 1250.0, "p50ms": 0.75, "p99ms": 1.1, "peakRssMB": 95.0}


def test_old_rows_show_freeze_on_and_get_the_note() -> None:
    lines = readme([*OLD, BIG_OTHER]).splitlines()
    assert lines[2] == "| SchedulingBasic | 500 | 100 | 100 | off | on | 5000.0 | 5000.0 | " \
                       "0.2 | 0.4 | 80.0 |"
    assert lines[6] == FREEZE_NOTE
    assert lines[8] == ("SchedulingBasic (node churn off, gc.freeze on), median time per "
                        "pod: 0.2 ms at 500 nodes, 0.6 ms at 5000 nodes. Highest peak RSS "
                        "at 5000 nodes: 120.5 MB (TopologySpreading).")
    assert len(lines) == 9


def test_new_rows_alone_have_no_freeze_note_and_one_sentence_per_setting() -> None:
    text = readme([NEW])
    assert FREEZE_NOTE not in text
    assert text.splitlines()[-1] == (
        "SchedulingBasic (node churn every 10 s, gc.freeze off), median time "
        "per pod: 0.75 ms at 5000 nodes. Highest peak RSS at 5000 nodes: 95 MB "
        "(SchedulingBasic).")


def test_old_and_new_rows_are_not_mixed_in_one_sentence() -> None:
    last = readme([*OLD, NEW]).splitlines()[-1]
    assert "gc.freeze on), median time per pod: 0.2 ms at 500 nodes, 0.6 ms at 5000 " \
           "nodes. SchedulingBasic (node churn every 10 s" in last


def test_a_results_document_names_when_and_how_it_was_measured() -> None:
    row = {"workload": "SchedulingBasic", "nodes": 500, "pods": 10, "placed": 10,
           "churnPeriod": 10, "nodeUpdates": 3, "gcFreeze": False, "podsPerSecond": 1.0,
           "podsPerCpuSecond": 1.0, "p50ms": 0.2, "p99ms": 0.3, "peakRssMB": 50.0}
    doc = {"date": "2026-12-01", "machine": "x86_64, 2 cores, Python 3.11.7",
           "command": "python -m bench.engine_bench --nodes 500", "rows": [row]}
    text = readme(doc)
    assert text.startswith("Measured 2026-12-01 on x86_64, 2 cores, Python 3.11.7: "
                           "`python -m bench.engine_bench --nodes 500`\n")
    assert text.split("\n", 2)[2].startswith(markdown([row]))
