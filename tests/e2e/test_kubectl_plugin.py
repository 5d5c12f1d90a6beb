"""`kubectl policyd` through the real kubectl binary, against the real API server and
a running `policyd run`: the explained message is the daemon's FailedScheduling
message, simulate places as many pending pods as the daemon then binds, and a user
without the policyd-explain ClusterRole is told which one to get.

kubectl finds the plugin on PATH: the installed `kubectl-policyd` next to this Python
when there is one (an editable install made after pyproject gained it), else a shim
running `python -m policyd.cli.kubectl_plugin`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from policyd.devcluster import ControlPlane
from policyd.kube.api import SCHEDULING_POLICIES
from policyd.kube.client import ConnectionSettings, KubeClient
from policyd.kube.cluster_read import SNAPSHOT_RESOURCES, list_all
from tests.e2e.helpers import Cluster, DaemonFactory, write_profile
from tests.e2e.test_cluster_policies import install_crd, policy, remove_crd
from tests.polling import wait_for

ROOT = Path(__file__).resolve().parents[2]


def _kubectl() -> Path:
    from policyd.devcluster.build import resolve_binaries

    kubectl = resolve_binaries(build_if_missing=False).kubectl
    if kubectl is None:
        pytest.fail("no kubectl binary in the control plane's build")
    return kubectl


def _plugin_path(tmp: Path) -> str:
    """A PATH on which kubectl finds kubectl-policyd (see the module docstring)."""
    installed = Path(sys.executable).parent / "kubectl-policyd"
    if installed.is_file() and os.access(installed, os.X_OK):
        return f"{installed.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    shim_dir = tmp / "plugin-bin"
    shim_dir.mkdir(exist_ok=True)
    shim = shim_dir / "kubectl-policyd"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m policyd.cli.kubectl_plugin "$@"\n')
    shim.chmod(0o755)
    return f"{shim_dir}{os.pathsep}{os.environ.get('PATH', '')}"


def kubectl_policyd(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # No KUBECONFIG of the test's: the plugin must honour --kubeconfig itself.
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["PATH"] = _plugin_path(tmp)
    return subprocess.run([str(_kubectl()), "policyd", *args], capture_output=True,
                          text=True, timeout=180, env=env, cwd=ROOT)


def _failed_scheduling(cluster: Cluster, pod: str) -> str:
    def latest() -> str | None:
        events = cluster.events(pod=pod, reason="FailedScheduling")
        return str(events[-1]["message"]) if events else None

    return str(wait_for(latest, 30, f"FailedScheduling event for {pod}"))


def test_kubectl_policyd_explains_a_pending_pod_as_the_daemon_did(
        control_plane: ControlPlane, cluster: Cluster, daemons: DaemonFactory,
        policy_dir: Path, tmp_path: Path) -> None:
    kubeconfig = str(control_plane.kubeconfig_path)
    scheduler = cluster.ns  # unique per test, as the other e2e tests do
    profile = write_profile(tmp_path, scheduler)
    for name in ("node-a", "node-b"):
        cluster.node(name, cpu="4", memory="8Gi")
    # Pending before the daemon starts: simulate answers first, then the daemon acts.
    for i in range(5):
        cluster.pod(f"small-{i}", scheduler, cpu="2")
    cluster.pod("huge", scheduler, cpu="8")

    sim = kubectl_policyd(tmp_path, "simulate", "--kubeconfig", kubeconfig,
                          "--config", str(profile), "-o", "json")
    assert sim.returncode == 1, sim.stderr  # not every pod fits
    out = json.loads(sim.stdout)
    mine = [p for p in out["placements"] if p["pod"].startswith(f"{cluster.ns}/")]
    placed = sum(1 for p in mine if p["node"])
    assert placed == 4 and len(mine) == 6  # two 2-cpu pods per 4-cpu node
    assert next(p for p in mine if p["pod"] == f"{cluster.ns}/huge")["node"] is None

    daemons.start(profile)
    message = _failed_scheduling(cluster, "huge")
    wait_for(lambda: sum(1 for i in range(5) if cluster.node_of(f"small-{i}")) == placed, 30,
             "the daemon binds as many pods as simulate placed")
    assert sum(1 for i in range(5) if cluster.node_of(f"small-{i}")) == placed

    r = kubectl_policyd(tmp_path, "explain", "pod/huge", "-n", cluster.ns,
                        "--kubeconfig", kubeconfig, "--config", str(profile), "-o", "json")
    assert r.returncode == 1, r.stderr  # fits no node
    explained = json.loads(r.stdout)
    assert explained["pod"] == f"{cluster.ns}/huge"
    assert explained["message"] == message
    assert message.startswith("0/2 nodes are available: 2 Insufficient cpu.")
    condition = cluster.condition("huge") or {}
    assert condition.get("message") == message

    # The same answer as YAML, and in text for a person.
    r = kubectl_policyd(tmp_path, "explain", f"{cluster.ns}/huge", "--kubeconfig",
                        kubeconfig, "--config", str(profile), "-o", "yaml")
    assert r.returncode == 1 and YAML(typ="safe").load(r.stdout)["message"] == message
    r = kubectl_policyd(tmp_path, "explain", "huge", "-n", cluster.ns, "--kubeconfig",
                        kubeconfig, "--config", str(profile))
    assert r.returncode == 1 and f"  {message}\n" in r.stdout


def _service_account_kubeconfig(control_plane: ControlPlane, cluster: Cluster, tmp: Path
                                ) -> str:
    sa = "explainer"
    cluster.client.request("POST", f"/api/v1/namespaces/{cluster.ns}/serviceaccounts",
                           body={"apiVersion": "v1", "kind": "ServiceAccount",
                                 "metadata": {"name": sa}})
    token = cluster.client.request(
        "POST", f"/api/v1/namespaces/{cluster.ns}/serviceaccounts/{sa}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
              "spec": {"expirationSeconds": 3600}})["status"]["token"]
    return str(control_plane.write_token_kubeconfig(tmp / "explainer.kubeconfig", token))


def test_a_user_without_the_cluster_role_is_told_which_to_bind(
        control_plane: ControlPlane, cluster: Cluster, tmp_path: Path) -> None:
    kubeconfig = _service_account_kubeconfig(control_plane, cluster, tmp_path)
    cluster.node("node-a", cpu="4")
    cluster.pod("web", "policyd", cpu="1")

    denied = kubectl_policyd(tmp_path, "explain", "web", "-n", cluster.ns,
                             "--kubeconfig", kubeconfig)
    assert denied.returncode == 2
    assert "not allowed to list nodes" in denied.stderr
    assert "bind the ClusterRole policyd-explain" in denied.stderr
    assert "Traceback" not in denied.stderr

    # deploy/'s ClusterRole, bound to the user, is all it takes.
    role: dict[str, Any] = YAML(typ="safe").load(
        (ROOT / "deploy" / "explain-clusterrole.yaml").read_text())
    role_path = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
    binding_path = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
    cluster.client.request("POST", role_path, body=role)
    cluster.created.append(f"{role_path}/{role['metadata']['name']}")
    binding = f"policyd-explain-{cluster.ns}"
    cluster.client.request("POST", binding_path, body={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": binding},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": role["metadata"]["name"]},
        "subjects": [{"kind": "ServiceAccount", "name": "explainer",
                      "namespace": cluster.ns}]})
    cluster.created.append(f"{binding_path}/{binding}")

    def allowed() -> subprocess.CompletedProcess[str] | None:
        r = kubectl_policyd(tmp_path, "explain", "web", "-n", cluster.ns,
                            "--kubeconfig", kubeconfig, "-o", "json")
        return r if r.returncode != 2 else None  # RBAC caches take a moment

    r = wait_for(allowed, 30, "the binding to take effect")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["node"] == "node-a"


def test_lists_are_paged_and_items_get_their_kind(control_plane: ControlPlane,
                                                  cluster: Cluster) -> None:
    for i in range(5):
        cluster.node(f"page-{i}")
    client = KubeClient.connect(ConnectionSettings(
        kubeconfig=str(control_plane.kubeconfig_path)))
    try:
        nodes = next(r for r in SNAPSHOT_RESOURCES if r.kind == "Node")
        items = list_all(client, nodes, page_size=2)  # three pages
    finally:
        client.close()
    assert sorted(o["metadata"]["name"] for o in items) == [f"page-{i}" for i in range(5)]
    assert {(o["kind"], o["apiVersion"]) for o in items} == {("Node", "v1")}


def test_the_clusters_scheduling_policies_run_in_a_live_explain(
        cluster: Cluster, control_plane: ControlPlane, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    """With deploy/'s CRD (policyd.policy.crd), as tests/e2e/test_cluster_policies.py
    installs it for the daemon."""
    kubeconfig = str(control_plane.kubeconfig_path)
    remove_crd(cluster.client)  # no CRD: no cluster policies, and no error
    cluster.node("plain-node", cpu="4")
    cluster.pod("secret-db", "policyd", cpu="1",
                annotations={"myorg.io/require-hw-encrypt": "true"})
    r = kubectl_policyd(tmp_path, "explain", "secret-db", "-n", cluster.ns,
                        "--kubeconfig", kubeconfig, "-o", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["node"] == "plain-node"

    install_crd(cluster.client)
    request.addfinalizer(lambda: remove_crd(cluster.client))
    hw: dict[str, Any] = YAML(typ="safe").load(
        (ROOT / "policies" / "hw-encrypt.yaml").read_text())
    hw["metadata"] = {"name": f"hw-encrypt-{cluster.ns}"}
    # Admitted by the CRD's schema (JMESPath is left to policyd), refused by policyd.
    broken = policy(f"broken-{cluster.ns}", "Broken", "never", jmespath="labels.[")
    for obj in (hw, broken):
        cluster.client.request("POST", SCHEDULING_POLICIES, body=obj)
        cluster.created.append(f"{SCHEDULING_POLICIES}/{obj['metadata']['name']}")

    r = kubectl_policyd(tmp_path, "explain", "secret-db", "-n", cluster.ns,
                        "--kubeconfig", kubeconfig, "-o", "json")
    assert r.returncode == 1, r.stderr  # the cluster's HwEncrypt rejects the only node
    out = json.loads(r.stdout)
    assert out["message"] == ("0/1 nodes are available: 1 node(s) didn't offer hardware "
                              "encryption. no new claims to deallocate, preemption: 0/1 "
                              "nodes are available: 1 Preemption is not helpful for "
                              "scheduling.")
    assert f"schedulingpolicy/broken-{cluster.ns} left out: " in r.stderr
    assert out["warnings"] and "left out" in out["warnings"][0]


def test_kubectl_policyd_audit_finds_label_drift_under_running_pods(
        cluster: Cluster, control_plane: ControlPlane, tmp_path: Path) -> None:
    """`policyd audit` on the live cluster: a pod placed on a node with the label its
    policy requires passes; once the node loses the label, the same pod is a violation
    (exit 1, in json and junit), without anything being scheduled in between."""
    import xml.etree.ElementTree as ET

    kubeconfig = str(control_plane.kubeconfig_path)
    node = f"enc-{cluster.ns}"
    cluster.node(node, labels={"node.kubernetes.io/hw-encrypt": "true"})
    cluster.pod("vault", "another-scheduler",
                annotations={"myorg.io/require-hw-encrypt": "true"})
    cluster.bind("vault", node)
    cluster.pod("web", "another-scheduler")
    cluster.bind("web", node)
    args = ("audit", "--kubeconfig", kubeconfig, "-n", cluster.ns,
            "--policies", str(ROOT / "policies" / "hw-encrypt.yaml"))

    clean = kubectl_policyd(tmp_path, *args, "-o", "json")
    assert clean.returncode == 0, clean.stderr
    report = json.loads(clean.stdout)
    assert report["violations"] == []
    (hw,) = report["policies"]
    assert (hw["policy"], hw["checked"]) == ("hw-encrypt", 1)  # web is not annotated

    cluster.client.request("PATCH", f"/api/v1/nodes/{node}",
                           body={"metadata": {"labels": {
                               "node.kubernetes.io/hw-encrypt": None}}},
                           content_type="application/merge-patch+json")
    drifted = kubectl_policyd(tmp_path, *args, "-o", "json")
    assert drifted.returncode == 1, drifted.stderr
    (violation,) = json.loads(drifted.stdout)["violations"]
    assert (violation["pod"], violation["node"], violation["policy"], violation["rule"],
            violation["mode"]) == (f"{cluster.ns}/vault", node, "hw-encrypt",
                                   "hw-encrypt-node", "Enforce")
    junit = kubectl_policyd(tmp_path, *args, "-o", "junit")
    assert junit.returncode == 1
    suites = ET.fromstring(junit.stdout)
    assert sum(int(s.get("failures", "0")) for s in suites.iter("testsuite")) == 1
    text = kubectl_policyd(tmp_path, *args)
    assert text.returncode == 1
    assert "didn't offer hardware encryption" in text.stdout


def _env_policy(ns: str, values: str) -> str:
    return (f"apiVersion: policyd.io/v1alpha1\nkind: SchedulingPolicy\n"
            f"metadata: {{name: env-{ns}}}\nspec:\n  pluginName: Env{ns.replace('-', '')}\n"
            f"  appliesTo: {{labelSelector: {{matchLabels: {{diff-test: {ns}}}}}}}\n"
            "  filters:\n    - id: env-nodes\n      message: node(s) are not allowed\n"
            f"      nodeLabels: {{matchExpressions: [{{key: env, operator: In, "
            f"values: {values}}}]}}\n")


def test_kubectl_policyd_diff_names_the_running_pods_a_change_would_reject(
        cluster: Cluster, control_plane: ControlPlane, tmp_path: Path) -> None:
    """`policyd diff` on the live cluster: narrowing a policy turns the pod running on
    the node it no longer allows into a new violation (exit 1); the reverse change
    lists it as fixed and passes."""
    ns = cluster.ns
    cluster.node(f"prod-{ns}", labels={"env": "prod"})
    cluster.node(f"staging-{ns}", labels={"env": "staging"})
    for name, node in (("on-prod", f"prod-{ns}"), ("on-staging", f"staging-{ns}")):
        cluster.pod(name, "another-scheduler", labels={"diff-test": ns})
        cluster.bind(name, node)
    for version, values in (("old", "[prod, staging]"), ("new", "[prod]")):
        (tmp_path / version).mkdir()
        (tmp_path / version / "env.yaml").write_text(_env_policy(ns, values))
    kubeconfig = str(control_plane.kubeconfig_path)

    narrowed = kubectl_policyd(tmp_path, "diff", str(tmp_path / "old"), str(tmp_path / "new"),
                               "--kubeconfig", kubeconfig, "-o", "json")
    assert narrowed.returncode == 1, narrowed.stderr
    doc = json.loads(narrowed.stdout)
    assert [(v["pod"], v["node"], v["rule"]) for v in doc["newViolations"]] == [
        (f"{ns}/on-staging", f"staging-{ns}", "env-nodes")]
    widened = kubectl_policyd(tmp_path, "diff", str(tmp_path / "new"), str(tmp_path / "old"),
                              "--kubeconfig", kubeconfig, "-o", "markdown")
    assert widened.returncode == 0, widened.stderr
    assert "<details><summary>Violations fixed (1)</summary>" in widened.stdout
    assert f"| {ns}/on-staging | staging-{ns} |" in widened.stdout
