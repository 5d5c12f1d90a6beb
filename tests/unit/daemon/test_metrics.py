"""Per-plugin evaluation time reaches /metrics for every plugin that ran."""

from __future__ import annotations

from policyd.config.plugins import default_framework
from policyd.daemon.metrics import Metrics, instrument
from policyd.engine.cycle import schedule_one
from policyd.model.cluster import ClusterState
from tests.builders import make_node, make_pod


def _count(metrics: Metrics, plugin: str, point: str) -> float:
    value = metrics.registry.get_sample_value(
        "policyd_plugin_execution_duration_seconds_count",
        {"plugin": plugin, "extension_point": point, "profile": "policyd"})
    return value or 0.0


def test_each_plugin_call_is_timed_under_its_extension_point() -> None:
    metrics = Metrics()
    fw = default_framework()
    instrument(fw, metrics)
    cluster = ClusterState([make_node(f"n{i}").obj() for i in range(3)])
    for i in range(2):
        assert schedule_one(fw, make_pod(f"p{i}").req(cpu="100m").obj(), cluster).node
    assert _count(metrics, "NodeResourcesFit", "PreFilter") == 2
    assert _count(metrics, "NodeResourcesFit", "Filter") == 2
    assert _count(metrics, "TaintToleration", "Score") == 2
    # Skipped plugins do not run, so they are not timed.
    assert _count(metrics, "InterPodAffinity", "Filter") == 0
