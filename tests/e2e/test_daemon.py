"""policyd's daemon (in-process) against the real local control plane."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from policyd.daemon.queue import BACKOFF, UNSCHEDULABLE
from policyd.devcluster.controlplane import ControlPlane
from tests.e2e.helpers import Cluster, DaemonFactory, metric, scrape, scrape_when, write_profile
from tests.polling import wait_for

HW = {"myorg.io/require-hw-encrypt": "true"}
HW_LABEL = {"node.kubernetes.io/hw-encrypt": "true"}


def _scheduler() -> str:
    return f"policyd-{uuid.uuid4().hex[:6]}"


def test_pods_go_where_the_policies_demand(cluster: Cluster, daemons: DaemonFactory,
                                           policy_dir: Path) -> None:
    sched = _scheduler()
    # `Env` is not `env`: label keys are case-sensitive, this node is no prod node.
    cluster.node("plain-a", labels={"Env": "prod", "topology.kubernetes.io/zone": "zone-b"},
                 annotations={"myorg.io/latency-ms": "50"})
    cluster.node("hw-b", labels={**HW_LABEL, "topology.kubernetes.io/zone": "zone-c"},
                 annotations={"myorg.io/latency-ms": "20"})
    cluster.node("prod-c", labels={"env": "prod", "topology.kubernetes.io/zone": "zone-a"},
                 annotations={"myorg.io/latency-ms": "5"})
    daemons.start(write_profile(policy_dir.parent, sched))
    for i in range(3):
        cluster.pod(f"secure-{i}", sched, annotations=HW)
    # EnvProd: pods labelled env=prod only on nodes labelled env=prod (not Env=prod).
    for i in range(3):
        cluster.pod(f"prod-app-{i}", sched, labels={"env": "prod"})
    # LowLatency: the lowest measured latency (and zone-a) wins.
    cluster.pod("latency", sched, labels={"myorg.io/latency-sensitive": "true"})
    for i in range(3):
        assert cluster.wait_bound(f"secure-{i}") == "hw-b"
    for i in range(3):
        assert cluster.wait_bound(f"prod-app-{i}") == "prod-c"
    assert cluster.wait_bound("latency") == "prod-c"
    scheduled = cluster.events(pod="secure-0", reason="Scheduled")
    assert [e["message"] for e in scheduled] == [
        f"Successfully assigned {cluster.ns}/secure-0 to hw-b"]
    assert scheduled[0]["type"] == "Normal"
    assert scheduled[0]["source"]["component"] == sched


def test_values_past_float64s_exact_range_are_missing_to_the_daemon_as_to_explain(
        cluster: Cluster, daemons: DaemonFactory, policy_dir: Path,
        control_plane: ControlPlane) -> None:
    """Annotations at the ends of float64 (and past them) that a numeric score rule
    reads count as missing: `policyd explain` on the live cluster and the daemon
    choose the same node, the one with a usable value (issue 26's 1e308 class)."""
    sched = _scheduler()
    for name, latency in (("huge", "1e308"), ("tiny", "-1e308"), ("past", "1e400"),
                          ("nan", "nan"), ("sane", "5")):
        cluster.node(name, annotations={"myorg.io/latency-ms": latency})
    profile = write_profile(policy_dir.parent, sched)
    cluster.pod("latency", sched, labels={"myorg.io/latency-sensitive": "true"})
    out = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-m", "policyd", "explain",
         f"{cluster.ns}/latency", "--kubeconfig", str(control_plane.kubeconfig_path),
         "--config", str(profile), "-o", "json"],
        capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    explained = json.loads(out.stdout)["node"]
    daemons.start(profile)
    assert cluster.wait_bound("latency") == explained == "sane"


