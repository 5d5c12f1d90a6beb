"""kube-controller-manager next to the local API server, for the real PV and resource
claim controllers.

Volume scheduling is only half the scheduler's work: after PreBind writes a PV's
claimRef or a claim's selected-node annotation, the PersistentVolume controller of
kube-controller-manager binds the claim (or asks an external provisioner for a volume).
Tests of volume scheduling need that real controller, so the local control plane runs
kube-controller-manager, but only with the controllers volumes need:

- ``persistentvolume-binder-controller``: binds claims and volumes, and marks claims of
  an external provisioner's StorageClass for it (``volume.kubernetes.io/storage-provisioner``);
- ``persistentvolume-protection-controller`` and
  ``persistentvolumeclaim-protection-controller``: the API server's default
  StorageObjectInUseProtection admission puts finalizers on every PV and PVC, and only
  these controllers remove them: without them a deleted claim stays Terminating forever;
- ``ephemeral-volume-controller``: creates the claim of a generic ephemeral volume.

Device scheduling (DRA) has the same split: a pod names a ResourceClaimTemplate, and
``resourceclaim-controller`` creates the pod's ResourceClaim from it (and records it in
the pod's status.resourceClaimStatuses), which the scheduler then allocates; it also
removes a pod's reservation once the pod is gone and deletes the claims it made. So it
runs too.

With the GenericWorkload gate on, ``podgroup-protection-controller`` runs too: the
API server's PodGroupProtection admission (on by default, active with the gate) puts a
finalizer on every scheduling.k8s.io PodGroup, and only that controller removes it once
no active pod names the group; without it a deleted PodGroup stays Terminating forever,
as a claim would without the PVC protection controller. (The other controllers v1.36
runs for that API, the Job controller's Workload half under WorkloadWithJob and the
resource claim controller's PodGroup claims under DRAWorkloadResourceClaims, are parts
of controllers that do not run here or already do.)

Everything else stays off. The node lifecycle controller above all: the test clusters'
Nodes have no kubelet, it would mark them all unreachable and taint them, and every
other test would stop scheduling. Nor the garbage collector (it watches every resource
type for cascading deletion, which no test relies on), the namespace controller or the
service account controllers.

Credentials: a client certificate for the user ``system:kube-controller-manager`` with
``--use-service-account-credentials=false``, so every controller uses that one client.
The bootstrap role of that user mostly reads; each running controller's own bootstrap
role (``system:controller:...``, what it would have under its own ServiceAccount) is
bound to the user when the controller manager starts (`role_bindings`). Nothing more:
the controllers keep upstream's least privilege, and a missing permission shows up here
as it would in a real cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from policyd.devcluster.featuregates import format_gates
from policyd.devcluster.ports import LOOPBACK
from policyd.devcluster.probe import Component, http_get, unverified_context
from policyd.devcluster.process import ManagedProcess

USER = "system:kube-controller-manager"

# Controller name (v1.36, cmd/kube-controller-manager/names) -> its bootstrap ClusterRole
# (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/controller_policy.go).
CONTROLLER_ROLES: dict[str, str] = {
    "persistentvolume-binder-controller": "system:controller:persistent-volume-binder",
    "persistentvolume-protection-controller": "system:controller:pv-protection-controller",
    "persistentvolumeclaim-protection-controller":
        "system:controller:pvc-protection-controller",
    "ephemeral-volume-controller": "system:controller:ephemeral-volume-controller",
    "resourceclaim-controller": "system:controller:resource-claim-controller",
    "podgroup-protection-controller": "system:controller:podgroup-protection-controller",
}
VOLUME_CONTROLLERS: tuple[str, ...] = (
    "persistentvolume-binder-controller", "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller", "ephemeral-volume-controller")
DRA_CONTROLLERS: tuple[str, ...] = ("resourceclaim-controller",)
# What the local control plane runs.
CONTROLLERS: tuple[str, ...] = (*VOLUME_CONTROLLERS, *DRA_CONTROLLERS)
# Run as well when their gate is on (v1.36: cmd/kube-controller-manager/app/scheduling.go,
# requiredFeatureGates; its bootstrap role exists only with the gate on too).
GATED_CONTROLLERS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "GenericWorkload": ("podgroup-protection-controller",),
})


def controllers_for(gates: Mapping[str, bool]) -> tuple[str, ...]:
    """The controllers the local control plane runs with these gates."""
    return CONTROLLERS + tuple(c for gate, names in GATED_CONTROLLERS.items()
                               if gates.get(gate) for c in names)

_BINDING_PREFIX = "policyd-dev:kube-controller-manager:"


def role_bindings(controllers: Sequence[str] = CONTROLLERS) -> list[dict[str, Any]]:
    """ClusterRoleBindings granting `USER` the bootstrap role of each controller."""
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": _BINDING_PREFIX + name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": CONTROLLER_ROLES[name],
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}
            ],
        }
        for name in controllers
    ]


def controller_manager_args(
    binary: Path, kubeconfig: Path, port: int, controllers: Sequence[str] = CONTROLLERS,
    feature_gates: Mapping[str, bool] | None = None,
) -> list[str]:
    """The command line of kube-controller-manager for the local control plane."""
    gates = feature_gates or {}
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        # Only these run; names not given are off, including every default controller.
        f"--controllers={','.join(controllers)}",
        # A claim whose PV appears later is bound on the PV controller's next periodic
        # sync (a new PV does not wake it): every 2 s here, not 15 s, so tests and
        # demos see claims bind in seconds.
        "--pvclaimbinder-sync-period=2s",
        # Its client's default 20 requests/s (bindings and events share them) would
        # make the PV controller the slowest part of a test that binds many claims.
        "--kube-api-qps=200",
        "--kube-api-burst=400",
        "--use-service-account-credentials=false",
        # One controller manager per control plane: an election would only delay the
        # start by a lease acquisition.
        "--leader-elect=false",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={port}",
        # As for kube-scheduler: no delegated authentication of its own endpoints; health
        # and metrics open to anyone on loopback.
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
        *([f"--feature-gates={format_gates(gates)}"] if gates else []),
    ]


def controllers_running(healthz_verbose: str, controllers: Sequence[str]) -> bool:
    """Whether `/healthz?verbose` lists every controller as healthy.

    The controller manager answers /healthz before it has built its controllers (with no
    checks, so plainly "ok"); each controller adds its named check once it is built, so
    only the named lines say the controllers are there.
    """
    healthy = {
        line[len("[+]"):].rsplit(" ", 1)[0]
        for line in healthz_verbose.splitlines()
        if line.startswith("[+]") and line.endswith(" ok")
    }
    return all(name in healthy for name in controllers)


class KubeControllerManager(Component):
    """A kube-controller-manager process started against a `ControlPlane`."""

    name = "kube-controller-manager"

    def __init__(
        self, process: ManagedProcess, port: int, controllers: Sequence[str] = CONTROLLERS
    ) -> None:
        super().__init__(process, port)
        self.controllers = tuple(controllers)

    def ready(self) -> bool:
        status, body = http_get(
            f"https://{LOOPBACK}:{self.port}/healthz?verbose", unverified_context()
        )
        return status == 200 and controllers_running(body, self.controllers)
