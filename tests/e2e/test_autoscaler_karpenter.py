"""A real autoscaler provisions for a policyd pod (issue 29): Karpenter with its kwok
provider (built from its Go module like the control plane, `policyd.devcluster.karpenter`)
against the real API server, two NodePools whose templates differ only in the label the
hw-encrypt policy requires, and policyd (`policyd run`, in-process) scheduling.

- Admitted (the webhook's code path, `policyd.admission`), the pod carries the policy as
  required node affinity; policyd finds no node and marks it Unschedulable; Karpenter
  adds a node from the `encrypted` pool, never from `plain` (which it would prefer:
  higher weight), and policyd binds the pod to that node.
- Not admitted, the same pod says nothing Karpenter can read: it adds a node from
  `plain`, and policyd refuses that node (the policy still holds), so the pod stays
  pending: the failure issue 29 describes, shown on the real autoscaler.

Cluster-autoscaler is not here: its module is not served by the Go proxy this project
builds from (see docs/autoscalers.md).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from policyd.admission.mutation import admit
from policyd.admission.projection import project_pod
from policyd.devcluster import ControlPlane
from policyd.devcluster.assets import KARPENTER_VERSION
from policyd.devcluster.karpenter import (
    NODECLAIMS,
    NODECLASSES,
    NODEPOOLS,
    PROVIDER_PREFIX,
    Karpenter,
    crd_documents,
    delete_karpenter_objects,
    install_crds,
    module_dir,
    start_karpenter,
)
from policyd.devcluster.kubeconfig import kube_client_from
from policyd.kube.client import KubeClient
from policyd.model.records import pod_from_dict
from policyd.policy import load_policies
from tests.e2e.helpers import Cluster, DaemonFactory, pod_body, write_profile
from tests.polling import wait_for

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "policies" / "hw-encrypt.yaml"
HW_ANNOTATION = {"myorg.io/require-hw-encrypt": "true"}
HW_LABEL = "node.kubernetes.io/hw-encrypt"
HW_REQUIREMENT = {"key": HW_LABEL, "operator": "In", "values": ["true"]}
REFUSAL = "node(s) didn't offer hardware encryption"  # the policy's filter message
NODEPOOL_LABEL = "karpenter.sh/nodepool"
NODECLASS = "policyd-e2e"
# One instance type (4 CPUs in the provider's table) for both pools, so both could hold
# the pod: only the template label tells them apart.
INSTANCE_TYPE = "c-4x-amd64-linux"
# From the first Unschedulable to the bind: Karpenter's batch window, the NodeClaim's
# launch, the Node's registration (its startup taint removed), policyd's retry.
PROVISION_TIMEOUT = 120.0

Obj = dict[str, Any]


def nodeclass_body() -> Obj:
    return {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass",
            "metadata": {"name": NODECLASS}}


def nodepool_body(name: str, weight: int, labels: dict[str, str]) -> Obj:
    """A pool of on-demand `INSTANCE_TYPE` nodes carrying `labels`; nodes are never
    expired or consolidated away while the test looks at them."""
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {
            "weight": weight,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass",
                                     "name": NODECLASS},
                    "requirements": [
                        {"key": "node.kubernetes.io/instance-type", "operator": "In",
                         "values": [INSTANCE_TYPE]},
                        {"key": "karpenter.sh/capacity-type", "operator": "In",
                         "values": ["on-demand"]},
                    ],
                    "expireAfter": "Never",
                },
            },
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"},
            "limits": {"cpu": "16"},
        },
    }


class Autoscaler:
    """The test's Karpenter: CRDs, node class and pools first, the process on `start()`,
    and on `close()` nothing left behind (no Nodes, no Karpenter objects)."""

    def __init__(self, control_plane: ControlPlane, workdir: Path) -> None:
        self.kubeconfig = control_plane.kubeconfig_path
        self.workdir = workdir
        self.client: KubeClient = kube_client_from(self.kubeconfig)
        self.karpenter: Karpenter | None = None

    def install(self) -> None:
        install_crds(self.client, crd_documents(module_dir()))
        delete_karpenter_objects(self.client)  # an interrupted earlier run's
        self.client.request("POST", NODECLASSES, body=nodeclass_body())
        # `plain` weighs more: with nothing in the pod to choose by, Karpenter takes it.
        self.client.request("POST", NODEPOOLS, body=nodepool_body(
            "encrypted", 10, {HW_LABEL: "true"}))
        self.client.request("POST", NODEPOOLS, body=nodepool_body("plain", 50, {}))

    def start(self) -> Karpenter:
        self.karpenter = start_karpenter(self.kubeconfig, self.workdir)
        return self.karpenter

    def nodeclaims(self) -> list[Obj]:
        return list(self.client.request("GET", NODECLAIMS).get("items") or [])

    def log(self) -> str:
        return "" if self.karpenter is None else self.karpenter.process.log_tail(40)

    def wait(self, check: Callable[[], Any], timeout: float, what: str) -> Any:
        """`wait_for`, with Karpenter's log in the failure (what it thought of the pod)."""
        try:
            return wait_for(check, timeout, what, interval=0.25)
        except AssertionError as err:
            raise AssertionError(f"{err}\n--- karpenter log (tail) ---\n{self.log()}") from None

    def close(self) -> None:
        try:
            if self.karpenter is not None:
                self.karpenter.stop()  # first: running, it would recreate what we delete
            delete_karpenter_objects(self.client)
        finally:
            self.client.close()


