"""Nominated pods in a cycle (upstream's nominator and RunFilterPluginsWithNominatedPods),
on both evaluation paths, and the nominator kept by ClusterState."""

from __future__ import annotations

import random
from typing import Any

import pytest

from policyd.config.plugins import default_framework
from policyd.engine import nominated
from policyd.engine.cycle import schedule_one
from policyd.framework.cycle_state import CycleState
from policyd.framework.runtime import Framework
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod, node_from_dict, pod_from_dict
from tests.builders import make_node, make_pod
from tests.gen.clusters import gen_cluster, gen_pod

PATHS = pytest.mark.parametrize("reference", [False, True], ids=["fast", "reference"])


def nominee(name: str = "nominee", *, priority: int = 10, cpu: str = "3",
            node: str = "n1", labels: dict[str, str] | None = None) -> Pod:
    """A pending pod the API shows nominated to `node`."""
    b = make_pod(name).uid(name).priority(priority).req(cpu=cpu).labels(labels or {})
    return b.set("status.nominatedNodeName", node).obj()


def cluster_with(*pods: Pod, nodes: tuple[str, ...] = ("n1",)) -> ClusterState:
    cluster = ClusterState([make_node(n).capacity(cpu="4", memory="16Gi", pods="110").obj()
                            for n in nodes], pods)
    for p in pods:
        cluster.sync_nomination(p, None)
    return cluster


@PATHS
def test_a_lower_priority_pod_does_not_take_the_space_freed_for_a_nominee(
        reference: bool) -> None:
    cluster = cluster_with(nominee())
    pod = make_pod("low").uid("low").priority(5).req(cpu="2").obj()
    r = schedule_one(default_framework(seed=1), pod, cluster, reference=reference)
    assert r.node is None
    # The nominee is not on the node: preemption finds nothing to evict there.
    assert r.message == ("0/1 nodes are available: 1 Insufficient cpu. "
                         "no new claims to deallocate, preemption: 0/1 "
                         "nodes are available: 1 No preemption victims found for incoming "
                         "pod.")
    assert "NodeResourcesFit" in r.diagnosis.unschedulable_plugins


@PATHS
def test_equal_priority_yields_too_and_higher_priority_does_not(reference: bool) -> None:
    fw = default_framework(seed=1)
    cluster = cluster_with(nominee(priority=10))
    equal = make_pod("eq").uid("eq").priority(10).req(cpu="2").obj()
    assert schedule_one(fw, equal, cluster, reference=reference).node is None
    higher = make_pod("hi").uid("hi").priority(11).req(cpu="2").obj()
    assert schedule_one(fw, higher, cluster, reference=reference).node == "n1"


@PATHS
def test_the_space_beside_the_nominee_is_still_used(reference: bool) -> None:
    cluster = cluster_with(nominee(cpu="3"))
    pod = make_pod("small").uid("small").priority(0).req(cpu="1").obj()
    assert schedule_one(default_framework(seed=1), pod, cluster,
                        reference=reference).node == "n1"


@PATHS
def test_another_node_is_chosen_when_the_nominated_one_is_taken(reference: bool) -> None:
    cluster = cluster_with(nominee(cpu="3"), nodes=("n1", "n2"))
    pod = make_pod("low").uid("low").priority(5).req(cpu="2").obj()
    r = schedule_one(default_framework(seed=1), pod, cluster, reference=reference)
    assert r.node == "n2"
    assert r.feasible == ["n2"]


@PATHS
def test_the_nominee_itself_is_not_in_its_own_way_and_tries_its_node_first(
        reference: bool) -> None:
    # n1 holds a bound pod; n2 is empty and would score higher (LeastAllocated). The
    # nominee goes to its nominated node, tried alone first (evaluateNominatedNode).
    busy = make_pod("busy").uid("busy").node("n1").req(cpu="1").obj()
    pod = nominee(cpu="3")
    cluster = cluster_with(pod, busy, nodes=("n1", "n2"))
    r = schedule_one(default_framework(seed=1), pod, cluster, reference=reference)
    assert r.node == "n1"
    assert r.feasible == ["n1"]
    # Without the nomination the same pod goes to the emptier node.
    plain = make_pod("plain").uid("plain").priority(10).req(cpu="3").obj()
    assert schedule_one(default_framework(seed=1), plain, cluster,
                        reference=reference).node == "n2"


@PATHS
def test_a_nominated_node_that_no_longer_fits_falls_back_to_every_node(
        reference: bool) -> None:
    blocker = make_pod("blocker").uid("blocker").node("n1").req(cpu="2").obj()
    pod = nominee(cpu="3")
    cluster = cluster_with(pod, blocker, nodes=("n1", "n2"))
    r = schedule_one(default_framework(seed=1), pod, cluster, reference=reference)
    assert r.node == "n2"


