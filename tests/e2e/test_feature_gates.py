"""Feature gates on the real API server, policyd beside kube-scheduler v1.36.3.

- SchedulerPopFromBackoffQ=false: an idle policyd waits out a pod's backoff before
  retrying it, as kube-scheduler did before v1.33; with the default it retries at once.
- NodeDeclaredFeatures off (with the gates that depend on it, which kube-scheduler
  requires too): `policyd run --feature-gates` places the issue 27 pod where
  kube-scheduler started with the same flag value places it, not where the feature
  sends it.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

from policyd.cli.options import feature_gate_settings
from policyd.daemon.queue import BACKOFF, UNSCHEDULABLE
from policyd.devcluster.controlplane import ControlPlane
from policyd.features import turning_off
from tests.e2e.helpers import Cluster, DaemonFactory, ProcessFactory, write_profile
from tests.polling import wait_for

NEEDS_HW = {"nodeSelector": {"gates.policyd.io/hw": "true"}}
BACKOFF_SECONDS = 6


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def _profile(directory: Path, scheduler: str) -> Path:
    path = write_profile(directory, scheduler, policies=None)
    text = path.read_text()
    old = "podInitialBackoffSeconds: 1\npodMaxBackoffSeconds: 2"
    assert old in text
    path.write_text(text.replace(old, f"podInitialBackoffSeconds: {BACKOFF_SECONDS}\n"
                                      f"podMaxBackoffSeconds: {BACKOFF_SECONDS}"))
    return path


def test_pop_from_backoff_off_waits_out_the_backoff(cluster: Cluster, daemons: DaemonFactory,
                                                   tmp_path: Path) -> None:
    on, off = _name("gates-on"), _name("gates-off")
    d_on = daemons.start(_profile(tmp_path, on))
    d_off = daemons.start(_profile(tmp_path, off),
                          feature_gates=feature_gate_settings(["SchedulerPopFromBackoffQ=false"]))
    assert d_on.scheduler.queue.pop_from_backoff
    assert not d_off.scheduler.queue.pop_from_backoff
    cluster.node("plain")
    uids = {s: cluster.pod(f"pod-{s}", s, **NEEDS_HW)["metadata"]["uid"]
            for s in (on, off)}
    failed_at: dict[str, float] = {}

    def both_failed_once() -> bool:
        for s, d in ((on, d_on), (off, d_off)):
            qp = d.scheduler.queue.get(uids[s])
            if s not in failed_at and qp is not None and qp.attempts == 1 \
                    and qp.where in (UNSCHEDULABLE, BACKOFF):
                failed_at[s] = time.monotonic()
        return len(failed_at) == 2

    wait_for(both_failed_once, 15, "both pods refused once")
    cluster.node("hw", labels={"gates.policyd.io/hw": "true"})  # both fit now
    bound_after: dict[str, float] = {}

    def both_bound() -> bool:
        for s in (on, off):
            if s not in bound_after and cluster.node_of(f"pod-{s}") == "hw":
                bound_after[s] = time.monotonic() - failed_at[s]
        return len(bound_after) == 2

    wait_for(both_bound, 20, "both pods bound")
    # Default: retried from backoffQ as soon as the node came (the queue was idle).
    assert bound_after[on] < BACKOFF_SECONDS - 1.5, bound_after
    # Gate off: not before the backoff (6 s, rounded down to its 1 s window) ended.
    assert bound_after[off] >= BACKOFF_SECONDS - 1.0, bound_after


RESTART_ALL = [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                "restartPolicy": "Never",
                "resources": {"requests": {"cpu": "500m", "memory": "64Mi"}},
                "restartPolicyRules": [{"action": "RestartAllContainers",
                                        "exitCodes": {"operator": "In", "values": [42]}}]}]


def test_node_declared_features_off_places_like_kube_scheduler(
        cluster: Cluster, control_plane: ControlPlane, processes: ProcessFactory,
        daemons: DaemonFactory, tmp_path: Path) -> None:
    """Issue 27's pod: kube-scheduler with the feature on binds it to new-node, the
    only node declaring it; with the gate off both schedulers score it to old-node,
    which has more room."""
    flag = ",".join(f"{n}={str(v).lower()}" for n, v in turning_off("NodeDeclaredFeatures"))
    kube, policyd, default = _name("kube-ndf"), _name("policyd-ndf"), _name("policyd-def")
    config = tmp_path / "kube-scheduler.json"
    config.write_text(json.dumps({
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": kube, "percentageOfNodesToScore": 100}]}))
    ks = control_plane.start_kube_scheduler(config, extra_args=[f"--feature-gates={flag}"])
    try:
        proc = processes.start("--config", str(write_profile(tmp_path, policyd,
                                                             policies=None)),
                               "--metrics-bind-address", "127.0.0.1:0",
                               "--feature-gates", flag)
        daemons.start(write_profile(tmp_path, default, policies=None))
        new = cluster.node("new-node", cpu="2")
        cluster.client.request("PATCH", "/api/v1/nodes/new-node/status", body={
            "status": {"declaredFeatures": ["RestartAllContainersOnContainerExits"]}},
            content_type="application/merge-patch+json")
        assert new["metadata"]["name"] == "new-node"
        cluster.node("old-node", cpu="4")
        wait_for(lambda: "starting:" in processes.log(0), 30, "policyd run started")
        assert f"feature gates {','.join(sorted(flag.split(',')))}" in processes.log(0)
        for s in (kube, policyd, default):
            cluster.pod(f"ndf-{s}", s, containers=RESTART_ALL)
        placed = {s: cluster.wait_bound(f"ndf-{s}", timeout=30)
                  for s in (kube, policyd, default)}
        assert proc.poll() is None
    finally:
        ks.stop()
    assert placed == {kube: "old-node", policyd: "old-node", default: "new-node"}
