"""Preemption's two dry-run forms agree: the incremental one (a cloned PreFilter state
updated through PreFilterExtensions, upstream's SelectVictimsOnNode) and the rerun
one (pods moved in `ClusterState.what_if`, PreFilter rerun per check), on generated
scenes with pod (anti-)affinity, topology spread, host ports, budgets and nominated
pods: the same victims, budget violations and statuses on every node, the same
candidates, trials and chosen node."""

from __future__ import annotations

import pytest

from policyd.framework.status import Code, Status
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod
from policyd.plugins.defaultpreemption.evaluator import Evaluator, Trial, pick_one_node
from tests.builders import make_pod
from tests.gen.preemption import DryRunScene, gen_dry_run_scene
from tests.unit.plugins.defaultpreemption.scene import (
    HIGH,
    LOW,
    budget,
    cluster_of,
    framework,
    node,
    running,
)

SEEDS = range(300)


def _cluster(scene: DryRunScene) -> ClusterState:
    cluster = cluster_of(scene.nodes, scene.pods, scene.budgets)
    for pod, node_name in scene.nominated:
        cluster.nominate(pod, node_name)
    return cluster


def _evaluator(cluster: ClusterState, pod: Pod, incremental: bool) -> Evaluator:
    return Evaluator(framework(), pod, cluster, cluster.disruption_budgets.budgets(),
                     cluster.nominations(), incremental=incremental)


def _status(st: Status | None) -> tuple[Code, str, str] | None:
    return None if st is None else (st.code, st.message, st.plugin)


def _trial(t: Trial) -> object:
    c = t.candidate
    return (t.node, _status(t.status),
            None if c is None else ([p.name for p in c.victims], c.num_pdb_violations))


NodeOutcome = tuple[str, list[str], int, tuple[Code, str, str] | None]


def _per_node(cluster: ClusterState, pod: Pod, incremental: bool) -> list[NodeOutcome]:
    ev = _evaluator(cluster, pod, incremental)
    out: list[NodeOutcome] = []
    for info in cluster.node_infos():
        victims, violations, status = ev.select_victims_on_node(info)
        out.append((info.name, [p.name for p in victims], violations, _status(status)))
    return out


def _dry_run(cluster: ClusterState, pod: Pod, incremental: bool, offset: int
             ) -> tuple[list[object], object]:
    ev = _evaluator(cluster, pod, incremental)
    nodes = cluster.node_infos()
    candidates, _, trials = ev.dry_run(nodes, offset % len(nodes), 2)
    chosen = None
    if candidates:
        best, lost = pick_one_node(candidates)
        chosen = (best.node, sorted(lost.items()))
    return [_trial(t) for t in trials], chosen


def _snapshot(cluster: ClusterState) -> list[object]:
    return [(n.name, sorted(n.pods), dict(n.requested), dict(n.used_ports), n.generation)
            for n in cluster]


@pytest.mark.parametrize("seed", SEEDS)
def test_both_forms_pick_the_same_victims(seed: int) -> None:
    scene = gen_dry_run_scene(seed)
    cluster = _cluster(scene)
    before = _snapshot(cluster)
    incremental = _per_node(cluster, scene.preemptor, incremental=True)
    # The incremental form changes nothing in the cluster, not even generations.
    assert _snapshot(cluster) == before
    rerun = _per_node(cluster, scene.preemptor, incremental=False)
    assert incremental == rerun, scene.notes
    assert _dry_run(cluster, scene.preemptor, True, seed) == _dry_run(
        cluster, scene.preemptor, False, seed), scene.notes


def test_the_generated_scenes_cover_what_the_forms_must_agree_on() -> None:
    """The comparison above means something: across the seeds, nodes with candidates,
    nodes where each of the pod-dependent plugins has the last word, and budgets."""
    plugins: set[str] = set()
    with_victims = violations = 0
    for seed in SEEDS:
        scene = gen_dry_run_scene(seed)
        for _, victims, v, status in _per_node(_cluster(scene), scene.preemptor, True):
            with_victims += bool(victims)
            violations += v
            if status is not None and status[2]:
                plugins.add(status[2])
    assert with_victims > 150 and violations > 8
    assert {"InterPodAffinity", "PodTopologySpread", "NodePorts",
            "NodeResourcesFit"} <= plugins


def test_a_profile_with_an_unknown_pre_filter_plugin_reruns_pre_filter() -> None:
    fw = framework()

    class ReadsOtherPods:
        name = "ReadsOtherPods"

        def pre_filter(self, state: object, pod: Pod, nodes: object
                       ) -> tuple[None, None]:
            return None, None

    fw2 = type(fw)("p", pre_filter=[*fw.pre_filter_plugins, ReadsOtherPods()],
                   filter=fw.filter_plugins)
    assert not fw2.pre_filter_state_follows_pods
    assert framework().pre_filter_state_follows_pods
    cluster = cluster_of([node("n1", cpu="2")], [running("low", "n1", LOW, cpu="2")])
    pod = make_pod("p").priority(HIGH).req(cpu="2").obj()
    ev = Evaluator(fw2, pod, cluster, (), {})
    assert not ev.incremental
    info = cluster.get("n1")
    assert info is not None
    assert [p.name for p in ev.select_victims_on_node(info)[0]] == ["low"]


def test_an_error_in_remove_pod_is_the_nodes_status() -> None:
    """RunPreFilterExtensionRemovePod's error, worded as upstream's, ends the dry run
    on that node (here: InterPodAffinity's state is missing)."""
    fw = framework()
    cluster = cluster_of([node("n1", cpu="2")], [running("low", "n1", LOW, cpu="2")])
    pod = make_pod("p").priority(HIGH).req(cpu="2").affinity(
        {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "x"}},
             "topologyKey": "kubernetes.io/hostname"}]}}).obj()
    ev = Evaluator(fw, pod, cluster, (), {})
    base = ev._base_state()
    assert base is not None
    base._data.pop("InterPodAffinity/preFilter")
    info = cluster.get("n1")
    assert info is not None
    victims, _, status = ev.select_victims_on_node(info)
    assert victims == ()
    assert status is not None and status.code is Code.ERROR
    assert status.message == ('running RemovePod on PreFilter plugin "InterPodAffinity": '
                              'reading "InterPodAffinity/preFilter" from cycleState: '
                              "not found")


def test_budgets_count_in_the_incremental_form() -> None:
    cluster = cluster_of([node("n1", cpu="2")], [
        running("a", "n1", LOW, cpu="1", app="db"),
        running("b", "n1", LOW + 1, cpu="1", app="db"),
    ], [budget("pdb", 1, app="db")])
    pod = make_pod("p").priority(HIGH).req(cpu="2").obj()
    ev = _evaluator(cluster, pod, incremental=True)
    info = cluster.get("n1")
    assert info is not None
    victims, violations, status = ev.select_victims_on_node(info)
    assert ([p.name for p in victims], violations, status) == (["b", "a"], 1, None)