@PATHS
def test_both_passes_must_pass_pod_affinity_counts_only_real_pods(
        reference: bool) -> None:
    # The nominee would satisfy the pod's required affinity, but it is not running:
    # upstream's second pass (without nominated pods) rejects the node.
    other = make_pod("other").uid("other").node("n2").labels(app="db").obj()
    cluster = cluster_with(nominee(cpu="1", labels={"app": "web"}), other,
                           nodes=("n1", "n2"))
    term = {"labelSelector": {"matchLabels": {"app": "web"}},
            "topologyKey": "kubernetes.io/hostname"}
    pod = (make_pod("follower").uid("follower").priority(1).req(cpu="1")
           .affinity({"podAffinity": {
               "requiredDuringSchedulingIgnoredDuringExecution": [term]}}).obj())
    r = schedule_one(default_framework(seed=1), pod, cluster, reference=reference)
    assert r.node is None
    # Required affinity's failure is final (UnschedulableAndUnresolvable upstream).
    assert r.message == ("0/2 nodes are available: 2 node(s) didn't match pod affinity "
                         "rules. no new claims to deallocate, preemption: 0/2 nodes are "
                         "available: 2 Preemption is not helpful for scheduling.")


FORMS = pytest.mark.parametrize("incremental", [True, False], ids=["incremental", "rerun"])


def _after_pre_filter(fw: Framework, pod: Pod, cluster: ClusterState) -> CycleState:
    """The cycle's state once PreFilter passed, as the first pass is given it."""
    state = CycleState(cluster.node_infos(), cluster)
    state.framework = fw
    _, status, _ = fw.run_pre_filter(state, pod)
    assert status is None
    return state


def _framework(incremental: bool) -> Framework:
    fw = default_framework(seed=1)
    fw.pre_filter_state_follows_pods = incremental  # False forces the rerun form
    return fw


@FORMS
def test_the_first_pass_leaves_the_cluster_and_the_cycle_state_as_they_were(
        incremental: bool) -> None:
    pod = nominee(cpu="3")
    cluster = cluster_with(pod, nodes=("n1", "n2"))
    info = cluster.get("n1")
    assert info is not None
    # (A resource summed back to zero may stay listed at 0.)
    before = (dict(info.pods), {k: v for k, v in info.requested.items() if v},
              [p.uid for p in cluster.pending_pods()])
    low = make_pod("low").uid("low").priority(5).req(cpu="2").obj()
    fw = _framework(incremental)
    state = _after_pre_filter(fw, low, cluster)
    data = dict(state._data)
    rejections = nominated.first_pass(fw, low, cluster, state)
    assert set(rejections.node_to_status) == {"n1"}
    assert rejections.node_to_status["n1"].reasons == ("Insufficient cpu",)
    assert (dict(info.pods), {k: v for k, v in info.requested.items() if v},
            [p.uid for p in cluster.pending_pods()]) == before
    assert cluster.nominated_pods("n1") == [pod]
    assert state._data == data


def test_only_the_nodes_asked_for_are_checked_and_none_twice() -> None:
    cluster = cluster_with(nominee("a", cpu="3", node="n1"), nominee("b", cpu="3", node="n2"),
                           nodes=("n1", "n2"))
    low = make_pod("low").uid("low").priority(5).req(cpu="2").obj()
    fw = default_framework(seed=1)
    state = _after_pre_filter(fw, low, cluster)
    out = nominated.first_pass(fw, low, cluster, state, only=("n2",))
    assert set(out.node_to_status) == out.checked == {"n2"}
    again = nominated.first_pass(fw, low, cluster, state, out=out)
    assert again is out and set(out.node_to_status) == out.checked == {"n1", "n2"}


def _without_required_anti_affinity(raw: dict[str, Any]) -> dict[str, Any]:
    """The forms differ, by upstream's design, for a nominated pod with required
    anti-affinity while InterPodAffinity's PreFilter skipped (see the test below)."""
    anti = ((raw.get("spec") or {}).get("affinity") or {}).get("podAntiAffinity") or {}
    anti.pop("requiredDuringSchedulingIgnoredDuringExecution", None)
    return raw


def test_the_incremental_and_rerun_forms_agree() -> None:
    """On generated clusters, nominees and pods: the same rejected nodes with the same
    statuses, every filter verdict (explain) and counted pods."""
    compared = sum(_compare_forms(seed) for seed in range(60))
    assert compared >= 200, f"only {compared} pods had a node rejected in the first pass"


