"""The engine never drops a pod without a word, says what kube-scheduler says when there
are no nodes, and the offline inputs never count a Node or a Pod twice."""

from __future__ import annotations

import pytest

from policyd.config.plugins import default_framework
from policyd.engine.cycle import schedule_one
from policyd.engine.inputs import PodFile, check_unique_nodes, check_unique_pods, merge_pods
from policyd.engine.profiles import serving_profiles, unserved_reason
from policyd.engine.simulate import simulate, skip_reason
from policyd.errors import InputFileError
from policyd.framework.fit_error import NO_NODES_AVAILABLE
from policyd.framework.runtime import Framework
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod
from tests.builders import PodBuilder, make_node, make_pod

NO_NODES = "no nodes available to schedule pods"


@pytest.fixture(scope="module")
def fw() -> Framework:
    return default_framework(seed=1)


def _cluster(*nodes: str) -> ClusterState:
    return ClusterState([make_node(n).capacity(cpu="4", memory="8Gi", pods="10").obj()
                         for n in nodes])


# -- no nodes -----------------------------------------------------------------------------

def test_no_nodes_message_is_upstreams_err_no_nodes_available() -> None:
    assert NO_NODES_AVAILABLE == NO_NODES


@pytest.mark.parametrize("mode", ["fast", "reference", "explain"])
@pytest.mark.parametrize("pod", [
    make_pod("plain").obj(),
    make_pod("big").req(cpu="64").obj(),
    # a pod PreFilter would reject (unknown PVC) and one a filter would: no plugin runs
    make_pod("pvc").pvc("missing").obj(),
    make_pod("sel").node_selector(zone="a").obj(),
])
def test_every_path_says_no_nodes_available(fw: Framework, mode: str, pod: Pod) -> None:
    r = schedule_one(fw, pod, ClusterState(), reference=mode == "reference",
                     explain=mode == "explain")
    assert r.node is None and r.unschedulable
    assert r.message == NO_NODES


def test_simulate_on_no_nodes_reports_each_pod_with_the_message(fw: Framework) -> None:
    pods = [make_pod(f"p{i}").scheduler("policyd").obj() for i in range(3)]
    sim = simulate({"policyd": fw}, ClusterState(), pods)
    assert [r.message for r in sim.results] == [NO_NODES] * 3
    assert sim.scheduled == 0


def test_daemon_failed_scheduling_uses_the_message(fw: Framework) -> None:
    from kubernetes import client as k8s

    from policyd.daemon.coordinator import Scheduler
    from policyd.daemon.event_recorder import EventSink
    from policyd.daemon.metrics import Metrics
    from policyd.kube.client import ConnectionSettings, KubeClient

    kube = KubeClient(k8s.ApiClient(k8s.Configuration()), ConnectionSettings())
    metrics = Metrics()
    sched = Scheduler(kube, {"policyd": default_framework([])}, metrics=metrics,
                      events=EventSink(kube, metrics, "test"))
    try:
        sched.on_pod_add(make_pod("lonely").uid("uid-lonely").scheduler("policyd").raw())
        qp = sched.queue.pop(timeout=0)
        assert qp is not None
        result = sched.schedule(qp)
        assert result is not None and result.message == NO_NODES
        assert sched.throttle.last_message("uid-lonely") == NO_NODES
    finally:
        sched.shutdown(0)
        kube.close()


# -- which pods a simulation tries ----------------------------------------------------------

def test_default_profile_also_serves_default_scheduler_pods(fw: Framework) -> None:
    served = serving_profiles({"policyd": fw}, default_profile=True)
    assert served == {"policyd": fw, "default-scheduler": fw}
    # A profile file serves exactly its schedulerNames, even a single one.
    assert serving_profiles({"policyd": fw}, default_profile=False) == {"policyd": fw}
    # A profile file that names default-scheduler itself keeps its own framework.
    other = default_framework(seed=2)
    assert serving_profiles({"default-scheduler": other, "policyd": fw},
                            default_profile=True)["default-scheduler"] is other


@pytest.mark.parametrize(("pod", "reason"), [
    (make_pod("unset").obj(),
     'schedulerName "default-scheduler" (unset in the pod) is not served by this profile '
     "(profiles: a, b)"),
    (make_pod("dflt").scheduler("default-scheduler").obj(),
     'schedulerName "default-scheduler" is not served by this profile (profiles: a, b)'),
    (make_pod("other").scheduler("volcano").obj(),
     'schedulerName "volcano" is not served by this profile (profiles: a, b)'),
    (make_pod("mine").scheduler("b").obj(), None),
])
def test_unserved_reason(fw: Framework, pod: Pod, reason: str | None) -> None:
    assert unserved_reason(pod, {"b": fw, "a": fw}) == reason


