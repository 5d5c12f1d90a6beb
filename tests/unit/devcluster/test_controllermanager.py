"""kube-controller-manager's command line, RBAC grants and readiness check."""

from __future__ import annotations

from pathlib import Path

from policyd.devcluster.controllermanager import (
    CONTROLLER_ROLES,
    CONTROLLERS,
    GATED_CONTROLLERS,
    USER,
    VOLUME_CONTROLLERS,
    controller_manager_args,
    controllers_for,
    controllers_running,
    role_bindings,
)


def _flags(argv: list[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in argv[1:])


def test_only_the_volume_and_resource_claim_controllers_run() -> None:
    flags = _flags(controller_manager_args(Path("/bin/kcm"), Path("/kc"), 4242))
    controllers = flags["controllers"].split(",")
    assert set(controllers) == {
        "persistentvolume-binder-controller",
        "persistentvolume-protection-controller",
        "persistentvolumeclaim-protection-controller",
        "ephemeral-volume-controller",
        # Pods' ResourceClaimTemplates become ResourceClaims, as in a real cluster.
        "resourceclaim-controller",
    }
    assert set(VOLUME_CONTROLLERS) < set(controllers)
    # No "*": that would add every default controller, the node lifecycle one (which
    # taints kubelet-less Nodes unreachable) among them.
    assert "*" not in controllers and "node-lifecycle-controller" not in controllers
    assert flags["use-service-account-credentials"] == "false"
    assert flags["leader-elect"] == "false"
    assert flags["bind-address"] == "127.0.0.1" and flags["secure-port"] == "4242"
    assert flags["kubeconfig"] == "/kc"
    # Claims whose PV comes later bind within seconds, not on the 15 s default sync.
    assert flags["pvclaimbinder-sync-period"] == "2s"
    assert flags["kube-api-qps"] == "200" and flags["kube-api-burst"] == "400"
    assert "/healthz" in flags["authorization-always-allow-paths"].split(",")


def test_each_controller_gets_its_bootstrap_role_as_the_kcm_user() -> None:
    bindings = role_bindings()
    assert len(bindings) == len(CONTROLLERS)
    gated = [c for names in GATED_CONTROLLERS.values() for c in names]
    assert set(CONTROLLER_ROLES) == {*CONTROLLERS, *gated}
    roles = {b["roleRef"]["name"] for b in bindings}
    assert "system:controller:resource-claim-controller" in roles
    assert len({b["metadata"]["name"] for b in bindings}) == len(bindings)
    roles = {b["roleRef"]["name"] for b in bindings}
    assert "system:controller:persistent-volume-binder" in roles
    assert all(r.startswith("system:controller:") for r in roles)
    for binding in bindings:
        assert binding["subjects"] == [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}]


def test_ready_only_when_every_controller_has_its_check() -> None:
    # Before the controllers are built, /healthz has no named checks at all.
    assert not controllers_running("[+]ping ok\nhealthz check passed\n", VOLUME_CONTROLLERS)
    body = "[+]leaderElection ok\n" + "".join(f"[+]{c} ok\n" for c in VOLUME_CONTROLLERS)
    assert controllers_running(body + "healthz check passed\n", VOLUME_CONTROLLERS)
    failing = body.replace(f"[+]{VOLUME_CONTROLLERS[0]} ok",
                           f"[-]{VOLUME_CONTROLLERS[0]} failed: reason withheld")
    assert not controllers_running(failing, VOLUME_CONTROLLERS)


def test_generic_workload_adds_the_podgroup_protection_controller_and_its_gates() -> None:
    """With GenericWorkload on, the API server's PodGroupProtection admission puts a
    finalizer on every PodGroup that only this controller removes."""
    assert controllers_for({}) == CONTROLLERS
    assert controllers_for({"GenericWorkload": False}) == CONTROLLERS
    gates = {"GenericWorkload": True, "GangScheduling": True}
    controllers = controllers_for(gates)
    assert controllers == (*CONTROLLERS, "podgroup-protection-controller")
    flags = _flags(controller_manager_args(Path("/bin/kcm"), Path("/kc"), 1, controllers,
                                           gates))
    assert flags["controllers"].endswith(",podgroup-protection-controller")
    assert flags["feature-gates"] == "GenericWorkload=true,GangScheduling=true"
    roles = {b["roleRef"]["name"] for b in role_bindings(controllers)}
    assert "system:controller:podgroup-protection-controller" in roles
    # No gates: no flag at all (the binary's defaults).
    assert "feature-gates" not in _flags(controller_manager_args(Path("/k"), Path("/c"), 1))
