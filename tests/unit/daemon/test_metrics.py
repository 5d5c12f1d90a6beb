"""Per-plugin evaluation time reaches /metrics for every plugin that ran, in the sampled
share of cycles (kube-scheduler's pluginMetricsSamplePercent)."""

from __future__ import annotations

import random

from policyd.config.plugins import default_framework
from policyd.daemon.metrics import PLUGIN_METRICS_SAMPLE, Metrics, instrument
from policyd.engine.cycle import schedule_one
from policyd.model.cluster import ClusterState
from tests.builders import make_node, make_pod


def _count(metrics: Metrics, plugin: str, point: str) -> float:
    value = metrics.registry.get_sample_value(
        "scheduler_plugin_execution_duration_seconds_count",
        {"plugin": plugin, "extension_point": point, "status": "Success"})
    return value or 0.0


def test_each_plugin_call_is_timed_under_its_extension_point() -> None:
    metrics = Metrics()
    fw = default_framework()
    instrument(fw, metrics, plugin_sample=1.0)
    cluster = ClusterState([make_node(f"n{i}").obj() for i in range(3)])
    for i in range(2):
        assert schedule_one(fw, make_pod(f"p{i}").req(cpu="100m").obj(), cluster).node
    assert _count(metrics, "NodeResourcesFit", "PreFilter") == 2
    assert _count(metrics, "NodeResourcesFit", "Filter") == 2
    assert _count(metrics, "TaintToleration", "Score") == 2
    # Skipped plugins do not run, so they are not timed.
    assert _count(metrics, "InterPodAffinity", "Filter") == 0


def _extension_point_count(metrics: Metrics, point: str) -> float:
    value = metrics.registry.get_sample_value(
        "scheduler_framework_extension_point_duration_seconds_count",
        {"extension_point": point, "status": "Success", "profile": "policyd"})
    return value or 0.0


def test_plugins_are_timed_in_a_sample_of_cycles_extension_points_in_all() -> None:
    assert PLUGIN_METRICS_SAMPLE == 0.1  # upstream's pluginMetricsSamplePercent
    metrics = Metrics()
    fw = default_framework()
    instrument(fw, metrics, rng=random.Random(7))
    cluster = ClusterState([make_node(f"n{i}").obj() for i in range(3)])
    cycles = 400
    for i in range(cycles):
        assert schedule_one(fw, make_pod(f"p{i}").req(cpu="1m").obj(), cluster).node
    assert _extension_point_count(metrics, "PreFilter") == cycles
    assert _extension_point_count(metrics, "Score") == cycles
    sampled = _count(metrics, "NodeResourcesFit", "PreFilter")
    # Each cycle's plugins are timed together, or not at all.
    assert _count(metrics, "NodeResourcesFit", "Filter") == sampled
    assert _count(metrics, "TaintToleration", "Score") == sampled
    assert 0.05 * cycles < sampled < 0.15 * cycles


def test_no_plugin_is_timed_when_sampling_is_off() -> None:
    metrics = Metrics()
    fw = default_framework()
    instrument(fw, metrics, plugin_sample=0.0)
    cluster = ClusterState([make_node("n0").obj()])
    assert schedule_one(fw, make_pod("p").req(cpu="1m").obj(), cluster).node
    assert _extension_point_count(metrics, "Filter") == 1
    assert _count(metrics, "NodeResourcesFit", "Filter") == 0


def _evaluations(metrics: Metrics, plugin: str, point: str) -> float:
    value = metrics.registry.get_sample_value(
        "scheduler_plugin_evaluation_total",
        {"plugin": plugin, "extension_point": point, "profile": "policyd"})
    return value or 0.0


def test_plugin_evaluations_count_the_plugins_that_did_not_skip_once_per_cycle() -> None:
    metrics = Metrics()
    fw = default_framework()
    instrument(fw, metrics, plugin_sample=0.0)
    cluster = ClusterState([make_node(f"n{i}").obj() for i in range(3)])
    for i in range(2):
        assert schedule_one(fw, make_pod(f"p{i}").req(cpu="100m").obj(), cluster).node
    assert _evaluations(metrics, "NodeResourcesFit", "PreFilter") == 2
    assert _evaluations(metrics, "NodeResourcesFit", "Filter") == 2
    assert _evaluations(metrics, "TaintToleration", "Score") == 2
    # NodeAffinity's PreFilter skips a pod with no affinity: neither point counts it.
    assert _evaluations(metrics, "NodeAffinity", "PreFilter") == 0
    assert _evaluations(metrics, "NodeAffinity", "Filter") == 0


def test_an_extension_point_is_labelled_with_the_status_it_ended_with() -> None:
    metrics = Metrics()
    fw = default_framework()
    instrument(fw, metrics, plugin_sample=0.0)
    cluster = ClusterState([make_node("n0").obj()])
    assert schedule_one(fw, make_pod("big").req(cpu="9999").obj(), cluster).node is None
    value = metrics.registry.get_sample_value(
        "scheduler_framework_extension_point_duration_seconds_count",
        {"extension_point": "PostFilter", "status": "Unschedulable", "profile": "policyd"})
    assert value == 1


def test_buckets_are_kube_schedulers() -> None:
    """A few of pkg/scheduler/metrics' ExponentialBuckets, as `le` values."""
    metrics = Metrics()
    metrics.sli_duration.labels("1").observe(0.5)
    metrics.plugin_latency.labels("P", "Filter", "Success").observe(0.001)
    text = metrics.render().decode()
    sli = [line for line in text.splitlines()
           if line.startswith("scheduler_pod_scheduling_sli_duration_seconds_bucket")]
    assert len(sli) == 21 and 'le="0.01"' in sli[0] and 'le="+Inf"' in sli[-1]
    plugin = [line for line in text.splitlines()
              if line.startswith("scheduler_plugin_execution_duration_seconds_bucket")]
    assert len(plugin) == 21 and 'le="1e-05"' in plugin[0]


def test_bucket_bounds_are_multiplied_in_turn_as_go_does() -> None:
    """kube-scheduler v1.36 serves these `le` values for its plugin histogram (read off
    its /metrics in tests/e2e/test_metric_names.py); `1e-05 * 1.5**i` rounds 9 of them
    differently, and a different `le` is a different series to a dashboard."""
    served_by_kube_scheduler = [
        1e-05, 1.5000000000000002e-05, 2.2500000000000005e-05, 3.375000000000001e-05,
        5.062500000000001e-05, 7.593750000000002e-05, 0.00011390625000000003,
        0.00017085937500000006, 0.0002562890625000001, 0.00038443359375000017,
        0.0005766503906250003, 0.0008649755859375004, 0.0012974633789062506,
        0.0019461950683593758, 0.0029192926025390638, 0.004378938903808595,
        0.006568408355712893, 0.009852612533569338, 0.014778918800354007,
        0.02216837820053101]
    metrics = Metrics()
    metrics.plugin_latency.labels("P", "Filter", "Success").observe(0.001)
    bounds = [float(line.split('le="')[1].split('"')[0])
              for line in metrics.render().decode().splitlines()
              if line.startswith("scheduler_plugin_execution_duration_seconds_bucket")]
    assert bounds[:-1] == served_by_kube_scheduler and bounds[-1] == float("inf")