@pytest.mark.parametrize(("builder", "reason"), [
    (make_pod("deleting").scheduler("policyd").set(
        "metadata.deletionTimestamp", "2026-01-01T00:00:00Z"),
     "being deleted (metadata.deletionTimestamp is set)"),
    (make_pod("bound").scheduler("policyd").node("n1"),
     "already bound to node n1 (spec.nodeName is set)"),
    (make_pod("done").scheduler("policyd").phase("Succeeded"),
     "finished (status.phase is Succeeded)"),
    (make_pod("failed").scheduler("policyd").phase("Failed"),
     "finished (status.phase is Failed)"),
    (make_pod("theirs").scheduler("other"),
     'schedulerName "other" is not served by this profile (profiles: policyd)'),
    # Deleted and another scheduler's: the scheduler name decides first, as upstream's
    # informer only queues its own pods.
    (make_pod("both").scheduler("other").set("metadata.deletionTimestamp",
                                             "2026-01-01T00:00:00Z"),
     'schedulerName "other" is not served by this profile (profiles: policyd)'),
])
def test_pods_no_cycle_would_run_for_are_skipped_with_the_reason(
        fw: Framework, builder: PodBuilder, reason: str) -> None:
    pod = builder.obj()
    assert skip_reason(pod, {"policyd": fw}) == reason
    sim = simulate({"policyd": fw}, _cluster("n1"), [pod])
    assert sim.results == [] and sim.gated == []
    assert [(s.pod.key, s.reason) for s in sim.skipped] == [(pod.key, reason)]


def test_gated_pods_are_held_not_placed_and_deletion_wins_over_gates(fw: Framework) -> None:
    gated = make_pod("gated").scheduler("policyd").set(
        "spec.schedulingGates", [{"name": "example.com/wait"}]).obj()
    gated_deleting = make_pod("gd").scheduler("policyd").set(
        "spec.schedulingGates", [{"name": "g"}]).set(
        "metadata.deletionTimestamp", "2026-01-01T00:00:00Z").obj()
    free = make_pod("free").scheduler("policyd").obj()
    state = _cluster("n1")
    sim = simulate({"policyd": fw}, state, [gated, gated_deleting, free])
    assert [(g.pod.key, g.plugin, g.reason) for g in sim.gated] == [
        ("default/gated", "SchedulingGates", "waiting for scheduling gates: [example.com/wait]")]
    assert [s.pod.key for s in sim.skipped] == ["default/gd"]
    assert [(r.pod.key, r.node) for r in sim.results] == [("default/free", "n1")]
    assert state.node_of(gated.uid) is None and state.node_of(gated_deleting.uid) is None


def test_every_input_pod_is_accounted_for(fw: Framework) -> None:
    pods = [
        make_pod("a").scheduler("policyd").obj(),
        make_pod("b").obj(),  # default-scheduler, served by the default profile
        make_pod("c").scheduler("x").obj(),
        make_pod("d").scheduler("policyd").req(cpu="99").obj(),
        make_pod("e").scheduler("policyd").set("spec.schedulingGates", [{"name": "g"}]).obj(),
        make_pod("f").set("metadata.deletionTimestamp", "2026-01-01T00:00:00Z").obj(),
    ]
    served = serving_profiles({"policyd": fw}, default_profile=True)
    sim = simulate(served, _cluster("n1", "n2"), pods)
    seen = ([r.pod.key for r in sim.results] + [g.pod.key for g in sim.gated]
            + [s.pod.key for s in sim.skipped])
    assert sorted(seen) == sorted(p.key for p in pods)
    placed = {r.pod.key: r.node for r in sim.results}
    assert placed["default/b"] is not None and placed["default/d"] is None


# -- duplicates -----------------------------------------------------------------------------

def test_duplicate_node_is_an_input_error_naming_it() -> None:
    nodes = [make_node("n1").obj(), make_node("n2").obj(), make_node("n1").obj()]
    with pytest.raises(InputFileError) as exc:
        check_unique_nodes(nodes, "snap.yaml")
    assert str(exc.value) == ("snap.yaml: Node n1 is defined twice (a cluster has one Node "
                              "per name)")
    check_unique_nodes(nodes[:2], "snap.yaml")


