"""DRA objects on the real API server (issue 28): the control plane's resource claim
controller turns a pod's ResourceClaimTemplate into a ResourceClaim, and `policyd run`'s
informers hold the DeviceClass, the ResourceSlice and that claim in `cluster.dra`,
following their updates and deletes. On a server that does not serve resource.k8s.io
the DRA informers stay empty and synced, and the daemon schedules as before.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from policyd.daemon.run import Daemon, RunOptions, connect, load_config
from policyd.devcluster import ControlPlane
from policyd.devcluster.kubeconfig import kube_client_from
from policyd.kube.client import ApiError, KubeClient
from tests.api_reads import get_or_none
from tests.builders import make_node
from tests.polling import wait_for

Obj = dict[str, Any]
RESOURCE = "/apis/resource.k8s.io/v1"


def _start_daemon(cp: ControlPlane, workdir: Path, scheduler: str) -> Daemon:
    """`policyd run` with the default profile, in this process, no leader election."""
    profile = workdir / f"{scheduler}.yaml"
    profile.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
                       "leaderElection:\n  leaderElect: false\n"
                       f"profiles:\n- schedulerName: {scheduler}\n")
    options = RunOptions(config=profile, kubeconfig=str(cp.kubeconfig_path),
                         metrics_bind_address="127.0.0.1:0", secure_port=0,
                         shutdown_grace=5.0)
    loaded = load_config(options)
    daemon = Daemon(options, loaded, connect(options, loaded.settings))
    daemon.start()
    try:
        wait_for(daemon.synced, 30, "policyd run's caches synced")
    except BaseException:
        daemon.shutdown()
        raise
    return daemon


def _delete(kube: KubeClient, path: str) -> None:
    try:
        kube.request("DELETE", path)
    except ApiError as exc:
        if exc.status != 404:
            raise


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[KubeClient]:
    client = kube_client_from(control_plane.kubeconfig_path)
    try:
        yield client
    finally:
        client.close()


def test_templates_become_claims_and_the_daemon_holds_all_three(
        control_plane: ControlPlane, kube: KubeClient, tmp_path: Path) -> None:
    token = uuid.uuid4().hex[:8]
    ns, driver = f"dra-{token}", f"gpu-{token}.example.com"
    class_name, slice_name = f"gpu-{token}", f"node-{token}-gpu"
    kube.request("POST", "/api/v1/namespaces", body={
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    daemon = _start_daemon(control_plane, tmp_path, f"policyd-dra-{token}")
    dra = daemon.scheduler.cluster.dra
    try:
        kube.request("POST", f"{RESOURCE}/deviceclasses", body={
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": class_name},
            "spec": {"selectors": [{"cel": {"expression":
                                            f'device.driver == "{driver}"'}}]}})
        kube.request("POST", f"{RESOURCE}/resourceslices", body={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": slice_name},
            "spec": {"driver": driver, "nodeName": f"node-{token}",
                     "pool": {"name": f"node-{token}", "generation": 1,
                              "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-0",
                                  "attributes": {"model": {"string": "a100"}}}]}})
        kube.request("POST", f"{RESOURCE}/namespaces/{ns}/resourceclaimtemplates", body={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": class_name}}]}}}})
        # Nobody schedules it: it stays pending while its claim is made.
        kube.request("POST", f"/api/v1/namespaces/{ns}/pods", body={
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer"},
            "spec": {"schedulerName": f"nobody-{token}",
                     "resourceClaims": [{"name": "gpu",
                                         "resourceClaimTemplateName": "one-gpu"}],
                     "containers": [{"name": "c", "image": "trainer",
                                     "resources": {"claims": [{"name": "gpu"}]}}]}})

        # The resource claim controller: a claim owned by the pod, named in its status.
        def generated() -> str | None:
            pod = get_or_none(kube, f"/api/v1/namespaces/{ns}/pods/trainer") or {}
            statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or []
            names = [s.get("resourceClaimName") for s in statuses if s.get("name") == "gpu"]
            return names[0] if names and names[0] else None

        claim_name = wait_for(generated, 30, "the resource claim controller's claim")
        claim = get_or_none(kube, f"{RESOURCE}/namespaces/{ns}/resourceclaims/{claim_name}")
        assert claim is not None
        owner = claim["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"]) == ("Pod", "trainer")

        # The daemon's store holds all three, each as the API server has it.
        key = f"{ns}/{claim_name}"
        wait_for(lambda: dra.claims.get(key) is not None and class_name in dra.classes
                 and slice_name in dra.slices, 15, "the DRA objects in the daemon's store")
        stored = dra.claims.get(key)
        assert stored is not None and stored["kind"] == "ResourceClaim"
        assert stored["apiVersion"] == "resource.k8s.io/v1"
        assert stored["metadata"]["uid"] == claim["metadata"]["uid"]
        assert [s["metadata"]["name"] for s in dra.slices.on_node(f"node-{token}")] \
            == [slice_name]
        assert dra.slices.in_pool(driver, f"node-{token}")[0]["metadata"]["name"] \
            == slice_name
        assert dra.classes.for_extended_resource(
            f"deviceclass.resource.kubernetes.io/{class_name}") is not None

        # Updates follow: a newer claim version replaces the stored one.
        kube.request("PATCH", f"{RESOURCE}/namespaces/{ns}/resourceclaims/{claim_name}",
                     body={"metadata": {"labels": {"seen": "yes"}}},
                     content_type="application/merge-patch+json")
        wait_for(lambda: ((dra.claims.get(key) or {}).get("metadata", {})
                          .get("labels") or {}).get("seen") == "yes", 15,
                 "the claim's update in the store")

        # Deletes too: the class and the slice, then the claim once its pod is done
        # (the controller deletes a generated claim its pod no longer needs; a deleted
        # pod's claim is the garbage collector's, which does not run here).
        _delete(kube, f"{RESOURCE}/deviceclasses/{class_name}")
        _delete(kube, f"{RESOURCE}/resourceslices/{slice_name}")
        wait_for(lambda: class_name not in dra.classes and slice_name not in dra.slices,
                 15, "the class and slice deletes in the store")
        kube.request("PATCH", f"/api/v1/namespaces/{ns}/pods/trainer/status",
                     body={"status": {"phase": "Failed"}},
                     content_type="application/merge-patch+json")
        wait_for(lambda: key not in dra.claims, 30,
                 "the done pod's claim deleted by the controller, and gone from the store")
        assert dra.claims.reserved_for_pod(str(claim["metadata"]["uid"])) == frozenset()
    finally:
        daemon.shutdown()
        _delete(kube, f"{RESOURCE}/deviceclasses/{class_name}")
        _delete(kube, f"{RESOURCE}/resourceslices/{slice_name}")
        _delete(kube, f"/api/v1/namespaces/{ns}")


def test_a_server_without_resource_k8s_io_does_not_hold_the_daemon_back(
        tmp_path: Path) -> None:
    """Its own control plane with the group turned off: the DRA lists answer 404, the
    informers are synced empty, and a pod is still bound."""
    cp = ControlPlane(extra_apiserver_args=["--runtime-config=resource.k8s.io/v1=false"],
                      controller_manager=False)
    cp.start()
    kube = kube_client_from(cp.kubeconfig_path)
    daemon: Daemon | None = None
    try:
        with pytest.raises(ApiError) as gone:
            kube.request("GET", f"{RESOURCE}/resourceclaims")
        assert gone.value.status == 404
        daemon = _start_daemon(cp, tmp_path, "policyd")
        absent = [i.name for i in daemon.informers() if i.absent]
        # (PodGroups of both APIs are not served by this server either.)
        assert sorted(absent) == ["DeviceClass", "ResourceClaim", "ResourceSlice",
                                  "podgroups.scheduling.k8s.io",
                                  "podgroups.scheduling.x-k8s.io"]
        kube.request("POST", "/api/v1/nodes", body=make_node("n1").capacity(
            cpu="4", memory="8Gi", pods="110").ready().raw())
        kube.request("POST", "/api/v1/namespaces/default/pods", body={
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
            "spec": {"schedulerName": "policyd",
                     "containers": [{"name": "c", "image": "web"}]}})
        node = wait_for(lambda: ((get_or_none(kube, "/api/v1/namespaces/default/pods/web") or {})
                                 .get("spec") or {}).get("nodeName"), 30, "web bound")
        assert node == "n1"
        assert daemon.synced()
    finally:
        if daemon is not None:
            daemon.shutdown()
        kube.close()
        cp.stop()
