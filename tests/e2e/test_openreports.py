"""The audit kept as OpenReports by `policyd run`, on the real API server with the
openreports.io CRDs of deploy/crds/openreports.io_reports.yaml applied:

- reports appear: one Report per namespace with a result per (pod, rule): `fail` for an
  Enforce-mode policy whose filter rejects the bound pod's node, `warn` for an
  Audit-mode one, `pass` otherwise, with the node and the pod's uid;
- they follow a pod change (a violating pod deleted), a policy change (the policy file
  rewritten, hot-reloaded) and shrink to nothing when the findings go away (the Report
  deleted);
- a leader change: the follower writes nothing while the other leads; after the leader
  stops, the new leader keeps the same objects (one Report per namespace, never a
  second) up to date;
- every object stored validates against the CRD's own schema (jsonschema over its
  openAPIV3Schema), and what the API server stored is what policyd built (nothing
  pruned).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
from ruamel.yaml import YAML

from policyd.devcluster.controlplane import ControlPlane
from tests.e2e.helpers import (
    Cluster,
    DaemonFactory,
    apply_crds,
    daemons_on,
    fresh_cluster,
    write_profile,
)
from tests.polling import wait_for

REPO = Path(__file__).resolve().parents[2]
CRD_PATH = REPO / "deploy" / "crds" / "openreports.io_reports.yaml"
REPORTS = "/apis/openreports.io/v1alpha1"

ZONE_POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {{name: web-zone}}
spec:
  pluginName: WebZone
  appliesTo: {{labelSelector: {{matchLabels: {{app: web}}}}}}
  filters:
    - id: zone
      message: node(s) are not in an allowed zone
      nodeLabels:
        matchExpressions: [{{key: zone, operator: In, values: [{zone}]}}]
"""
DISK_POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: web-ssd}
spec:
  pluginName: WebSsd
  mode: Audit
  appliesTo: {labelSelector: {matchLabels: {app: web}}}
  filters:
    - id: ssd
      message: node(s) have no SSD
      nodeLabels:
        matchExpressions: [{key: disk, operator: In, values: [ssd]}]
