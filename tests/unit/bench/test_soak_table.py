"""The soak's figures in docs/performance.md (`bench.soak.markdown`), from a result JSON."""

from __future__ import annotations

import copy
from typing import Any

from bench.soak import failed_binds, markdown

HELD = {"held": True, "detail": "", "problems": [], "problem_count": 0}
DOC: dict[str, Any] = {
    "config": {"pods": 300, "nodes": 12, "rate": 6.0, "seed": 13, "freeze_seconds": 4.0,
               "stale_seconds": 20.0},
    "pods": 300, "fitting": 294, "bound": 294, "unschedulable": 6, "wall_s": 81.5,
    "bind_latency_s": {"p50": 0.02, "p99": 3.5, "max": 4.25},
    "faults": {"cut": 1, "leader_kill": 2, "compaction": 1, "apiserver_restart": 1,
               "freeze": 1, "stale_takeover": 1, "new_kind": 4,
               "injected_by_proxies": {"bind:500": 3, "other:timeout": 2, "bind:timeout": 1},
               "log": ["12:00:00 every proxied connection reset"]},
    "invariants": {"every_fitting_pod_bound": HELD,
                   "unfitting_pods_marked_unschedulable": HELD},
    "machine": "x86_64, 2 CPUs, Python 3.11.7, Kubernetes v1.36.3",
}


def test_the_figures_and_every_fault() -> None:
    assert markdown(DOC).splitlines() == [
        "Measured on x86_64, 2 CPUs, Python 3.11.7, Kubernetes v1.36.3: 300 pods created "
        "at 6/s on 12 nodes, seed 13.",
        "",
        "| pods | fit / bound | fit nowhere / marked unschedulable | wall s | failed binds | "
        "bind latency p50 / p99 / max s | invariants |",
        "|---:|---:|---:|---:|---:|---:|---|",
        "| 300 | 294 / 294 | 6 / 6 | 81.5 | 4 | 0.02 / 3.5 / 4.25 | 2 of 2 held |",
        "",
        "| fault | count |",
        "|---|---:|",
        "| kube-apiserver killed (SIGKILL) and restarted | 1 |",
        "| of which after an etcd compaction (watches get 410 Gone) | 1 |",
        "| lease holder killed (kill -9) | 2 |",
        "| of which a stale takeover (the standby's open connections silent for 20 s) | 1 |",
        "| every proxied connection reset | 1 |",
        "| every proxied connection frozen for 4 s | 1 |",
        "| new_kind | 4 |",
        "| binding create: answered 500 | 3 |",
        "| binding create: reply swallowed | 1 |",
        "| other request: reply swallowed | 2 |",
    ]


def test_failed_binds_count_only_binding_creates() -> None:
    assert failed_binds(DOC) == 4


def test_a_broken_invariant_is_named_and_lowers_the_marked_count() -> None:
    doc = copy.deepcopy(DOC)
    doc["invariants"]["unfitting_pods_marked_unschedulable"] = {
        "held": False, "detail": "", "problems": ["a", "b"], "problem_count": 2}
    row = markdown(doc).splitlines()[4]
    assert row == ("| 300 | 294 / 294 | 6 / 4 | 81.5 | 4 | 0.02 / 3.5 / 4.25 | 1 of 2 held "
                   "(FAILED: unfitting_pods_marked_unschedulable) |")


def test_a_run_without_binds_shows_dashes_for_latency() -> None:
    doc = copy.deepcopy(DOC)
    doc["bind_latency_s"] = {}
    assert "| 4 | – / – / – | 2 of 2 held |" in markdown(doc).splitlines()[4]
