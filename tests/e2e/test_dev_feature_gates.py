"""A control plane started with GenericWorkload and GangScheduling on (issue 30): the
API server serves scheduling.k8s.io/v1alpha2 PodGroups and keeps a pod's
spec.schedulingGroup, kube-controller-manager lets a deleted PodGroup go, and the
kube-scheduler the control plane starts holds a gang that cannot reach its minCount,
then binds it all when room appears.

The texts kube-scheduler v1.36.3 writes are asserted exactly: they are what policyd's
own gang scheduling is compared against.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from policyd.devcluster import ControlPlane
from policyd.kube.client import ApiError
from tests.e2e.helpers import Cluster, fresh_cluster
from tests.polling import wait_for

Obj = dict[str, Any]
GATES = {"GenericWorkload": True, "GangScheduling": True}
V1ALPHA2 = "/apis/scheduling.k8s.io/v1alpha2"
DEFAULT_SCHEDULER = "default-scheduler"

# kube-scheduler v1.36.3, observed: each pod of the gang that fits but is held for the
# quorum (the GangScheduling plugin's Permit Wait, turned into the pod group cycle's
# failure), and the pod no node fits, whose message is the usual FitError with
# DefaultPreemption's postfilter part.
GANG_WAITING = ("pod group is unschedulable, waiting for minCount pods from a gang to be "
                "scheduled, one or more plugins asked to wait and no plugin rejected pod")
NO_FIT_ONE_NODE = ("0/1 nodes are available: 1 Insufficient cpu. no new claims to "
                   "deallocate, preemption: 0/1 nodes are available: 1 No preemption "
                   "victims found for incoming pod.")
# The PodGroup's condition while held, and once scheduled (reason Scheduled, message "").
GROUP_UNSCHEDULABLE = {"type": "PodGroupScheduled", "status": "False",
                       "reason": "Unschedulable", "message": "pod group is unschedulable"}
GROUP_SCHEDULED = {"type": "PodGroupScheduled", "status": "True", "reason": "Scheduled",
                   "message": ""}
PROTECTION_FINALIZER = "scheduling.k8s.io/podgroup-protection"


@pytest.fixture(scope="module")
def gated_plane() -> Iterator[ControlPlane]:
    with ControlPlane(feature_gates=GATES) as cp:
        yield cp


@pytest.fixture
def gated(gated_plane: ControlPlane) -> Iterator[Cluster]:
    with fresh_cluster(gated_plane, "gates") as c:
        yield c


def _podgroup(c: Cluster, name: str, min_count: int) -> Obj:
    return c.client.request("POST", f"{V1ALPHA2}/namespaces/{c.ns}/podgroups", body={
        "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}})


def _group_condition(c: Cluster, name: str) -> Obj | None:
    group = c.client.request("GET", f"{V1ALPHA2}/namespaces/{c.ns}/podgroups/{name}")
    for cond in (group.get("status") or {}).get("conditions") or []:
        if cond["type"] == "PodGroupScheduled":
            return {k: cond.get(k) for k in ("type", "status", "reason", "message")}
    return None


def _member(c: Cluster, name: str, group: str, cpu: str = "1") -> Obj:
    return c.pod(name, DEFAULT_SCHEDULER, cpu=cpu, schedulingGroup={"podGroupName": group})


def test_the_gates_reach_every_component(gated_plane: ControlPlane) -> None:
    assert gated_plane.api_versions == ["scheduling.k8s.io/v1alpha2"]
    assert gated_plane.describe_gates() == (
        "feature gates: GenericWorkload=true,GangScheduling=true "
        "(API versions enabled: scheduling.k8s.io/v1alpha2)")
    manager = gated_plane.kube_controller_manager
    assert manager is not None and "podgroup-protection-controller" in manager.controllers
    state = gated_plane.to_state()
    assert state["feature_gates"] == GATES


def test_podgroups_are_served_and_protected(gated: Cluster) -> None:
    resources = {r["name"] for r in gated.client.request("GET", V1ALPHA2)["resources"]}
    assert {"podgroups", "podgroups/status", "workloads"} <= resources
    group = _podgroup(gated, "served", 3)
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    # PodGroupProtection admission (on with GenericWorkload) adds the finalizer ...
    assert group["metadata"]["finalizers"] == [PROTECTION_FINALIZER]
    # ... and with no pod naming the group, podgroup-protection-controller removes it
    # on delete: without that controller the group would stay Terminating.
    gated.client.request("DELETE", f"{V1ALPHA2}/namespaces/{gated.ns}/podgroups/served")

    def gone() -> bool:
        try:
            gated.client.request("GET", f"{V1ALPHA2}/namespaces/{gated.ns}/podgroups/served")
        except ApiError as exc:
            return exc.status == 404
        return False

    wait_for(gone, 20, "the deleted PodGroup gone")


def test_a_pods_scheduling_group_is_kept_with_the_gate_and_dropped_without(
    gated: Cluster, cluster: Cluster
) -> None:
    kept = gated.pod("member", "nobody", schedulingGroup={"podGroupName": "g"})
    assert kept["spec"]["schedulingGroup"] == {"podGroupName": "g"}
    # The session's control plane runs with the default gates: the API server drops
    # the field (a disabled gate's field is cleared on create) and serves no v1alpha2.
    dropped = cluster.pod("member", "nobody", schedulingGroup={"podGroupName": "g"})
    assert "schedulingGroup" not in dropped["spec"]
    with pytest.raises(ApiError) as err:
        cluster.client.request("GET", V1ALPHA2)
    assert err.value.status == 404


def test_kube_scheduler_holds_a_gang_short_of_min_count_then_binds_it_all(
    gated_plane: ControlPlane, gated: Cluster
) -> None:
    scheduler = gated_plane.start_kube_scheduler()
    try:
        assert scheduler.feature_gates == GATES
        gated.node("n1", cpu="2")  # room for 2 of the 3 one-CPU pods
        _podgroup(gated, "gang", 3)
        pods = ["w0", "w1", "w2"]
        for name in pods:
            _member(gated, name, "gang")

        wait_for(lambda: _group_condition(gated, "gang") == GROUP_UNSCHEDULABLE, 30,
                 "PodGroupScheduled=False")

        def messages() -> Counter[str] | None:
            found = Counter(str((gated.condition(p) or {}).get("message")) for p in pods)
            return found if sum(found.values()) == 3 and "None" not in found else None

        # Which pod is the one that does not fit depends on the order of the cycle;
        # two are held, none bound.
        assert wait_for(messages, 30, "each pod's PodScheduled=False") == Counter(
            {GANG_WAITING: 2, NO_FIT_ONE_NODE: 1})
        for name in pods:
            cond = gated.condition(name) or {}
            assert (cond.get("status"), cond.get("reason")) == ("False", "Unschedulable")
            assert gated.node_of(name) is None
        events = Counter(e["message"] for e in gated.events(reason="FailedScheduling")
                         if e["type"] == "Warning"
                         and e.get("reportingComponent") == DEFAULT_SCHEDULER)
        assert set(events) == {GANG_WAITING, NO_FIT_ONE_NODE}

        gated.node("n2", cpu="2")
        placed = {name: gated.wait_bound(name, timeout=30) for name in pods}
        assert sorted(Counter(placed.values()).values()) == [1, 2]
        wait_for(lambda: _group_condition(gated, "gang") == GROUP_SCHEDULED, 30,
                 "PodGroupScheduled=True")
        for name in pods:
            scheduled = [e["message"] for e in gated.events(pod=name, reason="Scheduled")]
            assert scheduled == [f"Successfully assigned {gated.ns}/{name} to {placed[name]}"]
    finally:
        scheduler.stop()
        for name in ("w0", "w1", "w2"):
            gated.delete_pod(name)


def test_a_scheduler_with_gang_scheduling_off_places_the_members_alone(
    gated_plane: ControlPlane, gated: Cluster
) -> None:
    """The scheduler's own --feature-gates wins over the control plane's: with
    GangScheduling off (GenericWorkload still on) the group is not held: each pod that
    fits is bound."""
    scheduler = gated_plane.start_kube_scheduler(
        extra_args=["--feature-gates=GangScheduling=false"])
    try:
        assert scheduler.feature_gates == {"GenericWorkload": True, "GangScheduling": False}
        gated.node("n1", cpu="2")
        _podgroup(gated, "solo", 3)
        pods = ["s0", "s1", "s2"]
        for name in pods:
            _member(gated, name, "solo")

        def outcome() -> list[Obj | None] | None:
            """The conditions of the pods not bound, once two are."""
            bound = [p for p in pods if gated.node_of(p)]
            rest = [gated.condition(p) for p in pods if p not in bound]
            # Observed once (1 run in 5): the unbound pod's PodScheduled condition
            # read with no message while another was not bound yet; not explained,
            # so wait for the message rather than take the first read.
            settled = all(c and c.get("message") for c in rest)
            return rest if len(bound) == 2 and settled else None

        (unbound,) = wait_for(outcome, 30, "two bound, one unschedulable")
        assert unbound is not None
        assert (unbound["status"], unbound["reason"], unbound["message"]) == (
            "False", "Unschedulable", NO_FIT_ONE_NODE)
        # Observed: GenericWorkload alone still runs the pod group cycle, and without the
        # GangScheduling plugin nothing holds minCount: the group counts as scheduled
        # with 2 of its 3 pods placed.
        assert wait_for(lambda: _group_condition(gated, "solo"), 30,
                        "PodGroupScheduled") == GROUP_SCHEDULED
    finally:
        scheduler.stop()
        for name in ("s0", "s1", "s2"):
            gated.delete_pod(name)
