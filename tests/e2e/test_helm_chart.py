"""The Helm chart (charts/policyd, issue 32) with the real helm v3 CLI and the local API
server: lint, the values schema refusing typos, `helm template` accepted by a
server-side dry run, install / upgrade / uninstall of a release whose own ConfigMap
then runs `policyd run` and binds a pod, and the chart rendering what `kubectl
kustomize deploy/` renders for deploy/'s settings.

helm is the one `policyd dev build` builds from its Go module (or TEST_ASSET_HELM); a
missing one is built here or fails the test, never a skip: CI must run these.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from policyd.devcluster import ControlPlane
from policyd.devcluster.assets import HELM
from policyd.devcluster.build import resolve_binaries, resolve_tool
from policyd.kube.client import ApiError
from tests.e2e.helpers import Cluster, DaemonFactory
from tests.polling import wait_for

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "policyd"
DEPLOY = REPO / "deploy"
Obj = dict[str, Any]
Helm = Callable[..., subprocess.CompletedProcess[str]]

# Labels and annotations Helm's idiom adds to every object; deploy/ has none of them.
HELM_LABELS = ("app.kubernetes.io/instance", "app.kubernetes.io/managed-by",
               "app.kubernetes.io/version", "helm.sh/chart")


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """`helm ARGS...` with its own config, cache and data directories (no user's
    repositories or plugins), returning the finished process."""
    binary = resolve_tool(HELM)
    home = tmp_path_factory.mktemp("helm-home")
    env = {**os.environ, "HELM_CONFIG_HOME": str(home / "config"),
           "HELM_CACHE_HOME": str(home / "cache"), "HELM_DATA_HOME": str(home / "data")}

    def run(*args: str, check: bool = True, kubeconfig: Path | None = None
            ) -> subprocess.CompletedProcess[str]:
        argv = [str(binary), *args]
        if kubeconfig is not None:
            argv += ["--kubeconfig", str(kubeconfig)]
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
        if check and done.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} exited {done.returncode}:\n"
                                 f"{done.stdout}\n{done.stderr}")
        return done

    return run


def _docs(text: str) -> list[Obj]:
    return [d for d in YAML(typ="safe").load_all(text) if d]


def _values_file(directory: Path, values: Obj) -> Path:
    """A values file (JSON is YAML, so helm reads it as it is)."""
    path = directory / f"values-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(values))
    return path


def _policy(name: str) -> Obj:
    doc = YAML(typ="safe").load((REPO / "policies" / f"{name}.yaml").read_text())
    assert isinstance(doc, dict)
    return doc


def test_lint_passes(helm: Helm) -> None:
    # --strict: a warning would fail too (Helm's INFO about a missing icon does not).
    done = helm("lint", "--strict", str(CHART))
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


@pytest.mark.parametrize(("command", "setting", "named"), [
    ("lint", "replicsa=3", "'replicsa'"),
    ("template", "replicsa=3", "'replicsa'"),
    ("template", "profile.leaderElection.leaderElct=true", "'leaderElct'"),
    ("template", "webhook.certManger.enabled=false", "'certManger'"),
    # Set by the chart (the Lease its Role grants), so refused as a value.
    ("lint", "profile.leaderElection.resourceName=other", "'resourceName'"),
])
def test_a_typo_in_values_fails_naming_the_key(helm: Helm, command: str, setting: str,
                                               named: str) -> None:
    done = helm(command, "policyd", str(CHART), "--set", setting, check=False)
    assert done.returncode != 0
    assert named in done.stdout + done.stderr
    assert "additional properties" in done.stdout + done.stderr


def test_a_typo_inside_a_policy_value_fails_too(helm: Helm, tmp_path: Path) -> None:
    policy = _policy("hw-encrypt")
    policy["spec"]["pluginNmae"] = policy["spec"].pop("pluginName")
    values = _values_file(tmp_path, {"policies": {"hw-encrypt": policy}})
    done = helm("template", "policyd", str(CHART), "-f", str(values), check=False)
    assert done.returncode != 0
    assert "'pluginNmae'" in done.stderr


def test_replicas_without_leader_election_are_refused(helm: Helm) -> None:
    done = helm("template", "policyd", str(CHART),
                "--set", "profile.leaderElection.leaderElect=false", check=False)
    assert done.returncode != 0
    assert "replicas is 2 but profile.leaderElection.leaderElect is false" in done.stderr
    # One replica may run without it.
    helm("template", "policyd", str(CHART), "--set", "replicas=1",
         "--set", "profile.leaderElection.leaderElect=false")


def test_defaults_match_deploy_hardening(helm: Helm) -> None:
    objs = _docs(helm("template", "policyd", str(CHART), "-n", "policyd-system").stdout)
    deployment = next(o for o in objs if o["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    container = pod["containers"][0]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
        "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["image"] == "ghcr.io/policyd/policyd:0.1.0"
    # Off by default: no webhook, no ServiceMonitor (its CRD may not exist).
    kinds = {o["kind"] for o in objs}
    assert "MutatingWebhookConfiguration" not in kinds
    assert "ServiceMonitor" not in kinds


def test_service_monitor_scrapes_the_secure_port(helm: Helm) -> None:
    objs = _docs(helm("template", "pd", str(CHART), "-n", "mon-test",
                      "--set", "serviceMonitor.enabled=true",
                      "--set", "serviceMonitor.prometheusServiceAccount.name=prometheus",
                      "--set", "serviceMonitor.prometheusServiceAccount.namespace=mon"
                      ).stdout)
    monitor = next(o for o in objs if o["kind"] == "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    service = next(o for o in objs if o["kind"] == "Service")
    assert monitor["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["scheme"]) == ("https", "https")
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    binding = next(o for o in objs if o["kind"] == "ClusterRoleBinding"
                   and o["roleRef"]["name"] == "pd-policyd-metrics-reader")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "prometheus",
                                    "namespace": "mon"}]


def test_the_chart_readme_example_renders_a_profile_policyd_accepts(
    helm: Helm, tmp_path: Path,
) -> None:
    readme = (CHART / "README.md").read_text()
    (example,) = re.findall(r"```yaml\n(.*?)```", readme, re.DOTALL)
    values = tmp_path / "my-values.yaml"
    values.write_text(example)
    rendered = helm("template", "policyd", str(CHART), "-f", str(values),
                    "--show-only", "templates/configmap.yaml").stdout
    (configmap,) = _docs(rendered)
    etc = tmp_path / "etc"
    etc.mkdir()
    for key, text in configmap["data"].items():
        (etc / key).write_text(text)
    assert sorted(configmap["data"]) == ["ml-pool.yaml", "profile.yaml"]
    done = subprocess.run([sys.executable, "-m", "policyd", "check-config",
                           str(etc / "profile.yaml")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 files checked, no problems" in done.stdout


def _kubectl(control_plane: ControlPlane, *args: str, stdin: str | None = None
             ) -> subprocess.CompletedProcess[str]:
    kubectl = control_plane.binaries.kubectl
    assert kubectl is not None, "no kubectl binary (TEST_ASSET_KUBECTL / KUBEBUILDER_ASSETS)"
    return subprocess.run([str(kubectl), "--kubeconfig", str(control_plane.kubeconfig_path),
                           *args], input=stdin, capture_output=True, text=True, timeout=120)


def test_rendered_chart_passes_a_server_side_dry_run(
    helm: Helm, control_plane: ControlPlane, cluster: Cluster, tmp_path: Path,
) -> None:
    # Everything but what needs other projects' CRDs (cert-manager, the Prometheus
    # operator): the webhook with its CA given, the example policies as values.
    # The OpenReports CRDs asked for too (a dry run only: installed, they would stay).
    values = _values_file(tmp_path, {
        "policies": {name: _policy(name) for name in ("hw-encrypt", "env-prod")},
        "webhook": {"enabled": True, "certManager": {"enabled": False},
                    "caBundle": "Y2E="},
        "openReports": {"installCRDs": True, "intervalSeconds": 2.5, "maxResults": 50},
    })
    rendered = helm("template", "dry", str(CHART), "-n", cluster.ns, "--include-crds",
                    "-f", str(values)).stdout
    kinds = sorted(o["kind"] for o in _docs(rendered))
    assert "MutatingWebhookConfiguration" in kinds and "CustomResourceDefinition" in kinds
    crds = {o["metadata"]["name"]: o for o in _docs(rendered)
            if o["kind"] == "CustomResourceDefinition"}
    assert set(crds) == {"schedulingpolicies.policyd.io", "reports.openreports.io",
                         "clusterreports.openreports.io"}
    for name in ("reports.openreports.io", "clusterreports.openreports.io"):
        assert crds[name]["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    args = _scheduler_args(rendered)
    assert "--reports-interval=2.5" in args and "--reports-max-results=50" in args
    done = _kubectl(control_plane, "apply", "--server-side", "--dry-run=server",
                    "-n", cluster.ns, "-f", "-", stdin=rendered)
    assert done.returncode == 0, done.stderr
    # One line per object, each accepted by the API server's validation and admission.
    assert done.stdout.count("(server dry run)") == len(kinds), done.stdout


def _scheduler_args(rendered: str) -> list[str]:
    deployment = next(o for o in _docs(rendered) if o["kind"] == "Deployment"
                      and "webhook" not in o["metadata"]["name"])
    return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])


def test_openreports_defaults_install_no_crd_and_keep_the_daemons_defaults(
        helm: Helm) -> None:
    rendered = helm("template", "plain", str(CHART)).stdout
    assert "openreports.io" not in "".join(
        o["metadata"]["name"] for o in _docs(rendered)
        if o["kind"] == "CustomResourceDefinition")
    args = _scheduler_args(rendered)
    assert "--reports-interval=10" in args and "--reports-max-results=1000" in args
    for bad in ("openReports.maxResults=0", "openReports.intervalSeconds=-1",
                "openReports.installCRD=true"):
        done = helm("template", "plain", str(CHART), "--set", bad, check=False)
        assert done.returncode != 0 and "openReports" in done.stderr, (bad, done.stderr)


def _configmap_files(cluster: Cluster, namespace: str, name: str, into: Path) -> Path:
    """The installed ConfigMap laid out as the kubelet mounts it; its profile.yaml."""
    cm = cluster.client.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/{name}")
    into.mkdir()
    for key, text in cm["data"].items():
        (into / key).write_text(text)
    return into / "profile.yaml"


@pytest.fixture
def release(helm: Helm, control_plane: ControlPlane) -> Iterator[tuple[str, str]]:
    """A release name and namespace, uninstalled at the end whatever happened."""
    name, namespace = f"pd-{uuid.uuid4().hex[:6]}", f"helm-{uuid.uuid4().hex[:6]}"
    try:
        yield name, namespace
    finally:
        helm("uninstall", name, "-n", namespace, "--ignore-not-found",
             kubeconfig=control_plane.kubeconfig_path, check=False)
        # --create-namespace made it; Helm never deletes a namespace.
        _kubectl(control_plane, "delete", "namespace", namespace, "--ignore-not-found",
                 "--wait=false")


def test_install_upgrade_uninstall_and_the_installed_profile_schedules(
    helm: Helm, control_plane: ControlPlane, cluster: Cluster, daemons: DaemonFactory,
    release: tuple[str, str], tmp_path: Path,
) -> None:
    name, namespace = release
    fullname = f"{name}-policyd"
    scheduler = f"helm-{uuid.uuid4().hex[:6]}"
    kubeconfig = control_plane.kubeconfig_path
    values = _values_file(tmp_path, {
        "profile": {"policies": ["."], "clusterPolicies": True,
                    "leaderElection": {"leaderElect": True, "leaseDuration": "4s",
                                       "renewDeadline": "3s", "retryPeriod": "500ms"},
                    "profiles": [{"schedulerName": scheduler}]},
        "policies": {"hw-encrypt": _policy("hw-encrypt")},
    })
    helm("install", name, str(CHART), "-n", namespace, "--create-namespace",
         "-f", str(values), kubeconfig=kubeconfig)

    def get(path: str) -> Obj | None:
        try:
            return cluster.client.request("GET", path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    deployment_path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{fullname}"
    deployment = get(deployment_path)
    assert deployment is not None and deployment["spec"]["replicas"] == 2
    assert get(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{fullname}") is not None
    assert get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
               "schedulingpolicies.policyd.io") is not None

    # No kubelet runs the Deployment: run its configuration here instead, exactly as
    # the pod would see /etc/policyd, and watch it bind a pod of the chart's profile.
    profile = _configmap_files(cluster, namespace, f"{fullname}-config", tmp_path / "etc")
    daemons.start(profile)
    lease = wait_for(lambda: get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}"
                                 f"/leases/{fullname}"), 15, "the chart's Lease")
    assert lease["spec"]["holderIdentity"]
    cluster.node("plain")
    cluster.pod("payments", scheduler,
                annotations={"myorg.io/require-hw-encrypt": "true"})
    # The chart's policy (a value, a file of its ConfigMap) keeps the pod off the node
    # without hardware encryption, in its own words...
    def unschedulable() -> Obj | None:
        condition = cluster.condition("payments")
        return condition if condition and condition["status"] == "False" else None

    condition = wait_for(unschedulable, 15, "PodScheduled=False")
    assert "didn't offer hardware encryption" in condition["message"]
    # ...and the chart's profile binds it once a node offers it.
    cluster.node("secure", labels={"node.kubernetes.io/hw-encrypt": "true"})
    assert cluster.wait_bound("payments") == "secure"

    # Upgrade: a changed value changes the objects.
    helm("upgrade", name, str(CHART), "-n", namespace, "-f", str(values),
         "--set", "replicas=3", "--set", "resources.limits.memory=2Gi",
         kubeconfig=kubeconfig)
    deployment = get(deployment_path)
    assert deployment is not None and deployment["spec"]["replicas"] == 3
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["memory"] == "2Gi"
    history = json.loads(helm("history", name, "-n", namespace, "-o", "json",
                              kubeconfig=kubeconfig).stdout)
    assert [r["revision"] for r in history] == [1, 2]

    helm("uninstall", name, "-n", namespace, kubeconfig=kubeconfig)
    assert get(deployment_path) is None
    assert get(f"/api/v1/namespaces/{namespace}/configmaps/{fullname}-config") is None
    assert get(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{fullname}") is None
    # Helm never deletes what crds/ installed: SchedulingPolicy objects survive.
    assert get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
               "schedulingpolicies.policyd.io") is not None


# -- parity with deploy/ ---------------------------------------------------------------

def _is_label_map(key: str, value: Any) -> bool:
    """Labels, matchLabels, or a Service's selector (a plain map of labels)."""
    if not isinstance(value, dict):
        return False
    if key in ("labels", "matchLabels"):
        return True
    return key == "selector" and all(isinstance(v, str) for v in value.values())