def test_memory_headroom_keeps_ten_percent_free(cluster: Cluster, daemons: DaemonFactory,
                                                policy_dir: Path) -> None:
    sched = _scheduler()
    cluster.node("small", memory="10Gi")
    daemons.start(write_profile(policy_dir.parent, sched))
    # Fits NodeResourcesFit (9.3Gi of 10Gi) but would leave less than 10% free.
    cluster.pod("too-much", sched, memory="9500Mi")
    events = wait_for(lambda: cluster.events(pod="too-much", reason="FailedScheduling"),
                      10, "FailedScheduling")
    # Headroom is a resource limit (Unschedulable): preemption tries, and finds no pod.
    assert events[0]["message"] == (
        "0/1 nodes are available: 1 node(s) would have less than 10% memory free. "
        "no new claims to deallocate, preemption: 0/1 nodes are available: 1 No "
        "preemption victims found for incoming pod.")
    cluster.pod("fits", sched, memory="9Gi")  # leaves exactly 10%
    assert cluster.wait_bound("fits") == "small"


def test_a_pod_for_another_scheduler_is_left_alone(cluster: Cluster, daemons: DaemonFactory,
                                                   policy_dir: Path) -> None:
    sched = _scheduler()
    cluster.node("n1")
    d = daemons.start(write_profile(policy_dir.parent, sched))
    cluster.pod("mine", sched)
    cluster.pod("theirs", "some-other-scheduler")
    assert cluster.wait_bound("mine") == "n1"
    time.sleep(1.0)
    assert cluster.node_of("theirs") is None
    assert cluster.events(pod="theirs") == []
    assert cluster.condition("theirs") is None
    pod = cluster.get_pod("theirs")
    assert pod is not None and pod["metadata"]["uid"] not in d.scheduler.queue


def test_impossible_pod_is_explained_then_bound_when_a_node_fits(
        cluster: Cluster, daemons: DaemonFactory, policy_dir: Path) -> None:
    sched = _scheduler()
    cluster.node("plain-1")
    cluster.node("plain-2", taints=[{"key": "dedicated", "value": "x",
                                     "effect": "NoSchedule"}])
    d = daemons.start(write_profile(policy_dir.parent, sched))
    cluster.pod("secure", sched, annotations=HW)
    # A label policy and a taint are final (UnschedulableAndUnresolvable).
    message = ("0/2 nodes are available: 1 node(s) didn't offer hardware encryption, "
               "1 node(s) had untolerated taint(s). no new claims to deallocate, "
               "preemption: 0/2 nodes are available: 2 Preemption is not helpful for "
               "scheduling.")
    events = wait_for(lambda: cluster.events(pod="secure", reason="FailedScheduling"), 15,
                      "a FailedScheduling event")
    assert [(e["type"], e["message"]) for e in events] == [("Warning", message)]
    assert events[0]["source"]["component"] == sched
    cond = wait_for(lambda: cluster.condition("secure"), 10, "PodScheduled condition")
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "False", "Unschedulable", message)
    uid = cluster.get_pod("secure")["metadata"]["uid"]  # type: ignore[index]
    wait_for(lambda: d.scheduler.queue.where(uid) == UNSCHEDULABLE, 10, "unschedulable")
    # Repeated failures do not flood: the daemon keeps it waiting, no new events.
    time.sleep(1.5)
    assert len(cluster.events(pod="secure", reason="FailedScheduling")) == 1

    started = time.monotonic()
    cluster.node("hw-1", labels=HW_LABEL)
    assert cluster.wait_bound("secure", timeout=10) == "hw-1"
    assert time.monotonic() - started < 5.0


def test_a_pod_deleted_while_queued_leaves_the_queue(
        cluster: Cluster, daemons: DaemonFactory, policy_dir: Path) -> None:
    sched = _scheduler()
    cluster.node("plain")
    d = daemons.start(write_profile(policy_dir.parent, sched))
    created = cluster.pod("doomed", sched, annotations=HW)
    uid = created["metadata"]["uid"]
    wait_for(lambda: d.scheduler.queue.where(uid) == UNSCHEDULABLE, 10, "queued")
    _, text = scrape(d.http.port)  # type: ignore[union-attr]
    assert metric(text, "scheduler_pending_pods", queue="unschedulable") == 1
    cluster.delete_pod("doomed")
    wait_for(lambda: uid not in d.scheduler.queue, 10, "pod dropped from the queue")
    assert d.scheduler.queue.counts()[UNSCHEDULABLE] == 0
    _, text = scrape(d.http.port)  # type: ignore[union-attr]
    assert metric(text, "scheduler_pending_pods", queue="unschedulable") == 0
    assert uid not in d.scheduler.throttle._seen


