"""Pods with volumes end to end (issue 16): `policyd run` as a subprocess, the real API
server and the real PV controller of kube-controller-manager, and what the API server
shows afterwards.

One daemon serves the whole file, with two profiles: `VOL` (upstream's defaults, a
PreBind that waits up to 600 s for the PV controller) and `SHORT` (VolumeBindingArgs
bindTimeoutSeconds: 5, for the PreBind timeout). Every test has its own namespace,
StorageClasses with unique names (so no PV of one test can match a claim of another)
and starts with no Nodes, so `0/N nodes` counts only its own.

The daemon sees a test's objects through its informers a moment after the API server
has them; a test that expects a failure message therefore waits until the pod's
PodScheduled condition carries exactly that message (a pod scheduled before its claim
reached the daemon would first say the claim is missing, then be retried), and then
checks the FailedScheduling event says the same.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from policyd.devcluster import ControlPlane
from policyd.devcluster.ports import free_ports
from tests.e2e.helpers import (
    Cluster,
    ProcessFactory,
    claim_volumes,
    scrape,
    write_profile,
)
from tests.e2e.provisioner import HOSTNAME, SELECTED_NODE, Provisioner, volume_name
from tests.polling import wait_for

Obj = dict[str, Any]

VOL = "policyd-volumes"
SHORT = "policyd-volumes-short"
BIND_TIMEOUT = 5

ZONE = "topology.kubernetes.io/zone"
RWOP = ("ReadWriteOncePod",)

UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
NO_VOLUME_ZONE = "node(s) had no available volume zone"
RWOP_IN_USE = ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod "
               "access mode already in-use by another pod")
MAX_VOLUME_COUNT = "node(s) exceed max volume count"
PRE_BIND_TIMED_OUT = ('running PreBind plugin "VolumeBinding": binding volumes: '
                      "context deadline exceeded")


class Policyd:
    """The file's `policyd run` process and its plain-HTTP port."""

    def __init__(self, processes: ProcessFactory, port: int) -> None:
        self.processes = processes
        self.port = port

    @property
    def proc(self) -> subprocess.Popen[bytes]:
        return self.processes.procs[0]

    def log(self) -> str:
        return self.processes.log(0)

    def debug_queue(self) -> Obj:
        status, body = scrape(self.port, "/debug/queue")
        assert status == 200, body
        return dict(json.loads(body))

    def queued(self, uid: str) -> Obj | None:
        """The pod's /debug/queue entry (None: not in the queue)."""
        return next((p for p in self.debug_queue()["pods"] if p["uid"] == uid), None)


@pytest.fixture(scope="module")
def policyd(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Policyd]:
    tmp = tmp_path_factory.mktemp("volumes")
    profile = write_profile(tmp, VOL, policies=None, extra=(
        f"- schedulerName: {SHORT}\n"
        "  pluginConfig:\n"
        "  - name: VolumeBinding\n"
        "    args:\n"
        f"      bindTimeoutSeconds: {BIND_TIMEOUT}\n"))
    processes = ProcessFactory(control_plane.kubeconfig_path, tmp)
    port = free_ports(1)[0]
    try:
        processes.start("--config", str(profile), "--no-leader-elect", "-v", "2",
                        "--metrics-bind-address", f"127.0.0.1:{port}")
        daemon = Policyd(processes, port)
        wait_for(lambda: scrape(port, "/readyz")[0] == 200 or daemon.proc.poll() is not None,
                 60, "policyd ready")
        assert daemon.proc.poll() is None, daemon.log()
        yield daemon
        assert daemon.proc.poll() is None, f"policyd exited:\n{daemon.log()}"
    finally:
        processes.stop_all()


@pytest.fixture
def names() -> Iterator[str]:
    """A suffix that makes a test's StorageClasses, PVs and drivers unique."""
    yield uuid.uuid4().hex[:8]


def _condition_message(cluster: Cluster, pod: str) -> str:
    return str((cluster.condition(pod) or {}).get("message") or "")


def not_helpful(n: int) -> str:
    """DefaultPreemption's part of the message when every node's rejection is final."""
    return (f"no new claims to deallocate, preemption: 0/{n} nodes are available: {n} "
            "Preemption is not helpful for scheduling.")


def no_victims(n: int) -> str:
    """DefaultPreemption's part when evicting could help but no pod has a lower priority."""
    return (f"no new claims to deallocate, preemption: 0/{n} nodes are available: {n} No "
            "preemption victims found for incoming pod.")


