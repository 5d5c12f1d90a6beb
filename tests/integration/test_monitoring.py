"""deploy/monitoring: the PrometheusRule's groups pass the pinned `promtool check rules`,
each alert fires in `promtool test rules` on series made for it (and not on a quiet
series), and every metric the Grafana dashboard queries is one policyd serves."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]

from policyd.daemon.metrics import Metrics
from policyd.devcluster.assets import PROMTOOL
from policyd.devcluster.build import resolve_tool
from tests.prometheus_server import rules_file as write_rules_file

REPO = Path(__file__).resolve().parents[2]
MONITORING = REPO / "deploy" / "monitoring"
ALERTS = {"SchedulerPendingPodsGrowing", "SchedulerSchedulingErrors", "PolicydBindErrors",
          "PolicydWatchErrors", "SchedulerLeaderChanges", "PolicydPolicyReloadRejected"}


@pytest.fixture(scope="module")
def rules_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """spec.groups of the PrometheusRule, as the plain rules file promtool reads."""
    return write_rules_file(MONITORING / "prometheusrule.yaml",
                            tmp_path_factory.mktemp("rules") / "rules.yaml")


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(resolve_tool(PROMTOOL)), *args], capture_output=True, text=True,
                          timeout=120, check=False)


def test_promtool_accepts_the_rules_and_they_name_every_alert(rules_file: Path) -> None:
    done = _promtool("check", "rules", str(rules_file))
    assert done.returncode == 0, done.stdout + done.stderr
    groups = yaml.safe_load(rules_file.read_text())["groups"]
    assert {r["alert"] for g in groups for r in g["rules"]} == ALERTS


# Per alert: input series and what fires at the time evaluated. Counters rise by the
# step given; each alert also has a quiet twin that must not fire.
UNIT_TESTS = """
rule_files: [{rules}]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'scheduler_pending_pods{{job="s",queue="unschedulable"}}'
        values: '0+1x40'
      - series: 'scheduler_pending_pods{{job="quiet",queue="unschedulable"}}'
        values: '5x40'
      - series: 'scheduler_pending_pods{{job="gated",queue="gated"}}'
        values: '0+1x40'
      - series: 'scheduler_schedule_attempts_total{{job="s",profile="p",result="error"}}'
        values: '0+1x30'
      - series: 'scheduler_schedule_attempts_total{{job="s",profile="p",result="scheduled"}}'
        values: '0+9x30'
      - series: 'policyd_bind_errors_total{{job="s",reason="500"}}'
        values: '0+1x30'
      - series: 'policyd_watch_errors_total{{job="s",resource="pods"}}'
        values: '0+1x30'
      - series: 'policyd_watch_errors_total{{job="s",resource="nodes"}}'
        values: '0x30'
      - series: 'leader_election_master_status{{job="s",name="policyd",instance="a"}}'
        values: '1 0 1 0 1 0 1 0 1 0'
      - series: 'policyd_config_reloads_total{{job="s",result="rejected"}}'
        values: '0 0 0 1 1 1'
      - series: 'policyd_config_reloads_total{{job="s",result="applied"}}'
        values: '0 1 2 3 4 5'
    alert_rule_test:
      - eval_time: 35m
        alertname: SchedulerPendingPodsGrowing
        exp_alerts:
          - exp_labels: {{job: s, severity: warning}}
      - eval_time: 20m
        alertname: SchedulerSchedulingErrors
        exp_alerts:
          - exp_labels: {{job: s, profile: p, severity: warning}}
      - eval_time: 20m
        alertname: PolicydBindErrors
        exp_alerts:
          - exp_labels: {{job: s, reason: "500", severity: warning}}
      - eval_time: 20m
        alertname: PolicydWatchErrors
        exp_alerts:
          - exp_labels: {{job: s, resource: pods, severity: warning}}
      - eval_time: 9m
        alertname: SchedulerLeaderChanges
        exp_alerts:
          - exp_labels: {{job: s, name: policyd, severity: warning}}
      - eval_time: 5m
        alertname: PolicydPolicyReloadRejected
        exp_alerts:
          - exp_labels: {{job: s, severity: warning}}
      - eval_time: 2m
        alertname: PolicydPolicyReloadRejected
        exp_alerts: []
"""


def _without_annotations(rules_file: Path, tmp_path: Path) -> Path:
    """The rules with their annotations dropped: promtool compares annotations too, and
    what fires (alert, labels, time) is what these tests are about."""
    groups = yaml.safe_load(rules_file.read_text())["groups"]
    for group in groups:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    path = tmp_path / "bare-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": groups}))
    return path


def test_each_alert_fires_on_its_series_in_promtool_test_rules(rules_file: Path,
                                                                tmp_path: Path) -> None:
    tests = tmp_path / "tests.yaml"
    bare = _without_annotations(rules_file, tmp_path)
    tests.write_text(UNIT_TESTS.format(rules=json.dumps(str(bare))))
    done = _promtool("test", "rules", str(tests))
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_test_rules_fails_when_an_alert_does_not_fire(rules_file: Path,
                                                               tmp_path: Path) -> None:
    """The harness can fail: an alert expected where its series stay quiet."""
    tests = tmp_path / "tests.yaml"
    bare = _without_annotations(rules_file, tmp_path)
    tests.write_text(UNIT_TESTS.format(rules=json.dumps(str(bare))).replace(
        "      - eval_time: 2m\n        alertname: PolicydPolicyReloadRejected\n"
        "        exp_alerts: []",
        "      - eval_time: 2m\n        alertname: PolicydPolicyReloadRejected\n"
        "        exp_alerts:\n          - exp_labels: {job: s, severity: warning}"))
    assert _promtool("test", "rules", str(tests)).returncode != 0


_NAME = re.compile(r"\b((?:scheduler|policyd|leader_election|kube_pod)_[a-z_]+)")
_SUFFIXES = ("_bucket", "_count", "_sum")


def _served() -> set[str]:
    return {sample.name for family in Metrics().registry.collect()
            for sample in family.samples} | {
        family.name + ("_total" if family.type == "counter" else "")
        for family in Metrics().registry.collect()}


def _exprs(dashboard: dict[str, object]) -> list[str]:
    out = []
    for panel in dashboard["panels"]:  # type: ignore[attr-defined]
        out += [t["expr"] for t in panel["targets"]]
    return out


def test_every_metric_the_dashboard_reads_is_served() -> None:
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    served = _served()
    used = {m for e in _exprs(dashboard) for m in _NAME.findall(e)}
    assert len(used) > 15
    unknown = {m for m in used
               if m not in served and not (m.endswith(_SUFFIXES)
                                           and m.rsplit("_", 1)[0] in served)}
    assert not unknown, sorted(unknown)
    # Both kinds of panel: kube-scheduler's names (shared) and policyd's own.
    assert any(m.startswith("scheduler_") for m in used)
    assert any(m.startswith("policyd_") for m in used)