@pytest.mark.parametrize(("files", "message"), [
    ([("s.yaml", [make_pod("web").uid("1"), make_pod("web").uid("2")])],
     "s.yaml: Pod default/web is defined twice (a cluster has one Pod per namespace/name)"),
    ([("a.yaml", [make_pod("web").uid("1")]), ("b.yaml", [make_pod("web").uid("2")])],
     "Pod default/web is in both a.yaml and b.yaml (a cluster has one Pod per "
     "namespace/name)"),
    ([("s.yaml", [make_pod("a").uid("u"), make_pod("b").uid("u")])],
     "s.yaml: Pods default/a and default/b have the same metadata.uid 'u'"),
    ([("a.yaml", [make_pod("a").uid("u")]), ("b.yaml", [make_pod("b").uid("u")])],
     "Pods default/a (in a.yaml) and default/b (in b.yaml) have the same metadata.uid 'u'"),
])
def test_duplicate_pods_name_both_places(files: list[tuple[str, list[PodBuilder]]],
                                         message: str) -> None:
    pod_files = [PodFile(path, [b.obj() for b in builders]) for path, builders in files]
    with pytest.raises(InputFileError) as exc:
        check_unique_pods(pod_files)
    assert str(exc.value) == message


def test_same_name_in_other_namespaces_is_not_a_duplicate() -> None:
    check_unique_pods([PodFile("s.yaml", [make_pod("web", "a").obj(),
                                          make_pod("web", "b").obj()])])


def _merge(snapshot: list[Pod], extra: list[Pod]) -> tuple[list[str], list[str], list[str]]:
    m = merge_pods(snapshot, [PodFile("pods.yaml", extra)])
    return [p.uid for p in m.snapshot], [p.uid for p in m.extra], m.notes


def test_a_pod_file_copy_replaces_the_snapshots_by_name_or_uid() -> None:
    bound = make_pod("web").uid("s1").node("n1").obj()
    pending = make_pod("job").uid("s2").obj()
    other = make_pod("keep").uid("s3").obj()
    by_name = make_pod("web").uid("f1").obj()  # another uid, same namespace/name
    by_uid = make_pod("renamed").uid("s2").obj()
    kept, extra, notes = _merge([bound, pending, other], [by_name, by_uid])
    assert kept == ["s3"] and extra == ["f1", "s2"]
    assert notes == [
        "pod default/web from pods.yaml replaces the snapshot's copy, which was bound to "
        "node n1",
        "pod default/renamed from pods.yaml replaces the snapshot's copy"]


def test_a_replaced_pod_is_placed_once(fw: Framework) -> None:
    snap_copy = make_pod("web").uid("s1").scheduler("policyd").req(cpu="3").obj()
    file_copy = make_pod("web").uid("s1").scheduler("policyd").req(cpu="3").obj()
    m = merge_pods([snap_copy], [PodFile("pods.yaml", [file_copy])])
    state = ClusterState([make_node("n1").capacity(cpu="4", memory="8Gi", pods="10").obj()],
                         m.snapshot + m.extra)
    sim = simulate({"policyd": fw}, state, [p for p in m.snapshot if not p.node_name]
                   + m.extra)
    assert [(r.pod.key, r.node) for r in sim.results] == [("default/web", "n1")]


def test_stand_in_profile_is_the_default_one_else_the_only_one() -> None:
    from policyd.config.plugins import default_framework
    from policyd.engine.profiles import (
        UnservedError,
        serving_every_scheduler,
        stand_in_profile,
    )

    a, b, c = (default_framework(scheduler_name=n) for n in ("a", "b", "default-scheduler"))
    assert stand_in_profile({"a": a}) is a
    assert stand_in_profile({"a": a, "default-scheduler": a}) is a
    assert stand_in_profile({"a": a, "b": b, "default-scheduler": c}) is c
    assert stand_in_profile({"a": a, "b": b}) is None
    volcano = make_pod("v").scheduler("volcano").obj()
    served, added = serving_every_scheduler({"a": a}, [volcano, volcano])
    assert served == {"a": a, "volcano": a} and added == {"volcano": 2}
    assert serving_every_scheduler({"a": a, "b": b}, []) == ({"a": a, "b": b}, {})
    with pytest.raises(UnservedError, match='"volcano" are served by no profile'):
        serving_every_scheduler({"a": a, "b": b}, [volcano])
