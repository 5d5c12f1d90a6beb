"""A team migrating from kube-scheduler points `policyd run` at the configuration file it
already has: one KubeSchedulerConfiguration file, started first by the real
kube-scheduler v1.36.3 (which must come up ready with it, then stops), then by
`policyd run --config` with a policy from --policies, which places a pod by that
file's profile and the policy; and with `--cluster-policies`, a SchedulingPolicy object
applied to the cluster instead."""

from __future__ import annotations

import uuid
from pathlib import Path

from policyd.devcluster.controlplane import ControlPlane
from tests.e2e.helpers import Cluster, ProcessFactory
from tests.e2e.test_cluster_policies import Policies, install_crd, policy
from tests.polling import wait_for

HW_POLICY = Path(__file__).resolve().parents[2] / "policies" / "hw-encrypt.yaml"


def _file(path: Path, scheduler: str, kubeconfig: Path) -> Path:
    path.write_text(f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {kubeconfig}
  qps: 100
  burst: 200
leaderElection:
  leaderElect: false
enableProfiling: false
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 2
profiles:
  - schedulerName: {scheduler}
    plugins:
      score:
        disabled:
          - name: NodeResourcesBalancedAllocation
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: MostAllocated
""")
    return path


def test_policyd_runs_kube_schedulers_own_file(
        cluster: Cluster, control_plane: ControlPlane, processes: ProcessFactory,
        tmp_path: Path) -> None:
    scheduler = f"migrating-{uuid.uuid4().hex[:6]}"
    config = _file(tmp_path / "kube-scheduler.yaml", scheduler, control_plane.kubeconfig_path)
    text = config.read_text()
    # kube-scheduler takes it as it is (it would refuse a field it does not know).
    control_plane.start_kube_scheduler(config).stop()
    assert config.read_text() == text
    proc = processes.start("--config", str(config),
                           "--policies", str(HW_POLICY),
                           "--metrics-bind-address", "127.0.0.1:0")
    wait_for(lambda: "starting:" in processes.log(0), 30, "policyd run started")
    # MostAllocated would pick the fuller node; the policy's rule wants the labelled one.
    cluster.node("plain", cpu="2")
    cluster.node("encrypting", cpu="8", labels={"node.kubernetes.io/hw-encrypt": "true"})
    cluster.pod("needs-hw", scheduler, annotations={"myorg.io/require-hw-encrypt": "true"})
    cluster.pod("any", scheduler, cpu="500m")
    assert cluster.wait_bound("needs-hw", timeout=30) == "encrypting"
    # Without the annotation the file's MostAllocated scoring decides: the small node
    # is the fuller one relative to its size.
    assert cluster.wait_bound("any", timeout=30) == "plain"
    assert proc.poll() is None


def test_cluster_policies_flag_runs_schedulingpolicy_objects_with_that_file(
        cluster: Cluster, control_plane: ControlPlane, processes: ProcessFactory,
        tmp_path: Path) -> None:
    """The same file cannot say `clusterPolicies: true` (kube-scheduler would refuse
    it): `--cluster-policies` runs a SchedulingPolicy object applied to the cluster,
    which then places the pod against the file's own scoring and shows Accepted."""
    scheduler = f"migrating-{uuid.uuid4().hex[:6]}"
    config = _file(tmp_path / "kube-scheduler.yaml", scheduler, control_plane.kubeconfig_path)
    install_crd(cluster.client)
    objects = Policies(cluster.client)
    name = f"team-{uuid.uuid4().hex[:6]}"
    try:
        objects.create(policy(name, f"Team{uuid.uuid4().hex[:6]}", "not a team node"))
        proc = processes.start("--config", str(config), "--cluster-policies",
                               "--metrics-bind-address", "127.0.0.1:0")
        wait_for(lambda: "starting:" in processes.log(0), 30, "policyd run started")
        assert "cluster policies in effect: schedulingpolicy/" + name in processes.log(0)
        # MostAllocated alone picks the small node; the object's filter only the other.
        cluster.node("plain", cpu="2")
        cluster.node("team-node", cpu="8", labels={"policy-ok": "true"})
        cluster.pod("team-pod", scheduler, cpu="500m")
        assert cluster.wait_bound("team-pod", timeout=30) == "team-node"
        objects.wait_accepted(name, "True", 1)
        assert proc.poll() is None
    finally:
        objects.cleanup()
