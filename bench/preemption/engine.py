"""Preemption in the engine alone (no API server): one unschedulable high-priority pod
through `schedule_one` on a cluster of full nodes, its PostFilter (DefaultPreemption's
dry runs) included, in both dry-run forms on the same cluster: `rerun` (PreFilter rerun
inside `ClusterState.what_if` for every check: the form before PreFilterExtensions) and
`incremental` (a cloned PreFilter state updated through AddPod/RemovePod, as
kube-scheduler). CPU is this process's (time.process_time), per preemption."""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench.preemption.shapes import FILLERS_PER_NODE, filler_body, node_body, preemptor_body
from policyd.config.plugins import default_framework
from policyd.engine.cycle import schedule_one
from policyd.framework.runtime import Framework
from policyd.model.cluster import ClusterState
from policyd.model.records import node_from_dict, pod_from_dict

FORMS = ("rerun", "incremental")


def build(nodes: int, shape: str) -> ClusterState:
    fillers = [pod_from_dict(filler_body(i, f"node-{i % nodes}", shape))
               for i in range(nodes * FILLERS_PER_NODE)]
    return ClusterState([node_from_dict(node_body(i)) for i in range(nodes)], fillers)


def framework(form: str) -> Framework:
    fw = default_framework(seed=1)
    # The rerun form is what the evaluator falls back to for a profile whose PreFilter
    # state may not follow pods; turning that off here forces it.
    fw.pre_filter_state_follows_pods = form == "incremental"
    return fw


def measure(nodes: int, shape: str, repeats: int) -> list[dict[str, Any]]:
    """Both forms on one cluster, `repeats` preemptions each, interleaved."""
    cluster = build(nodes, shape)
    cluster.table()  # the columns built outside the timed part, as the daemon does
    fws = {form: framework(form) for form in FORMS}
    cpu: dict[str, list[float]] = {form: [] for form in FORMS}
    wall: dict[str, list[float]] = {form: [] for form in FORMS}
    outcome: dict[str, set[tuple[str | None, int]]] = {form: set() for form in FORMS}
    # A first untimed cycle per form: memos every later cycle would find warm.
    for form in FORMS:
        schedule_one(fws[form], pod_from_dict(preemptor_body("warm", shape)), cluster)
    for k in range(repeats):
        for form in FORMS:
            pod = pod_from_dict(preemptor_body(f"preemptor-{k}", shape))
            c0, w0 = time.process_time(), time.perf_counter()
            result = schedule_one(fws[form], pod, cluster)
            cpu[form].append(time.process_time() - c0)
            wall[form].append(time.perf_counter() - w0)
            post = result.post_filter
            outcome[form].add((post.nominated_node if post else None,
                               len(post.victims) if post else -1))
    rows = []
    for form in FORMS:
        # Every preemption found a node and one victim: the benchmark measured what it
        # says it did.
        nominated = {n is not None and v == 1 for n, v in outcome[form]}
        rows.append({"bench": "engine", "nodes": nodes, "shape": shape, "form": form,
                     "preemptions": repeats, "every_one_nominated": nominated == {True},
                     "cpu_ms_median": round(statistics.median(cpu[form]) * 1000, 1),
                     "cpu_ms_min": round(min(cpu[form]) * 1000, 1),
                     "wall_ms_median": round(statistics.median(wall[form]) * 1000, 1)})
    return rows