@pytest.fixture
def autoscaler(control_plane: ControlPlane, cluster: Cluster, tmp_path: Path
               ) -> Iterator[Autoscaler]:
    scaler = Autoscaler(control_plane, tmp_path)
    try:
        scaler.install()
        yield scaler
    finally:
        scaler.close()


@pytest.fixture
def scheduler(daemons: DaemonFactory, cluster: Cluster, tmp_path: Path) -> str:
    """A policyd daemon with the hw-encrypt policy alone; its scheduler name."""
    (tmp_path / "policies").mkdir()
    shutil.copy(POLICY, tmp_path / "policies" / POLICY.name)
    name = f"policyd-{cluster.ns}"
    daemons.start(write_profile(tmp_path, name))
    return name


def _pod(cluster: Cluster, scheduler: str) -> Obj:
    pod = pod_body("secure", scheduler, cpu="1", memory="1Gi", annotations=HW_ANNOTATION)
    pod["metadata"]["namespace"] = cluster.ns
    return pod


def _unschedulable(cluster: Cluster, name: str) -> Obj | None:
    cond = cluster.condition(name)
    return cond if cond and cond.get("reason") == "Unschedulable" else None


def _pool(claim: Obj) -> str:
    return str(claim["metadata"].get("labels", {}).get(NODEPOOL_LABEL))


def test_karpenter_adds_a_node_from_the_labelled_pool_and_policyd_binds_the_pod_there(
        cluster: Cluster, autoscaler: Autoscaler, scheduler: str) -> None:
    policies, problems = load_policies([POLICY])
    assert problems == []
    pod = _pod(cluster, scheduler)
    admitted = admit(pod, project_pod(pod_from_dict(pod), policies), scheduler_name=scheduler)
    terms = admitted.pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [HW_REQUIREMENT]}]
    cluster.client.request("POST", f"/api/v1/namespaces/{cluster.ns}/pods",
                           body=admitted.pod)
    # No node at all: policyd says Unschedulable, the condition Karpenter acts on.
    wait_for(lambda: _unschedulable(cluster, "secure"), 15, "PodScheduled=False")
    assert autoscaler.nodeclaims() == []

    karpenter = autoscaler.start()
    assert f'version="{KARPENTER_VERSION}"' in karpenter.metrics()  # the pinned build
    node = autoscaler.wait(lambda: cluster.node_of("secure"), PROVISION_TIMEOUT,
                           "the pod bound to a node Karpenter added")

    # Karpenter records the Node in the NodeClaim's status just after it registers the
    # Node, which is what lets policyd bind: the status may trail the bind a little.
    claims = autoscaler.wait(
        lambda: (lambda cs: cs if all((c.get("status") or {}).get("nodeName") for c in cs)
                 else None)(autoscaler.nodeclaims()),
        15, "the NodeClaim naming its Node")
    assert [_pool(c) for c in claims] == ["encrypted"], claims
    assert claims[0]["status"]["nodeName"] == node
    labels = cluster.client.request("GET", f"/api/v1/nodes/{node}")["metadata"]["labels"]
    assert labels[HW_LABEL] == "true"
    assert labels[NODEPOOL_LABEL] == "encrypted"
    spec = cluster.client.request("GET", f"/api/v1/nodes/{node}")["spec"]
    assert spec["providerID"] == f"{PROVIDER_PREFIX}{node}"
    scheduled = wait_for(lambda: cluster.events(pod="secure", reason="Scheduled"), 10,
                         "the Scheduled event")
    assert [(e["source"]["component"], e["message"]) for e in scheduled] == [
        (scheduler, f"Successfully assigned {cluster.ns}/secure to {node}")]


def test_without_admission_karpenter_adds_a_node_policyd_must_refuse(
        cluster: Cluster, autoscaler: Autoscaler, scheduler: str) -> None:
    # The same pod, not admitted: the policy applies, but nothing in the pod says so.
    cluster.client.request("POST", f"/api/v1/namespaces/{cluster.ns}/pods",
                           body=_pod(cluster, scheduler))
    wait_for(lambda: _unschedulable(cluster, "secure"), 15, "PodScheduled=False")

    autoscaler.start()
    claim = autoscaler.wait(
        lambda: next((c for c in autoscaler.nodeclaims()
                      if (c.get("status") or {}).get("nodeName")), None),
        PROVISION_TIMEOUT, "a NodeClaim with its Node")
    assert _pool(claim) == "plain"
    node = claim["status"]["nodeName"]
    # Registered (startup taint gone), policyd tries it and refuses it for the policy.
    cond = autoscaler.wait(
        lambda: (lambda c: c if c and REFUSAL in c.get("message", "") else None)(
            cluster.condition("secure")),
        PROVISION_TIMEOUT, "policyd refusing the node Karpenter added")
    assert cond["message"].startswith(f"0/1 nodes are available: 1 {REFUSAL}"), cond
    assert cluster.node_of("secure") is None
    assert [_pool(c) for c in autoscaler.nodeclaims()] == ["plain"]
    labels = cluster.client.request("GET", f"/api/v1/nodes/{node}")["metadata"]["labels"]
    assert HW_LABEL not in labels
