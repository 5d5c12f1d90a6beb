"""deploy/monitoring's alerts, live: the real Prometheus (the pinned build) scrapes a
running `policyd run` (its plain HTTP /metrics) and evaluates the PrometheusRule's
groups every second. While the daemon schedules normally no alert is pending or
firing; once a broken policy file lands in the daemon's policy directory, the reload
is rejected and PolicydPolicyReloadRejected fires with its labels.

The rules are loaded exactly as deploy/ ships them (`spec.groups`, nothing rewritten):
the reload alert has no `for:` (a rejected change is worth telling at once, and the
previous configuration keeps running, so nothing flaps), and the healthy-state check
asks for no alert at all, pending included, so the other rules' `for:` durations
(minutes) need no shortening for it to mean something. promtool's unit tests of each
rule are tests/integration/test_monitoring.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from policyd.devcluster.assets import PROMETHEUS
from policyd.devcluster.build import resolve_tool
from policyd.devcluster.ports import free_ports
from tests.e2e.helpers import Cluster, ProcessFactory, scrape, scrape_when, write_profile
from tests.polling import wait_for
from tests.prometheus_server import Prometheus, rules_file

REPO = Path(__file__).resolve().parents[2]
RULE = REPO / "deploy" / "monitoring" / "prometheusrule.yaml"
JOB = "policyd"
# Evaluation rounds (1 s each) the healthy state is watched for once every rule has
# been evaluated on the daemon's series: a rule without `for:` fires at its first
# evaluation, one with `for:` would at least be pending.
QUIET_ROUNDS = 5


@pytest.fixture
def prometheus_for() -> Iterator[list[Prometheus]]:
    """Prometheus servers stopped at teardown (started after the daemon, which the
    `processes` fixture stops)."""
    started: list[Prometheus] = []
    yield started
    for server in started:
        server.stop()


def _alerts(prometheus: Prometheus) -> list[dict[str, Any]]:
    return list(prometheus.api("/api/v1/alerts")["alerts"])


def _rules(prometheus: Prometheus) -> list[dict[str, Any]]:
    return [r for g in prometheus.api("/api/v1/rules")["groups"] for r in g["rules"]]


def _value(prometheus: Prometheus, query: str) -> float | None:
    result = prometheus.api("/api/v1/query", query=query)["result"]
    return float(result[0]["value"][1]) if result else None


def _evaluations(prometheus: Prometheus) -> dict[str, str]:
    return {r["name"]: r.get("lastEvaluation", "") for r in _rules(prometheus)}


def test_reload_alert_fires_on_a_broken_policy_and_nothing_fires_while_healthy(
        cluster: Cluster, processes: ProcessFactory, policy_dir: Path,
        prometheus_for: list[Prometheus], tmp_path: Path) -> None:
    scheduler = f"alerts-{uuid.uuid4().hex[:6]}"
    (port,) = free_ports(1)
    proc = processes.start("--config", str(write_profile(tmp_path, scheduler)),
                           "--metrics-bind-address", f"127.0.0.1:{port}",
                           "--reload-interval", "0.2")
    wait_for(lambda: scrape(port)[0] == 200, 30, "policyd's /metrics served")
    workdir = tmp_path / "prometheus"
    workdir.mkdir()
    prometheus = Prometheus(str(resolve_tool(PROMETHEUS)), workdir, port, job=JOB,
                            rule_files=[rules_file(RULE, workdir / "rules.yaml")])
    prometheus_for.append(prometheus)
    prometheus.start()

    # Healthy: the daemon binds a pod, Prometheus has its series, every rule evaluates
    # cleanly on them, and no alert is pending or firing.
    cluster.node("alert-node")
    cluster.pod("fits", scheduler)
    cluster.wait_bound("fits", timeout=30)
    scrape_when(port, "scheduler_schedule_attempts_total", 1, result="scheduled")
    wait_for(lambda: _value(prometheus, f'up{{job="{JOB}"}}') == 1.0, 30, "target up")
    wait_for(lambda: (_value(prometheus, 'sum(scheduler_schedule_attempts_total'
                                         '{result="scheduled"})') or 0) >= 1, 30,
             "the bind scraped")
    assert _value(prometheus, f'policyd_config_reloads_total{{job="{JOB}",'
                              'result="rejected"}') == 0.0
    rules = _rules(prometheus)
    assert {r["name"] for r in rules} >= {"PolicydPolicyReloadRejected",
                                          "SchedulerSchedulingErrors", "PolicydBindErrors"}
    for _ in range(QUIET_ROUNDS):
        before = _evaluations(prometheus)
        wait_for(lambda b=before: all(  # type: ignore[misc]
            v != b[k] for k, v in _evaluations(prometheus).items()), 10,
            "another evaluation of every rule")
        assert _alerts(prometheus) == []
    for rule in _rules(prometheus):
        assert (rule["health"], rule.get("lastError", "")) == ("ok", ""), rule

    # A broken policy file: the daemon rejects the reload (and keeps scheduling with
    # the previous policies); the alert fires within a few evaluations.
    (policy_dir / "broken.yaml").write_text(
        "apiVersion: policyd.io/v1alpha1\nkind: SchedulingPolicy\n"
        "metadata: {name: broken}\nspec: {pluginName: Broken, filters: 7}\n")
    scrape_when(port, "policyd_config_reloads_total", 1, result="rejected")
    firing = wait_for(lambda: [a for a in _alerts(prometheus) if a["state"] == "firing"],
                      30, "an alert firing")
    assert [a["labels"] for a in firing] == [{
        "alertname": "PolicydPolicyReloadRejected", "job": JOB, "severity": "warning"}]
    assert firing[0]["annotations"]["summary"] == (
        f"{JOB}: a profile or policy change was rejected; the previous one still runs")
    # Nothing else is pending or firing because of it.
    assert [a["labels"]["alertname"] for a in _alerts(prometheus)] == [
        "PolicydPolicyReloadRejected"]
    cluster.pod("still-fits", scheduler)
    cluster.wait_bound("still-fits", timeout=30)
    assert proc.poll() is None