def assert_unschedulable(cluster: Cluster, pod: str, message: str, *,
                         reason: str = "Unschedulable", timeout: float = 20.0) -> None:
    """The pod's PodScheduled condition comes to say exactly `message` (False, with
    `reason`), a FailedScheduling event says it too, and the pod is not bound."""
    try:
        wait_for(lambda: _condition_message(cluster, pod) == message, timeout,
                 f"{pod}: {message!r}")
    except AssertionError:
        raise AssertionError(f"{pod}: condition says {_condition_message(cluster, pod)!r}, "
                             f"expected {message!r}") from None
    cond = cluster.condition(pod) or {}
    assert (cond.get("status"), cond.get("reason")) == ("False", reason), cond
    events = wait_for(lambda: [e for e in cluster.events(pod=pod, reason="FailedScheduling")
                               if e["message"] == message], 10, f"{pod}: the event")
    assert events[0]["type"] == "Warning"
    assert cluster.node_of(pod) is None


def _pv_node(pv: Obj) -> list[str]:
    """The hostnames a PV's node affinity allows."""
    terms = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    return [v for t in terms for e in t["matchExpressions"] if e["key"] == HOSTNAME
            for v in e["values"]]


def _claim_pv(cluster: Cluster, claim: Obj) -> Obj:
    """The PV a Bound claim is bound to, checked to be Bound to it in return."""
    pv = cluster.get_pv(claim["spec"]["volumeName"])
    assert pv is not None
    assert pv["status"]["phase"] == "Bound"
    assert pv["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
    return pv


# 1. WaitForFirstConsumer local volumes, StatefulSet-shaped.

def test_stateful_set_pods_land_where_their_local_volumes_are(
        cluster: Cluster, policyd: Policyd, names: str) -> None:
    sc = f"local-{names}"
    cluster.storage_class(sc)
    for node in ("n1", "n2", "n3", "n4"):
        cluster.node(node)
    # Three volumes on two of the four nodes: every pod must go to n1 or n3, two of
    # them to n1, and no two claims may take the same volume.
    volumes = {f"pv-{names}-a": "n1", f"pv-{names}-b": "n1", f"pv-{names}-c": "n3"}
    for name, node in volumes.items():
        cluster.pv(name, sc, node=node, size="2Gi" if name.endswith("b") else "1Gi")
    for i in range(3):  # as volumeClaimTemplates name them
        cluster.pvc(f"data-web-{i}", sc)
    for i in range(3):
        cluster.pod(f"web-{i}", VOL, labels={"app": "web"},
                    volumes=claim_volumes(f"data-web-{i}"))

    taken: dict[str, str] = {}
    for i in range(3):
        node = cluster.wait_bound(f"web-{i}", 40)
        # PreBind waited for the PV controller: the claim was Bound before the pod was.
        claim = cluster.claim_bound(f"data-web-{i}")
        assert claim is not None, cluster.get_pvc(f"data-web-{i}")
        assert claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
        pv = _claim_pv(cluster, claim)
        assert _pv_node(pv) == [node]
        taken[pv["metadata"]["name"]] = node
    assert taken == volumes


# 2. WaitForFirstConsumer with dynamic provisioning.

def test_a_provisioned_volume_is_made_on_the_pods_node(
        cluster: Cluster, policyd: Policyd, names: str) -> None:
    driver = f"{names}.csi.policyd.test"
    cluster.storage_class(driver, provisioner=driver)
    cluster.node("n1")
    cluster.node("n2")
    with Provisioner(cluster.client, driver) as prov:
        claim = cluster.pvc("data", driver, size="3Gi")
        cluster.created.append(f"/api/v1/persistentvolumes/{volume_name(claim)}")
        cluster.pod("app", VOL, volumes=claim_volumes("data"))
        node = cluster.wait_bound("app", 40)
        assert prov.errors == []
    bound = cluster.claim_bound("data")
    assert bound is not None, cluster.get_pvc("data")
    assert bound["metadata"]["annotations"][SELECTED_NODE] == node
    assert bound["spec"]["volumeName"] == volume_name(claim)
    pv = _claim_pv(cluster, bound)
    assert _pv_node(pv) == [node]
    assert pv["spec"]["capacity"]["storage"] == "3Gi"


# 3. Immediate binding, claim not bound yet.

def test_an_unbound_immediate_claim_waits_for_the_pv_controller(
        cluster: Cluster, policyd: Policyd, names: str) -> None:
    sc = f"immediate-{names}"
    cluster.storage_class(sc, binding_mode="Immediate")
    cluster.node("n1")
    cluster.node("n2")
    cluster.pvc("data", sc)
    pod = cluster.pod("app", VOL, volumes=claim_volumes("data"))
    # VolumeBinding's PreFilter refuses it for good, so DynamicResources' PreFilter never
    # ran and its PostFilter ends the message with "not found", stopping PostFilter
    # before preemption: kube-scheduler v1.36's text, word for word.
    assert_unschedulable(cluster, "app",
                         f"0/2 nodes are available: {UNBOUND_IMMEDIATE}. not found")
    # Parked until an event can help, not retried on a timer.
    entry = wait_for(lambda: (e := policyd.queued(pod["metadata"]["uid"]))
                     and e["queue"] == "unschedulable" and e, 10, "app unschedulable")
    assert entry["unschedulablePlugins"] == ["VolumeBinding"]

    # A PV that matches: the PV controller binds the claim on its next periodic claim
    # sync (every 2 s in the dev control plane: a new PV does not wake it), and the
    # claim's update brings the pod back at once, not the five-minute flush of
    # unschedulable pods.
    started = time.monotonic()
    cluster.pv(f"pv-{names}", sc)
    claim = cluster.wait_claim_bound("data", 20)
    claim_bound = time.monotonic()
    node = cluster.wait_bound("app", 10)
    assert time.monotonic() - claim_bound < 5, "the claim's update did not requeue the pod"
    assert time.monotonic() - started < 20
    assert node in ("n1", "n2")
    assert claim["spec"]["volumeName"] == f"pv-{names}"


# 4. VolumeZone.

def test_a_zonal_volume_keeps_its_pod_in_its_zone(
        cluster: Cluster, policyd: Policyd, names: str) -> None:
    sc = f"zonal-{names}"
    cluster.storage_class(sc)
    cluster.pv(f"pv-{names}", sc, labels={ZONE: "zone-b"})
    cluster.pvc("data", sc, volume_name=f"pv-{names}")
    cluster.wait_claim_bound("data")
    cluster.node("a1", labels={ZONE: "zone-a"})
    cluster.node("a2", labels={ZONE: "zone-a"})
    cluster.pod("app", VOL, volumes=claim_volumes("data"))
    assert_unschedulable(cluster, "app", f"0/2 nodes are available: 2 {NO_VOLUME_ZONE}. "
                         f"{not_helpful(2)}", reason="Unschedulable")
    cluster.node("b1", labels={ZONE: "zone-b"})
    assert cluster.wait_bound("app", 15) == "b1"


# 5. VolumeRestrictions: ReadWriteOncePod.

def test_a_read_write_once_pod_claim_has_one_user(
        cluster: Cluster, policyd: Policyd, names: str) -> None:
    sc = f"rwop-{names}"
    cluster.storage_class(sc)
    cluster.pv(f"pv-{names}", sc, access_modes=RWOP)
    cluster.pvc("data", sc, access_modes=RWOP, volume_name=f"pv-{names}")
    cluster.wait_claim_bound("data")
    cluster.node("n1")
    cluster.node("n2")
    cluster.pod("first", VOL, volumes=claim_volumes("data"))
    cluster.wait_bound("first", 20)
    cluster.pod("second", VOL, volumes=claim_volumes("data"))
    # The claim's user has the pod's own priority: no victim anywhere.
    assert_unschedulable(cluster, "second", f"0/2 nodes are available: 2 {RWOP_IN_USE}. "
                         f"{no_victims(2)}")
    # Its user gone, the claim is free (VolumeRestrictions listens to pod deletes).
    cluster.delete_pod("first")
    assert cluster.wait_bound("second", 15) in ("n1", "n2")


# 6. NodeVolumeLimits: CSINode allocatable counts.

def test_a_node_at_its_csi_volume_limit_takes_no_more(
        cluster: Cluster, policyd: Policyd, names: str) -> None:
    driver = f"{names}.csi.policyd.test"
    sc = f"csi-{names}"
    cluster.storage_class(sc, provisioner=driver)
    cluster.node("full")
    cluster.csinode("full", {driver: 1})
    claims = ("old", "new", "third")
    for claim in claims:
        cluster.pv(f"pv-{names}-{claim}", sc, csi_driver=driver)
        cluster.pvc(claim, sc, volume_name=f"pv-{names}-{claim}")
    # Already on the full node, using its one CSI volume.
    cluster.pod("old", VOL, nodeName="full", volumes=claim_volumes("old"))
    for claim in claims:
        cluster.wait_claim_bound(claim)
    cluster.pod("new", VOL, volumes=claim_volumes("new"))
    assert_unschedulable(cluster, "new", f"0/1 nodes are available: 1 {MAX_VOLUME_COUNT}. "
                         f"{no_victims(1)}")

    cluster.node("roomy")
    cluster.csinode("roomy", {driver: 5})
    assert cluster.wait_bound("new", 15) == "roomy"
    # With both nodes there from the start, the full one is still refused.
    cluster.pod("third", VOL, volumes=claim_volumes("third"))
    assert cluster.wait_bound("third", 15) == "roomy"


# 7. PreBind gives up after bindTimeoutSeconds; the pod is retried.

def test_a_pre_bind_timeout_requeues_the_pod_without_a_leaked_assumption(
        cluster: Cluster, policyd: Policyd, names: str) -> None:
    driver = f"{names}.unserved.policyd.test"
    cluster.storage_class(driver, provisioner=driver)
    cluster.node("n1", cpu="1")
    cluster.pvc("data", driver)
    started = time.monotonic()
    # Most of the node's cpu: an assumption left behind would keep the retry off it.
    cluster.pod("app", SHORT, cpu="600m", volumes=claim_volumes("data"))
    # PreBind asked for a volume on the chosen node, then waits for one.
    wait_for(lambda: (cluster.get_pvc("data") or {}).get("metadata", {})
             .get("annotations", {}).get(SELECTED_NODE) == "n1", 20, "selected-node n1")
    assert_unschedulable(cluster, "app", PRE_BIND_TIMED_OUT, reason="SchedulerError")
    assert time.monotonic() - started >= BIND_TIMEOUT

    # Nothing is left assumed: with a provisioner serving the class at last, a retry
    # binds the pod on the node its claim was annotated with.
    with Provisioner(cluster.client, driver) as prov:
        claim = cluster.get_pvc("data") or {}
        cluster.created.append(f"/api/v1/persistentvolumes/{volume_name(claim)}")
        assert cluster.wait_bound("app", 30) == "n1"
        assert prov.errors == []
    bound = cluster.claim_bound("data")
    assert bound is not None and bound["spec"]["volumeName"] == volume_name(claim)
    log = policyd.log()
    assert (f"binding {cluster.ns}/app to n1 failed: PreBind failed: "
            f"{PRE_BIND_TIMED_OUT}") in log, log[-3000:]


# 8. The pod deleted while PreBind waits.

def test_a_pod_deleted_in_pre_bind_leaves_nothing_assumed(
        cluster: Cluster, policyd: Policyd, names: str) -> None:
    unserved = f"{names}.unserved.policyd.test"
    local = f"local-{names}"
    cluster.storage_class(unserved, provisioner=unserved)
    cluster.storage_class(local)
    cluster.node("n1", cpu="1")
    cluster.pv(f"pv-{names}", local, node="n1")
    cluster.pvc("doomed-data", unserved)
    cluster.pvc("next-data", local)
    # The default profile: PreBind would wait 600 s for a volume nobody provisions.
    cluster.pod("doomed", VOL, cpu="600m", volumes=claim_volumes("doomed-data"))
    wait_for(lambda: (cluster.get_pvc("doomed-data") or {}).get("metadata", {})
             .get("annotations", {}).get(SELECTED_NODE) == "n1", 20, "selected-node n1")
    assert cluster.node_of("doomed") is None
    cluster.delete_pod("doomed")

    gave_up = f"binding {cluster.ns}/doomed to n1 given up"
    wait_for(lambda: gave_up in policyd.log(), 10, "the daemon giving up")
    assert policyd.proc.poll() is None
    assert scrape(policyd.port, "/healthz")[0] == 200
    # Upstream's binder does not take back what it wrote: the claim keeps its node.
    claim = cluster.get_pvc("doomed-data") or {}
    assert claim["metadata"]["annotations"][SELECTED_NODE] == "n1"
    assert claim["status"]["phase"] == "Pending"

    # The doomed pod's cpu and claim are no longer held on n1: a pod needing most of
    # the node, with a claim of its own, fits there.
    cluster.pod("next", VOL, cpu="600m", volumes=claim_volumes("next-data"))
    assert cluster.wait_bound("next", 20) == "n1"
    assert cluster.claim_bound("next-data") is not None