def _compare_forms(seed: int) -> int:
    """Both forms on one generated scene; how many pods had a node rejected."""
    rng = random.Random(seed)
    nodes, existing = gen_cluster(rng, rng.randint(2, 10), rng.randint(0, 25))
    names = [n["metadata"]["name"] for n in nodes]
    nominees = []
    for i in range(rng.randint(1, 6)):
        raw = _without_required_anti_affinity(gen_pod(rng, f"nominee-{i}").raw())
        raw.setdefault("spec", {})["priority"] = rng.randint(0, 3)
        raw.setdefault("status", {})["nominatedNodeName"] = rng.choice(names)
        nominees.append(raw)
    cluster = ClusterState([node_from_dict(n) for n in nodes],
                           [pod_from_dict(p) for p in existing + nominees])
    for raw in nominees:
        cluster.sync_nomination(pod_from_dict(raw), None)
    compared = 0
    for i in range(10):
        raw = gen_pod(rng, f"new-{i}").raw()
        raw.setdefault("spec", {})["priority"] = rng.randint(0, 3)
        pod = pod_from_dict(raw)
        outs = []
        for incremental in (True, False):
            fw = _framework(incremental)
            state = CycleState(cluster.node_infos(), cluster)
            state.framework = fw
            if fw.run_pre_filter(state, pod)[1] is not None:
                break
            r = nominated.first_pass(fw, pod, cluster, state, explain=True)
            outs.append((
                {n: (s.code, s.message, s.plugin) for n, s in r.node_to_status.items()},
                {n: {k: v and (v.code, v.message) for k, v in d.items()}
                 for n, d in r.details.items()},
                {n: [p.key for p in ps] for n, ps in r.counted.items()},
                r.error and r.error.message))
        if len(outs) == 2:
            assert outs[0] == outs[1], f"seed {seed}, {pod.key}"
            compared += bool(outs[0][0])
    return compared


def test_a_nominated_pods_anti_affinity_is_not_seen_while_inter_pod_affinity_skips() -> None:
    """Upstream's addGENominatedPods updates PreFilter state through AddPod, which a
    plugin whose PreFilter said Skip is not asked: the incoming pod has no affinity
    terms and no running pod has required anti-affinity, so InterPodAffinity skips,
    and a nominee's anti-affinity against it is not checked in the first pass."""
    term = {"labelSelector": {"matchLabels": {"app": "web"}},
            "topologyKey": "kubernetes.io/hostname"}
    guard = (make_pod("guard").uid("guard").priority(10).req(cpu="1")
             .affinity({"podAntiAffinity": {
                 "requiredDuringSchedulingIgnoredDuringExecution": [term]}})
             .set("status.nominatedNodeName", "n1").obj())
    cluster = cluster_with(guard)
    web = make_pod("web").uid("web").priority(5).req(cpu="1").labels(app="web").obj()
    incremental = _framework(True)
    state = _after_pre_filter(incremental, web, cluster)
    assert "InterPodAffinity" in state.skip_filter
    assert not nominated.first_pass(incremental, web, cluster, state).node_to_status
    assert schedule_one(default_framework(seed=1), web, cluster).node == "n1"


@PATHS
def test_without_nominations_the_first_pass_is_never_run(
        reference: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object) -> None:
        raise AssertionError("first pass run without nominations")

    monkeypatch.setattr("policyd.engine.cycle.first_pass", boom)
    cluster = cluster_with()
    pod = make_pod("p").uid("p").req(cpu="1").obj()
    assert schedule_one(default_framework(seed=1), pod, cluster,
                        reference=reference).node == "n1"


# -- the nominator --------------------------------------------------------------------

def test_the_api_nomination_is_indexed_by_node_and_follows_updates() -> None:
    cluster = cluster_with(nodes=("n1", "n2"))
    p = nominee(node="n1")
    cluster.upsert_pod(p)
    cluster.sync_nomination(p, None)
    assert cluster.nominated_pods("n1") == [p] and cluster.nominated_node(p.uid) == "n1"
    moved = nominee(node="n2")
    cluster.sync_nomination(moved, "n1")
    assert cluster.nominated_pods("n1") == [] and cluster.nominated_pods("n2") == [moved]
    cleared = make_pod("nominee").uid("nominee").priority(10).obj()
    cluster.sync_nomination(cleared, "n2")
    assert not cluster.has_nominations


def test_a_nomination_made_in_memory_survives_updates_that_do_not_show_it_yet() -> None:
    cluster = cluster_with(nodes=("n1",))
    p = make_pod("pre").uid("pre").priority(10).obj()
    cluster.upsert_pod(p)
    cluster.nominate(p, "n1")
    # An unrelated update whose old and new objects both lack the nomination (our
    # status patch has not come back yet): kept, with the newer record.
    newer = make_pod("pre").uid("pre").priority(10).labels(v="2").obj()
    cluster.sync_nomination(newer, "")
    assert cluster.nominated_pods("n1") == [newer]
    # An add (a re-list) carries the API's truth.
    cluster.sync_nomination(newer, None)
    assert not cluster.has_nominations