def test_a_pod_bound_by_someone_else_is_not_bound_again(
        cluster: Cluster, daemons: DaemonFactory, policy_dir: Path) -> None:
    sched = _scheduler()
    cluster.node("plain")
    d = daemons.start(write_profile(policy_dir.parent, sched))
    uid = cluster.pod("contested", sched, annotations=HW)["metadata"]["uid"]
    wait_for(lambda: d.scheduler.queue.where(uid) == UNSCHEDULABLE, 10, "queued")
    cluster.bind("contested", "plain")  # someone else wins
    wait_for(lambda: uid not in d.scheduler.queue, 10, "dropped from the queue")
    cluster.node("hw", labels=HW_LABEL)  # would now fit policyd's rules
    time.sleep(1.5)
    assert cluster.node_of("contested") == "plain"
    assert cluster.events(pod="contested", reason="Scheduled") == []
    assert d.scheduler.bound_total == 0
    _, text = scrape(d.http.port)  # type: ignore[union-attr]
    assert metric(text, "policyd_bind_errors_total") == 0


def test_invalid_policy_reload_keeps_the_old_policies(
        cluster: Cluster, daemons: DaemonFactory, policy_dir: Path) -> None:
    sched = _scheduler()
    cluster.node("plain")
    cluster.node("hw", labels=HW_LABEL)
    d = daemons.start(write_profile(policy_dir.parent, sched))
    hw = policy_dir / "hw-encrypt.yaml"
    good = hw.read_text()
    hw.write_text(good.replace("pluginName: HwEncrypt", "pluginName: hw encrypt"))
    wait_for(lambda: d.watcher.failures == 1, 10, "the reload to be rejected")
    events = wait_for(lambda: cluster.events(namespace="default",
                                             reason="InvalidConfiguration"), 10,
                      "Warning event on the Lease")
    mine = [e for e in events if e["involvedObject"]["name"] == sched]
    assert mine and mine[0]["type"] == "Warning"
    assert mine[0]["involvedObject"]["kind"] == "Lease"
    # The old HwEncrypt still decides.
    for i in range(3):
        cluster.pod(f"secure-{i}", sched, annotations=HW)
    for i in range(3):
        assert cluster.wait_bound(f"secure-{i}") == "hw"
    # A valid change is applied without restart: drop the policy from the profile.
    hw.write_text(good.replace("didn't offer hardware encryption",
                               "lack hardware encryption"))
    wait_for(lambda: d.watcher.reloads == 1, 10, "the valid reload")
    cluster.delete_node("hw")
    cluster.pod("secure-late", sched, annotations=HW)
    events = wait_for(lambda: cluster.events(pod="secure-late", reason="FailedScheduling"),
                      10, "FailedScheduling with the new message")
    assert events[0]["message"] == (
        "0/1 nodes are available: 1 node(s) lack hardware encryption. no new claims to "
        "deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful "
        "for scheduling.")


def test_deep_jmespath_reload_is_rejected_and_reported(
        cluster: Cluster, daemons: DaemonFactory, policy_dir: Path) -> None:
    """A policy whose JMESPath nests thousands deep, written while policyd runs, is a
    rejected reload like any invalid policy: Warning event, metric, old rules decide."""
    sched = _scheduler()
    cluster.node("plain")
    cluster.node("hw", labels=HW_LABEL)
    d = daemons.start(write_profile(policy_dir.parent, sched))
    hw = policy_dir / "hw-encrypt.yaml"
    deep = "(" * 3000 + "node.metadata.name" + ")" * 3000
    hw.write_text(hw.read_text() + f"""\
    - id: deep
      message: node(s) are too deep
      jmespath: '{deep}'
""")
    wait_for(lambda: d.watcher.failures == 1, 10, "the reload to be rejected")
    events = wait_for(lambda: [e for e in cluster.events(namespace="default",
                                                         reason="InvalidConfiguration")
                               if e["involvedObject"]["name"] == sched], 10,
                      "Warning event on the Lease")
    assert events[0]["type"] == "Warning" and "nests deeper than" in events[0]["message"]
    _, text = scrape(d.http.port)  # type: ignore[union-attr]
    assert metric(text, "policyd_config_reloads_total", result="rejected") == 1
    assert metric(text, "policyd_config_reloads_total", result="applied") == 0
    # The running HwEncrypt still decides.
    cluster.pod("secure", sched, annotations=HW)
    assert cluster.wait_bound("secure") == "hw"