"""


def _crds() -> list[dict[str, Any]]:
    return [d for d in YAML(typ="safe").load_all(CRD_PATH.read_text()) if d]


@pytest.fixture(scope="module")
def reports_plane() -> Iterator[ControlPlane]:
    cp = ControlPlane(controller_manager=False)
    try:
        cp.start()
        apply_crds(cp, CRD_PATH)
        yield cp
    finally:
        cp.stop()


@pytest.fixture
def cluster(reports_plane: ControlPlane) -> Iterator[Cluster]:
    with fresh_cluster(reports_plane, "reports") as c:
        yield c


@pytest.fixture
def daemons(reports_plane: ControlPlane, tmp_path: Path) -> Iterator[DaemonFactory]:
    with daemons_on(reports_plane, tmp_path) as factory:
        yield factory


def _setup(tmp_path: Path, zone: str = "a") -> tuple[str, Path, Path]:
    scheduler = f"reports-{uuid.uuid4().hex[:6]}"
    policies = tmp_path / "policies"
    policies.mkdir(exist_ok=True)
    zone_file = policies / "zone.yaml"
    zone_file.write_text(ZONE_POLICY.format(zone=zone))
    (policies / "ssd.yaml").write_text(DISK_POLICY)
    profile = write_profile(tmp_path, scheduler, policies=str(policies))
    return scheduler, profile, zone_file


def _report(c: Cluster) -> dict[str, Any] | None:
    return c.get(f"{REPORTS}/namespaces/{c.ns}/reports/policyd")


def _results(report: dict[str, Any] | None) -> set[tuple[str, str, str, str]]:
    """(pod, policy, rule, result) of every result."""
    if report is None:
        return set()
    return {(r["resources"][0]["name"], r["policy"], r["rule"], r["result"])
            for r in report.get("results") or []}


def _wait_results(c: Cluster, wanted: set[tuple[str, str, str, str]], what: str
                  ) -> dict[str, Any]:
    wait_for(lambda: _results(_report(c)) == wanted, 30, what)
    report = _report(c)
    assert report is not None
    return report


def _schema_valid(obj: dict[str, Any]) -> None:
    kind = obj["kind"]
    (crd,) = [d for d in _crds() if d["spec"]["names"]["kind"] == kind]
    jsonschema.validate(obj, crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


def test_reports_appear_follow_pods_and_policies_and_go_away(
        cluster: Cluster, daemons: DaemonFactory, tmp_path: Path) -> None:
    scheduler, profile, zone_file = _setup(tmp_path)
    daemons.start(profile, reports_interval=0.3)
    cluster.node("n-a", labels={"zone": "a", "disk": "hdd"})
    cluster.node("n-b", labels={"zone": "b", "disk": "ssd"})
    cluster.pod("ok", scheduler, labels={"app": "web"})
    assert cluster.wait_bound("ok") == "n-a"  # the only node in zone a
    # Bound by hand to a node the Enforce-mode policy rejects (as a policy change or a
    # label drift would leave it).
    cluster.pod("bad", scheduler, labels={"app": "web"}, nodeName="n-b")
    report = _wait_results(cluster, {
        ("ok", "web-zone", "zone", "pass"), ("ok", "web-ssd", "ssd", "warn"),
        ("bad", "web-zone", "zone", "fail"), ("bad", "web-ssd", "ssd", "pass"),
    }, "the namespace's report with every finding")
    assert report["summary"] == {"pass": 2, "fail": 1, "warn": 1, "error": 0, "skip": 0}
    assert report["scope"] == {"apiVersion": "v1", "kind": "Namespace", "name": cluster.ns}
    assert report["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "policyd"}
    fail = next(r for r in report["results"] if r["result"] == "fail")
    assert fail["message"] == "node(s) are not in an allowed zone"
    assert fail["properties"] == {"node": "n-b", "plugin": "WebZone", "mode": "Enforce"}
    bad = cluster.get_pod("bad")
    assert bad is not None and fail["resources"] == [{
        "apiVersion": "v1", "kind": "Pod", "namespace": cluster.ns, "name": "bad",
        "uid": bad["metadata"]["uid"]}]
    assert fail["source"] == "policyd" and fail["timestamp"]["seconds"] > 0
    _schema_valid(report)

    # A pod change: the violating pod goes, so do its results.
    cluster.delete_pod("bad")
    _wait_results(cluster, {("ok", "web-zone", "zone", "pass"),
                            ("ok", "web-ssd", "ssd", "warn")}, "the deleted pod's results gone")

    # A policy change (hot reload of the file): zone b only, so `ok` now fails.
    zone_file.write_text(ZONE_POLICY.format(zone="b"))
    _wait_results(cluster, {("ok", "web-zone", "zone", "fail"),
                            ("ok", "web-ssd", "ssd", "warn")}, "the reloaded policy's verdict")

    # No finding left in the namespace: its report goes.
    cluster.delete_pod("ok")
    wait_for(lambda: _report(cluster) is None, 30, "the empty namespace's report deleted")


def _own_reports(c: Cluster) -> list[dict[str, Any]]:
    reply = c.client.request("GET", f"{REPORTS}/namespaces/{c.ns}/reports")
    return list(reply.get("items") or [])


def test_a_leader_change_keeps_one_report_up_to_date(
        cluster: Cluster, daemons: DaemonFactory, tmp_path: Path) -> None:
    scheduler, profile, _ = _setup(tmp_path)
    first = daemons.start(profile, reports_interval=0.3)
    second = daemons.start(profile, leader=False, reports_interval=0.3)
    cluster.node("n-a", labels={"zone": "a", "disk": "ssd"})
    cluster.node("n-b", labels={"zone": "b", "disk": "ssd"})
    cluster.pod("bad-1", scheduler, labels={"app": "web"}, nodeName="n-b")
    _wait_results(cluster, {("bad-1", "web-zone", "zone", "fail"),
                            ("bad-1", "web-ssd", "ssd", "pass")}, "the leader's report")
    assert second.reports is not None and second.reports.writes == 0  # the follower
    assert first.reports is not None and first.reports.writes >= 1
    before = _report(cluster)
    assert before is not None

    first.shutdown()
    wait_for(second.ready_to_schedule, 30, "the second replica leading")
    cluster.pod("bad-2", scheduler, labels={"app": "web"}, nodeName="n-b")
    after = _wait_results(cluster, {
        ("bad-1", "web-zone", "zone", "fail"), ("bad-1", "web-ssd", "ssd", "pass"),
        ("bad-2", "web-zone", "zone", "fail"), ("bad-2", "web-ssd", "ssd", "pass"),
    }, "the new leader's update")
    # The same object, updated in place: one report in the namespace, never a second.
    assert [r["metadata"]["name"] for r in _own_reports(cluster)] == ["policyd"]
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert second.reports.writes >= 1
    _schema_valid(after)
