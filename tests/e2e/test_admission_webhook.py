"""The admission webhook registered with the real kube-apiserver (issue 29): a
MutatingWebhookConfiguration with its caBundle, as deploy/webhook/ registers it; pods
created with the real kubectl in a namespace labelled in get the profile's scheduler
name and the projected node affinity (and the AdmissionReview's warnings reach
kubectl), a pod of another namespace is untouched, the webhook stopped does not stop
pods from being created, and a rotated certificate keeps serving."""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from policyd.daemon.webhook import OPT_IN_LABEL, AdmissionProfile, Reviewer
from policyd.daemon.webhook_server import WebhookOptions, WebhookServer
from policyd.devcluster import ControlPlane, resolve_binaries
from policyd.devcluster.ports import free_ports
from policyd.kube.client import ApiError
from policyd.pki import self_signed_serving_cert
from policyd.policy import load_policies
from tests.e2e.helpers import Cluster
from tests.polling import wait_for

ROOT = Path(__file__).resolve().parents[2]
PROFILE = "secure"
WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
HW = {"key": "node.kubernetes.io/hw-encrypt", "operator": "In", "values": ["true"]}

Obj = dict[str, Any]



class Webhook:
    """The webhook process's server, in this process, with rotatable files."""

    def __init__(self, tmp: Path) -> None:
        policies, problems = load_policies([ROOT / "policies" / "hw-encrypt.yaml"])
        assert problems == []
        self.reviewer = Reviewer({PROFILE: AdmissionProfile(PROFILE, tuple(policies))})
        self.cert, self.key = tmp / "tls.crt", tmp / "tls.key"
        self.rotate()
        self.port = free_ports(1)[0]
        self.server: WebhookServer | None = None

    def rotate(self) -> bytes:
        cert, key = self_signed_serving_cert(("127.0.0.1",))
        self.cert.write_bytes(cert)
        self.key.write_bytes(key)
        return cert

    def start(self) -> None:
        self.server = WebhookServer(WebhookOptions("127.0.0.1", self.port, self.cert,
                                                   self.key), self.reviewer)
        self.server.start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


