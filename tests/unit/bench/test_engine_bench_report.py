"""The engine benchmark's markdown table, built from its JSON rows."""

from __future__ import annotations

from bench.engine.report import COLUMNS, markdown

ROW = {"workload": "Mixed", "nodes": 5000, "pods": 2000, "placed": 1999, "churnPeriod": 10.0,
       "nodeUpdates": 812, "gcFreeze": False, "podsPerSecond": 250.5,
       "podsPerCpuSecond": 260.1, "p50ms": 3.1, "p99ms": 9.2, "peakRssMB": 140.0}
# A row from before churn and the freeze switch (bench/results/engine-latest.json).
OLD = {"workload": "SchedulingBasic", "nodes": 500, "pods": 10000, "placed": 10000,
       "podsPerSecond": 5164.7, "podsPerCpuSecond": 5173.0, "p50ms": 0.184, "p99ms": 0.287,
       "peakRssMB": 86.0}


def test_one_line_per_row_under_the_header() -> None:
    lines = markdown([ROW, OLD]).splitlines()
    assert lines[0] == "| " + " | ".join(COLUMNS) + " |"
    assert lines[1].count("|") == len(COLUMNS) + 1
    assert lines[2] == ("| Mixed | 5000 | 2000 | 1999 | every 10 s (812 updates) | off | "
                        "250.5 | 260.1 | 3.1 | 9.2 | 140.0 |")
    assert lines[3] == ("| SchedulingBasic | 500 | 10000 | 10000 | off | on | 5164.7 | "
                        "5173.0 | 0.184 | 0.287 | 86.0 |")
    assert len(lines) == 4