def test_metrics_health_and_readiness(cluster: Cluster, daemons: DaemonFactory,
                                      policy_dir: Path) -> None:
    sched = _scheduler()
    cluster.node("n1")
    d = daemons.start(write_profile(policy_dir.parent, sched))
    port = d.http.port  # type: ignore[union-attr]
    assert scrape(port, "/healthz") == (200, "ok")
    assert scrape(port, "/readyz") == (200, "ok")
    cluster.pod("a", sched)
    cluster.pod("b", sched, cpu="64")
    cluster.wait_bound("a")
    wait_for(lambda: cluster.events(pod="b", reason="FailedScheduling"), 10, "failure")
    text = scrape_when(port, "scheduler_schedule_attempts_total", 1, result="scheduled",
                       profile=sched)
    assert metric(text, "scheduler_schedule_attempts_total", result="scheduled",
                  profile=sched) == 1
    assert metric(text, "scheduler_schedule_attempts_total", result="unschedulable",
                  profile=sched) >= 1
    assert metric(text, "scheduler_pod_scheduling_sli_duration_seconds_count",
                  attempts="1") == 1
    assert metric(text, "scheduler_pod_scheduling_attempts_count") == 1
    assert metric(text, "scheduler_scheduling_algorithm_duration_seconds_count") >= 2
    assert metric(text, "leader_election_master_status") == 1
    for point in ("PreFilter", "Filter"):
        assert metric(text, "scheduler_framework_extension_point_duration_seconds_count",
                      extension_point=point, profile=sched) >= 2


def test_losing_the_lease_stops_scheduling_at_once(
        cluster: Cluster, daemons: DaemonFactory, policy_dir: Path) -> None:
    sched = _scheduler()
    cluster.node("n1")
    d = daemons.start(write_profile(policy_dir.parent, sched))
    cluster.pod("first", sched)
    cluster.wait_bound("first")
    # Another replica takes the lease (as if ours had stalled past its deadline).
    lease = cluster.lease(sched)
    assert lease is not None
    lease["spec"]["holderIdentity"] = "thief"
    lease["spec"]["leaseDurationSeconds"] = 3600
    cluster.client.request(
        "PUT", f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{sched}",
        body=lease)
    wait_for(lambda: not d.is_leader(), 5, "leadership lost")
    cluster.pod("while-not-leader", sched)
    time.sleep(2)
    assert cluster.node_of("while-not-leader") is None
    assert cluster.events(pod="while-not-leader") == []
    # The thief steps down: ours takes over and schedules the waiting pod.
    lease = cluster.lease(sched)
    assert lease is not None
    lease["spec"]["holderIdentity"] = ""
    cluster.client.request(
        "PUT", f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{sched}",
        body=lease)
    assert cluster.wait_bound("while-not-leader", timeout=10) == "n1"


def test_namespace_labels_reach_pod_affinity(cluster: Cluster, daemons: DaemonFactory,
                                             policy_dir: Path) -> None:
    sched = _scheduler()
    cluster.client.request("PATCH", f"/api/v1/namespaces/{cluster.ns}",
                           body={"metadata": {"labels": {"team": "blue"}}},
                           content_type="application/merge-patch+json")
    for name in ("n1", "n2", "n3"):
        cluster.node(name)
    d = daemons.start(write_profile(policy_dir.parent, sched))
    cluster.pod("anchor", "nobody", labels={"app": "anchor"}, nodeName="n2")
    wait_for(lambda: d.scheduler.cluster.namespace_labels.get(cluster.ns) == {
        "team": "blue", "kubernetes.io/metadata.name": cluster.ns}, 10, "namespace labels")
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"app": "anchor"}},
        "namespaceSelector": {"matchLabels": {"team": "blue"}},
        "topologyKey": "kubernetes.io/hostname"}]}}
    cluster.pod("follower", sched, affinity=affinity)
    assert cluster.wait_bound("follower") == "n2"