def configuration(name: str, port: int, ca: bytes) -> Obj:
    """As deploy/webhook/webhook.yaml, with a URL instead of the Service."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration", "metadata": {"name": name},
        "webhooks": [{
            "name": f"{PROFILE}.policyd.io",
            "clientConfig": {"url": f"https://127.0.0.1:{port}/mutate/{PROFILE}",
                             "caBundle": base64.b64encode(ca).decode()},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["pods"], "scope": "Namespaced"}],
            "namespaceSelector": {"matchLabels": {OPT_IN_LABEL: PROFILE}},
            "failurePolicy": "Ignore", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "timeoutSeconds": 5,
            "reinvocationPolicy": "IfNeeded", "matchPolicy": "Equivalent",
        }]}


@pytest.fixture
def webhook(tmp_path: Path) -> Iterator[Webhook]:
    w = Webhook(tmp_path)
    w.start()
    try:
        yield w
    finally:
        w.stop()


def _kubectl_create(control_plane: ControlPlane, namespace: str, name: str
                    ) -> subprocess.CompletedProcess[str]:
    kubectl = resolve_binaries().kubectl
    assert kubectl is not None, "kubectl was not built"
    manifest = json.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace,
                     "annotations": {"myorg.io/require-hw-encrypt": "true"}},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}})
    return subprocess.run([str(kubectl), "--kubeconfig", str(control_plane.kubeconfig_path),
                           "create", "-f", "-"], input=manifest, capture_output=True,
                          text=True, timeout=60)


def _pod(cluster: Cluster, namespace: str, name: str) -> Obj:
    return cluster.client.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")


def _affinity(pod: Obj) -> list[Obj] | None:
    node = (pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    return required.get("nodeSelectorTerms")


def test_pods_of_an_opted_in_namespace_are_admitted_with_the_profiles_rules(
        control_plane: ControlPlane, cluster: Cluster, webhook: Webhook) -> None:
    other = f"{cluster.ns}-other"
    cluster.client.request("PATCH", f"/api/v1/namespaces/{cluster.ns}",
                           body={"metadata": {"labels": {OPT_IN_LABEL: PROFILE}}},
                           content_type="application/merge-patch+json")
    cluster.client.request("POST", "/api/v1/namespaces", body={
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}})
    cluster.created.append(f"/api/v1/namespaces/{other}")
    config = f"policyd-{cluster.ns}"
    cluster._create_cluster_object(WEBHOOKS, configuration(config, webhook.port,
                                                            webhook.cert.read_bytes()))

    def created_in(namespace: str, name: str) -> subprocess.CompletedProcess[str]:
        # The API server picks a new webhook configuration up within a moment.
        def done() -> subprocess.CompletedProcess[str] | None:
            r = _kubectl_create(control_plane, namespace, name)
            assert r.returncode == 0, r.stderr
            if namespace == other or _pod(cluster, namespace, name)["spec"].get(
                    "schedulerName") == PROFILE:
                return r
            cluster.client.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/"
                                   f"{name}", query={"gracePeriodSeconds": 0})
            wait_for(lambda: _gone(cluster, namespace, name), 10, "pod deleted")
            return None
        found: subprocess.CompletedProcess[str] = wait_for(done, 20,
                                                           f"{namespace}/{name} admitted")
        return found

    r = created_in(cluster.ns, "payments")
    pod = _pod(cluster, cluster.ns, "payments")
    assert pod["spec"]["schedulerName"] == PROFILE
    assert _affinity(pod) == [{"matchExpressions": [HW]}]
    assert pod["metadata"]["annotations"]["policyd.io/autoscaler-visible-rules"] \
        .startswith("hw-encrypt/")
    # kubectl shows the AdmissionReview's warnings.
    assert "Warning: policyd: spec.schedulerName set to secure" in r.stderr

    created_in(other, "untouched")
    cluster.created.append(f"/api/v1/namespaces/{other}/pods/untouched")  # before its ns
    pod = _pod(cluster, other, "untouched")
    assert pod["spec"]["schedulerName"] == "default-scheduler"
    assert _affinity(pod) is None

    # Rotated: the files change, the server serves the new pair, the configuration's
    # caBundle follows (as cert-manager's CA injector does), pods are still admitted.
    new_ca = webhook.rotate()
    assert webhook.server is not None and webhook.server.cert is not None
    assert webhook.server.cert.check()
    current = cluster.client.request("GET", f"{WEBHOOKS}/{config}")
    current["webhooks"][0]["clientConfig"]["caBundle"] = base64.b64encode(new_ca).decode()
    cluster.client.request("PUT", f"{WEBHOOKS}/{config}", body=current)
    created_in(cluster.ns, "after-rotation")
    assert _affinity(_pod(cluster, cluster.ns, "after-rotation")) == [
        {"matchExpressions": [HW]}]

    # Down: failurePolicy Ignore, pods are created as they are.
    webhook.stop()
    r = _kubectl_create(control_plane, cluster.ns, "while-down")
    assert r.returncode == 0, r.stderr
    pod = _pod(cluster, cluster.ns, "while-down")
    assert pod["spec"]["schedulerName"] == "default-scheduler"
    assert _affinity(pod) is None


def _gone(cluster: Cluster, namespace: str, name: str) -> bool:
    try:
        _pod(cluster, namespace, name)
    except ApiError as exc:
        return exc.status == 404
    return False


def test_the_deploy_manifests_are_accepted_as_they_are(cluster: Cluster) -> None:
    """deploy/webhook/ (its kustomization's resources) created with dryRun=All, moved
    to the test's namespace: the API server's own validation of every field."""
    from ruamel.yaml import YAML

    base = ROOT / "deploy" / "webhook"
    kustomization = YAML(typ="safe").load((base / "kustomization.yaml").read_text())
    paths = {"Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
             "Service": "/api/v1/namespaces/{ns}/services",
             "MutatingWebhookConfiguration": WEBHOOKS}
    kinds = []
    for name in kustomization["resources"]:
        for doc in YAML(typ="safe").load_all((base / name).read_text()):
            if "namespace" in doc["metadata"]:
                doc["metadata"]["namespace"] = cluster.ns
            for hook in doc.get("webhooks", []):
                hook["clientConfig"]["service"]["namespace"] = cluster.ns
            cluster.client.request("POST", paths[doc["kind"]].format(ns=cluster.ns),
                                   body=doc, query={"dryRun": "All"})
            kinds.append(doc["kind"])
    assert sorted(kinds) == ["Deployment", "MutatingWebhookConfiguration", "Service"]
