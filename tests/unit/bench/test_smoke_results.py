"""The committed smoke run of the audited protocol (bench/results/e2e-smoke-500n.json, a
small real run on the local control plane): every mode of the protocol left its mark,
and the placement quality check tells the schedulers from round-robin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.e2e import report

SMOKE = Path(__file__).resolve().parents[3] / "bench" / "results" / "e2e-smoke-500n.json"


def _runs() -> list[dict[str, Any]]:
    return list(json.loads(SMOKE.read_text())["runs"])


def test_round_robin_fails_the_quality_check_where_both_schedulers_pass() -> None:
    mixed = [r for r in _runs() if r["spec"]["workload"] == "MixedShapes"]
    for run in mixed:
        held = run["quality"]["held"]
        if run["spec"]["scheduler"] in ("null", "null-events"):
            assert not held and run["quality"]["did_not_fit"] > 0
        else:
            assert held and not run["failed"], run["quality"]


def test_pinned_runs_ran_where_they_were_put() -> None:
    pinned = [r for r in _runs() if r["spec"]["pinned"]]
    assert pinned
    for run in pinned:
        assert run["figures"]["scheduler_cpus"] == [0]
        assert run["figures"]["apiserver_cpus"] == [1]


def test_the_window_waits_for_the_events_of_every_scheduler_that_posts_them() -> None:
    for run in _runs():
        f = run["figures"]
        if run["spec"]["scheduler"] == "null":
            assert f["scheduled_events_seen"] is None
            assert f["window_s"] == f["window_to_last_bind_s"]
        else:
            assert f["scheduled_events_seen"] == run["spec"]["pods"]
            assert f["window_s"] >= f["window_to_last_bind_s"]
        assert f["start_to_done_s"] > f["window_s"]


def test_every_table_renders_from_it() -> None:
    text = report.markdown(json.loads(SMOKE.read_text()))
    for heading in ("Capacity", "Windows", "Placement quality", "CPU over the window"):
        assert heading in text
    assert "predate" not in text