LATENCY_POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: measured-latency
spec:
  pluginName: MeasuredLatency
  weight: 10
  scores:
    - id: latency
      weight: 100
      metric:
        name: node_latency_ms
        prefer: lowest
      normalize: minmax
"""


def test_node_metric_providers_feed_policy_scores(cluster: Cluster, daemons: DaemonFactory,
                                                  tmp_path: Path) -> None:
    sched = _scheduler()
    (tmp_path / "latency.yaml").write_text(LATENCY_POLICY)
    profile = write_profile(tmp_path, sched, policies="latency.yaml", extra="""\
metricsProviders:
- name: annotations
  kind: nodeAnnotation
  metric: node_latency_ms
  annotation: example.com/latency-ms
  refreshInterval: 1s
""")
    for name, latency in (("slow", "50"), ("fast", "2"), ("mid", "20")):
        cluster.node(name, annotations={"example.com/latency-ms": latency})
    d = daemons.start(profile)
    assert d.node_metrics is not None
    def measured() -> bool:
        snap = d.node_metrics.cache.snapshot("node_latency_ms")
        return snap is not None and len(snap.values) == 3

    wait_for(measured, 10, "metric values for every node")
    for i in range(3):
        cluster.pod(f"p{i}", sched)
    for i in range(3):
        assert cluster.wait_bound(f"p{i}") == "fast"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_a_backoff_reload_is_applied_live(cluster: Cluster, daemons: DaemonFactory,
                                          policy_dir: Path) -> None:
    """podInitialBackoffSeconds raised from 1 to 6 while running: a pod that failed
    once is given the new backoff, not the old one; and once a node fits it, the idle
    scheduler takes it from backoff at once instead of waiting that backoff out, as
    kube-scheduler v1.36 does with SchedulerPopFromBackoffQ (on by default)."""
    sched = _scheduler()
    cluster.node("plain")
    profile = write_profile(policy_dir.parent, sched)
    d = daemons.start(profile)
    _edit(profile, "podInitialBackoffSeconds: 1\npodMaxBackoffSeconds: 2",
          "podInitialBackoffSeconds: 6\npodMaxBackoffSeconds: 6")
    wait_for(lambda: d.watcher.reloads == 1, 10, "the reload")
    uid = cluster.pod("secure", sched, annotations=HW)["metadata"]["uid"]

    def failed_once() -> bool:
        qp = d.scheduler.queue.get(uid)
        return qp is not None and qp.attempts == 1 and qp.where in (UNSCHEDULABLE,
                                                                   BACKOFF)

    wait_for(failed_once, 10, "the first failure")
    failed_at = time.monotonic()
    qp = d.scheduler.queue.get(uid)
    assert qp is not None
    # 6 s from the failure, rounded down to its 1 s window; the old value was 1 s.
    assert 5 <= d.scheduler.queue.backoff_expiry(qp) - qp.timestamp <= 6
    cluster.node("hw", labels=HW_LABEL)  # it fits now
    assert cluster.wait_bound("secure", timeout=20) == "hw"
    waited = time.monotonic() - failed_at
    assert waited < 4.5, waited  # well before the 6 s backoff would have ended
    _, text = scrape(d.http.port)  # type: ignore[union-attr]
    assert metric(text, "policyd_config_reloads_total", result="applied") == 1
    assert metric(text, "policyd_config_reloads_total",
                  result="applied_restart_required") == 0
    assert [e for e in cluster.events(namespace="default", reason="RestartRequired")
            if e["involvedObject"]["name"] == sched] == []


def test_a_leader_election_reload_says_it_needs_a_restart(
        cluster: Cluster, daemons: DaemonFactory, policy_dir: Path) -> None:
    sched = _scheduler()
    profile = write_profile(policy_dir.parent, sched)
    d = daemons.start(profile)
    _edit(profile, "leaseDuration: 4s", "leaseDuration: 6s")
    wait_for(lambda: d.watcher.reloads == 1, 10, "the reload")
    events = wait_for(lambda: [e for e in cluster.events(namespace="default",
                                                         reason="RestartRequired")
                               if e["involvedObject"]["name"] == sched], 10,
                      "a RestartRequired event on the Lease")
    [event] = events
    assert (event["type"], event["involvedObject"]["kind"]) == ("Warning", "Lease")
    assert "leaderElection.leaseDuration (4 -> 6)" in event["message"]
    assert str(profile) in event["message"]
    _, text = scrape(d.http.port)  # type: ignore[union-attr]
    assert metric(text, "policyd_config_reloads_total",
                  result="applied_restart_required") == 1
    assert metric(text, "policyd_config_reloads_total", result="applied") == 0
    # Truly not applied: the lease is still renewed with the running duration.
    time.sleep(1.5)
    lease = cluster.lease(sched)
    assert lease is not None and lease["spec"]["leaseDurationSeconds"] == 4


def test_without_leader_election_config_events_go_to_the_own_pod(
        cluster: Cluster, daemons: DaemonFactory, policy_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No Lease exists: the InvalidConfiguration event is on the daemon's Pod (named
    by the downward API variables), an object that exists."""
    sched = _scheduler()
    me = cluster.pod("policyd-self", "nobody")
    monkeypatch.setenv("POD_NAME", "policyd-self")
    monkeypatch.setenv("POD_NAMESPACE", cluster.ns)
    monkeypatch.setenv("POD_UID", me["metadata"]["uid"])
    d = daemons.start(write_profile(policy_dir.parent, sched), leader_elect=False)
    hw = policy_dir / "hw-encrypt.yaml"
    _edit(hw, "pluginName: HwEncrypt", "pluginName: hw encrypt")
    wait_for(lambda: d.watcher.failures == 1, 10, "the reload to be rejected")
    [event] = wait_for(lambda: cluster.events(pod="policyd-self",
                                              reason="InvalidConfiguration"), 10,
                       "the Warning event on the Pod")
    assert event["involvedObject"]["kind"] == "Pod"
    assert event["involvedObject"]["uid"] == me["metadata"]["uid"]
    assert f"{hw} changed" in event["message"]
    assert cluster.lease(sched) is None
    assert [e for e in cluster.events(namespace="default", reason="InvalidConfiguration")
            if e["involvedObject"]["name"] == sched] == []