def _without_helm_labels(node: Any) -> Any:
    """`node` with Helm's labels dropped from every label map and selector."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if _is_label_map(key, value):
                out[key] = {k: v for k, v in value.items() if k not in HELM_LABELS}
            else:
                out[key] = _without_helm_labels(value)
        return out
    if isinstance(node, list):
        return [_without_helm_labels(v) for v in node]
    return node


def _comparable(objs: list[Obj]) -> dict[tuple[str, str], Obj]:
    out = {}
    for obj in objs:
        obj = _without_helm_labels(obj)
        # An object's own labels select nothing (deploy/ labels some objects, e.g. the
        # cert-manager ones, not at all); the pod templates' and selectors' labels,
        # which do, are compared. Annotations are compared: Helm adds none.
        obj["metadata"].pop("labels", None)
        if obj["kind"] == "ConfigMap":
            # Compared as what the daemon reads: comments and key order are not kept
            # by values.
            obj["data"] = {k: YAML(typ="safe").load(v) for k, v in obj["data"].items()}
        out[(obj["kind"], obj["metadata"]["name"])] = obj
    return out


def test_chart_renders_what_kustomize_renders_for_deploys_settings(helm: Helm,
                                                                   tmp_path: Path) -> None:
    kubectl = resolve_binaries().kubectl
    assert kubectl is not None, "no kubectl binary (TEST_ASSET_KUBECTL / KUBEBUILDER_ASSETS)"

    def kustomize(path: Path) -> list[Obj]:
        return _docs(subprocess.run([str(kubectl), "kustomize", str(path)],
                                    capture_output=True, text=True, timeout=60,
                                    check=True).stdout)

    expected = kustomize(DEPLOY) + kustomize(DEPLOY / "webhook") + _docs(
        (DEPLOY / "webhook" / "certificate.yaml").read_text())
    # deploy/'s settings: its policies/*.yaml in the ConfigMap, the webhook (an overlay
    # there, with cert-manager's certificate.yaml beside it) enabled.
    values = _values_file(tmp_path, {
        "policies": {p.stem: _policy(p.stem) for p in sorted((REPO / "policies").glob("*.yaml"))},
        "webhook": {"enabled": True},
    })
    rendered = _docs(helm("template", "policyd", str(CHART), "-n", "policyd-system",
                          "--include-crds", "-f", str(values)).stdout)

    # Intended differences, each with its reason:
    # 1. The Namespace: Helm's idiom is the release namespace (`-n ... --create-namespace`),
    #    which a chart does not own; NOTES.txt gives the restricted Pod Security label.
    namespaces = [o for o in expected if o["kind"] == "Namespace"]
    assert [o["metadata"]["name"] for o in namespaces] == ["policyd-system"]
    expected = [o for o in expected if o["kind"] != "Namespace"]
    # 2. priorityClassName: the chart's default is system-cluster-critical (a scheduler
    #    must not be preempted by the pods it schedules); deploy/ sets none.
    scheduler = next(o for o in rendered if o["kind"] == "Deployment"
                     and o["metadata"]["name"] == "policyd")
    assert scheduler["spec"]["template"]["spec"].pop("priorityClassName") == \
        "system-cluster-critical"
    # 3. Selectors also match app.kubernetes.io/instance, so two releases in one
    #    namespace never select each other's pods: dropped with Helm's other labels.
    want, got = _comparable(expected), _comparable(rendered)
    assert sorted(got) == sorted(want)
    for key in sorted(want):
        assert got[key] == want[key], key
