"""The e2e benchmark's run plan: repeats interleaved scheduler by scheduler, the cells
of each mode, and the workload caps."""

from __future__ import annotations

import pytest

from bench.e2e_bench import parse_args, plan


def _plan(*argv: str) -> list[tuple[object, ...]]:
    return [(s.mode, s.workload, s.scheduler, s.nodes, s.init_pods, s.pods, s.rate, s.repeat)
            for s in plan(parse_args(list(argv)))]


def test_repeats_are_interleaved() -> None:
    runs = _plan("--nodes", "100", "--pods", "50", "--repeats", "2")
    assert [(r[2], r[7]) for r in runs] == [
        ("kube-scheduler", 0), ("policyd", 0), ("null", 0), ("null-events", 0),
        ("kube-scheduler", 1), ("policyd", 1), ("null", 1), ("null-events", 1)]
    assert {r[4] for r in runs} == {20}  # init pods: nodes / 5


def test_five_repeats_by_default() -> None:
    runs = _plan("--schedulers", "policyd")
    assert [r[7] for r in runs] == [0, 1, 2, 3, 4]


def test_contention_profiling_is_only_an_explicit_comparison_row() -> None:
    runs = _plan("--repeats", "1", "--schedulers", "kube-scheduler,policyd",
                 "--contention-profiling-row")
    assert [r[2] for r in runs] == ["kube-scheduler", "policyd",
                                    "kube-scheduler-contention-profiling"]
    specs = plan(parse_args(["--repeats", "1"]))
    assert "kube-scheduler-contention-profiling" not in {s.scheduler for s in specs}


def test_pinned_cells_follow_the_shared_ones() -> None:
    specs = plan(parse_args(["--repeats", "2", "--schedulers", "kube-scheduler,policyd",
                             "--cores", "shared,pinned"]))
    assert [(s.pinned, s.repeat, s.scheduler) for s in specs] == [
        (False, 0, "kube-scheduler"), (False, 0, "policyd"),
        (False, 1, "kube-scheduler"), (False, 1, "policyd"),
        (True, 0, "kube-scheduler"), (True, 0, "policyd"),
        (True, 1, "kube-scheduler"), (True, 1, "policyd")]
    with pytest.raises(SystemExit):
        parse_args(["--cores", "quiet"])


def test_mixed_shapes_is_a_workload() -> None:
    runs = _plan("--repeats", "1", "--workloads", "MixedShapes", "--schedulers", "policyd")
    assert [r[1] for r in runs] == ["MixedShapes"]


def test_pod_anti_affinity_is_capped_at_one_pod_per_free_node() -> None:
    runs = _plan("--nodes", "5000", "--pods", "10000", "--repeats", "1",
                 "--workloads", "PodAntiAffinity", "--schedulers", "policyd")
    assert runs == [("capacity", "PodAntiAffinity", "policyd", 5000, 1000, 4000, None, 0)]


def test_dynamic_resources_is_capped_at_one_pod_per_device() -> None:
    runs = _plan("--nodes", "1000", "--pods", "10000", "--repeats", "1",
                 "--workloads", "DynamicResources", "--schedulers", "policyd")
    assert runs == [("capacity", "DynamicResources", "policyd", 1000, 200, 8000, None, 0)]
    runs = _plan("--nodes", "5000", "--pods", "10000", "--repeats", "1",
                 "--workloads", "DynamicResources", "--schedulers", "policyd")
    assert runs == [("capacity", "DynamicResources", "policyd", 5000, 1000, 10000, None, 0)]


def test_rate_cells_hold_each_rate_for_the_given_seconds() -> None:
    runs = _plan("--mode", "rate", "--rates", "50,200", "--rate-seconds", "30",
                 "--repeats", "1", "--schedulers", "policyd")
    assert [(r[0], r[5], r[6]) for r in runs] == [("rate", 1500, 50.0), ("rate", 6000, 200.0)]


def test_sync15k_is_capacity_at_15000_nodes_with_3000_init_pods() -> None:
    runs = _plan("--mode", "sync15k", "--repeats", "1", "--schedulers", "policyd",
                 "--init-pods", "7")
    assert runs == [("capacity", "SchedulingBasic", "policyd", 15000, 3000, 10000, None, 0)]


def test_all_modes_and_bad_names() -> None:
    modes = {r[0] for r in _plan("--mode", "all", "--repeats", "1")}
    assert modes == {"capacity", "rate"}
    assert {r[3] for r in _plan("--mode", "all", "--repeats", "1")} == {5000, 15000}
    for bad in (["--mode", "fast"], ["--workloads", "Nope"], ["--schedulers", "x"],
                ["--repeats", "0"]):
        with pytest.raises(SystemExit):
            parse_args(bad)