def test_a_deleted_policy_file_is_named_in_the_rejection(
        cluster: Cluster, daemons: DaemonFactory, policy_dir: Path) -> None:
    """The profile enables HwEncrypt by name; its file is deleted: the rejection says
    the file is gone, not only that the plugin is not registered."""
    sched = _scheduler()
    profile = write_profile(policy_dir.parent, sched, extra="""\
  plugins:
    filter:
      enabled:
      - name: HwEncrypt
""")
    d = daemons.start(profile)
    hw = policy_dir / "hw-encrypt.yaml"
    hw.unlink()
    wait_for(lambda: d.watcher.failures == 1, 10, "the reload to be rejected")
    [event] = wait_for(lambda: [e for e in cluster.events(namespace="default",
                                                          reason="InvalidConfiguration")
                                if e["involvedObject"]["name"] == sched], 10,
                       "the Warning event on the Lease")
    assert event["message"].startswith(
        f"configuration change rejected, previous one still in use: {hw} was deleted: ")
    assert 'plugin "HwEncrypt" is not registered' in event["message"]


def test_healthz_fails_when_the_leader_election_loop_dies(
        cluster: Cluster, daemons: DaemonFactory, policy_dir: Path) -> None:
    sched = _scheduler()
    d = daemons.start(write_profile(policy_dir.parent, sched))
    port = d.http.port  # type: ignore[union-attr]
    assert scrape(port, "/healthz") == (200, "ok")
    d._elector_stop.set()  # its loop ends (as if it had crashed) while the rest runs
    wait_for(lambda: scrape(port, "/healthz")[0] == 500, 10, "/healthz to fail")
    _, body = scrape(port, "/healthz")
    assert body.splitlines() == ["[-]policyd-leader: the thread has exited",
                                 "healthz check failed"]
    assert scrape(port, "/readyz") == (200, "ok")  # readiness is about the caches
