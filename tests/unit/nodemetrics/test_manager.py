"""MetricsManager (start, keep, replace, stop providers; drop removed metrics), the
--metrics file loader, attaching readers to frameworks, and the daemon's debug pages."""

from __future__ import annotations

import json
import time
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from policyd.nodemetrics import (
    MetricsFileError,
    StaticMetrics,
    attach_metrics,
    load_metrics_file,
)
from policyd.nodemetrics.manager import MetricsManager
from tests.builders import make_node
from tests.unit.nodemetrics.helpers import provider_config


def test_apply_starts_keeps_replaces_and_stops() -> None:
    nodes = [make_node("a").annotation("example.com/load", "3").obj()]
    m = MetricsManager(lambda: nodes, registry=CollectorRegistry())
    ann = provider_config("nodeAnnotation", name="ann", refresh_interval=60.0)
    other = provider_config("nodeAnnotation", name="other", metric="other",
                            refresh_interval=60.0)
    try:
        m.apply([ann, other])
        first = m.providers["ann"]
        assert set(m.providers) == {"ann", "other"}
        deadline = time.monotonic() + 5
        while m.providers["other"].state != "ok" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert m.telemetry.registry.get_sample_value(
            "policyd_node_metrics_values", {"provider": "other", "metric": "other"}) == 1
        m.apply([ann, other])
        assert m.providers["ann"] is first  # unchanged settings: same provider
        m.apply([replace(ann, max_age=99.0)])
        assert m.providers["ann"] is not first and set(m.providers) == {"ann"}
        assert first._thread is not None and not first._thread.is_alive()
        assert "other" not in m.cache.metrics()
        samples = {(s.name, tuple(sorted(s.labels.items())))
                   for metric in m.telemetry.registry.collect() for s in metric.samples}
        assert not any(("provider", "other") in labels for _, labels in samples)
        view = m.debug_view()
        assert view["providers"]["ann"]["kind"] == "nodeAnnotation"
    finally:
        m.stop()
    assert m.providers == {}


def test_metrics_file(tmp_path: Path) -> None:
    f = tmp_path / "m.yaml"
    f.write_text("latency_ms:\n  a: 5\n  b: 12.5\nload: {a: -1}\n")
    static = load_metrics_file(f)
    lat = static.snapshot("latency_ms")
    assert lat is not None and lat.fresh(static.now()) == {"a": 5.0, "b": 12.5}
    j = tmp_path / "m.json"
    j.write_text(json.dumps({"latency_ms": {"a": 1}}))
    assert load_metrics_file(j).values == {"latency_ms": {"a": 1.0}}


@pytest.mark.parametrize(("text", "fragment"), [
    ("latency_ms:\n  a: .nan\n", "m.yaml:2:6: value of latency_ms/a is not a finite"),
    ("latency_ms:\n  a: fast\n", "not a finite number (not_a_number)"),
    ("latency_ms: 5\n", "must map node names to numbers"),
    ("- 1\n", "expected a mapping"),
    ("a: [\n", "m.yaml:"),
    ("latency_ms:\n  a: " + "9" * 400 + "\n",
     "m.yaml:2:6: value of latency_ms/a is not a finite number (infinite): a very long integer"),
    ("latency_ms:\n  a: -" + "9" * 400 + "\n", "not a finite number (infinite)"),
    ('{"latency_ms": {"a": 1e400}}', "not a finite number (infinite): .inf"),
    ("latency_ms:\n  a: '" + "9" * 5000 + "'\n", "(infinite): '999"),
])
def test_metrics_file_errors(tmp_path: Path, text: str, fragment: str) -> None:
    f = tmp_path / "m.yaml"
    f.write_text(text)
    with pytest.raises(MetricsFileError) as exc:
        load_metrics_file(f)
    assert fragment in str(exc.value)


def test_attach_metrics_reaches_policies_in_score_plugins() -> None:
    from policyd.config.plugins import default_framework
    from tests.unit.policy.conftest import check_docs, make_policy

    result = check_docs(make_policy(scores=[{
        "id": "l", "weight": 1, "normalize": "minmax",
        "metric": {"name": "lat", "prefer": "lowest"}}]))
    [policy] = result.compiled
    fw = default_framework([policy])
    static = StaticMetrics({"lat": {"a": 1}})
    assert attach_metrics([fw], static) == 1
    assert getattr(policy.score_rules[0], "source", None) is static


def test_debug_pages_on_the_health_server() -> None:
    from policyd.daemon.metrics import HealthServer, Metrics

    def broken() -> object:
        raise RuntimeError("boom")

    server = HealthServer("127.0.0.1:0", Metrics(), lambda: True, debug={
        "/debug/metrics-cache": lambda: {"metrics": {"lat": {"nodes": {}}}},
        "/debug/broken": broken})
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        with urllib.request.urlopen(base + "/debug/metrics-cache", timeout=5) as r:
            assert r.headers["Content-Type"] == "application/json"
            assert json.loads(r.read()) == {"metrics": {"lat": {"nodes": {}}}}
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(base + "/debug/broken", timeout=5)
        assert exc.value.code == 500
    finally:
        server.stop()