def test_bound_assumed_and_finished_pods_leave_the_nominator() -> None:
    cluster = cluster_with(nodes=("n1",))
    for how in ("bound", "assumed", "finished"):
        p = nominee(name=f"p-{how}")
        cluster.upsert_pod(p)
        cluster.sync_nomination(p, None)
        assert cluster.nominated_node(p.uid) == "n1"
        if how == "bound":
            cluster.upsert_pod(pod_from_dict({**p.raw, "spec": {**p.raw["spec"],
                                                                "nodeName": "n1"}}))
        elif how == "assumed":
            cluster.assume(p, "n1")
        else:
            cluster.upsert_pod(pod_from_dict({**p.raw, "status": {
                **p.raw["status"], "phase": "Succeeded"}}))
        assert cluster.nominated_node(p.uid) is None, how
        # A bound pod cannot be nominated again.
        cluster.nominate(p, "n1")
        assert cluster.nominated_node(p.uid) is None or how == "finished", how


@pytest.mark.parametrize("seed", range(12))
def test_fast_and_reference_paths_agree_with_nominations(seed: int) -> None:
    rng = random.Random(seed)
    nodes, existing = gen_cluster(rng, rng.randint(2, 12), rng.randint(0, 20))
    names = [n["metadata"]["name"] for n in nodes]
    nominees = []
    for i in range(rng.randint(1, 4)):
        raw = gen_pod(rng, f"nominee-{i}").raw()
        raw.setdefault("spec", {})["priority"] = rng.randint(0, 3)
        raw.setdefault("status", {})["nominatedNodeName"] = rng.choice(names)
        nominees.append(raw)
    pods = []
    for i in range(12):
        raw = gen_pod(rng, f"new-{i}").raw()
        raw.setdefault("spec", {})["priority"] = rng.randint(0, 3)
        pods.append(raw)

    def run(reference: bool) -> list[tuple[str | None, str, list[str]]]:
        cluster = ClusterState([node_from_dict(n) for n in nodes],
                               [pod_from_dict(p) for p in existing + nominees])
        for raw in nominees:
            cluster.sync_nomination(pod_from_dict(raw), None)
        fw = default_framework(seed=seed)
        out = []
        for raw in pods + nominees:
            pod = pod_from_dict(raw)
            r = schedule_one(fw, pod, cluster, reference=reference)
            out.append((r.node, r.message, sorted(r.feasible)))
            if r.node is not None:
                cluster.assume(pod, r.node)
        return out

    assert run(False) == run(True)


# -- simulate acts on a PostFilterResult as the daemon would ------------------------------

def test_simulate_evicts_the_victims_and_places_the_preemptor_on_its_node() -> None:
    from policyd.engine.report import simulate_json, simulate_text
    from policyd.engine.simulate import simulate
    from tests.unit.daemon.fixed_preemption import PreemptOn

    victim = make_pod("victim").uid("victim").priority(1).node("n1").req(cpu="3").obj()
    keep = make_pod("keep").uid("keep").priority(1000).node("n1").req(cpu="500m").obj()
    cluster = cluster_with(victim, keep, nodes=("n1",))
    fw = default_framework(seed=1)
    fw.post_filter_plugins = [PreemptOn("n1")]
    high = make_pod("high").uid("high").priority(100).req(cpu="3").obj()
    after = make_pod("after").uid("after").priority(0).req(cpu="1").obj()
    sim = simulate({"default-scheduler": fw}, cluster, [high, after])
    assert [(r.pod.name, r.node) for r in sim.results] == [("high", "n1"), ("after", None)]
    assert [(p.pod.name, p.node, [v.name for v in p.victims]) for p in sim.preemptions] \
        == [("high", "n1", ["victim"])]
    assert cluster.node_of("victim") is None and cluster.node_of("keep") == "n1"
    text = simulate_text(sim)
    assert "default/high on n1: evicted default/victim" in text
    assert "1 scheduled, 1 unschedulable, 1 preempted" in text
    assert simulate_json(sim)["preemptions"] == [
        {"pod": "default/high", "node": "n1", "evicted": ["default/victim"]}]


def test_simulate_counts_nominations_from_its_input() -> None:
    from policyd.engine.simulate import simulate

    cluster = cluster_with(nodes=("n1",))
    waiting = nominee(cpu="3")  # nominated by an earlier preemption, priority 10
    low = make_pod("low").uid("low").priority(5).req(cpu="2").obj()
    # Queue order puts the nominee first; it binds to its node, the other cannot fit.
    sim = simulate({"default-scheduler": default_framework(seed=1)}, cluster, [low, waiting])
    assert [(r.pod.name, r.node) for r in sim.results] == [("nominee", "n1"), ("low", None)]
    assert sim.preemptions == []
