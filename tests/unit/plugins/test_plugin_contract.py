"""The plugin contract: every plugin's columnar form gives exactly its reference form's
answer. Driven by the registry and the policy generator, so a new built-in is covered
by registering it, and compiled policies by the rule kinds the schema has.

For each plugin, on generated clusters and pods (the volume plugins on the
differential test's volume cases; all nodes and a subset, as after earlier filters):
the same PreFilter outcome, a mask passing exactly the nodes `filter` passes, the same
reasons from `filter` on either cycle, and the same scores from score_vector
(+ normalize_vector) as from score + normalize_score. Then the whole cycle:
`schedule_one` on the default path against `reference=True`, with the plugin in a
profile (a built-in variant's args in its `pluginConfig`), must give the same node
(seeded), feasible nodes and message.

The case lists are checked too (`test_the_cases_are_the_ones_meant`): a case whose
body had nothing to compare would pass whatever the plugin does.
"""

from __future__ import annotations

import copy
import itertools
import random
from collections.abc import Callable
from typing import Any

import pytest

from policyd.config.plugins import build_framework
from policyd.engine.cycle import schedule_one
from policyd.framework import PluginError
from policyd.framework.cycle_state import CycleState
from policyd.framework.interfaces import (
    FilterPlugin,
    Plugin,
    PreFilterPlugin,
    ScorePlugin,
    filter_reads_node_pods,
)
from policyd.framework.runtime import Framework
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod, node_from_dict, pod_from_dict
from policyd.nodemetrics import MetricsCache
from policyd.plugins import names, registry
from policyd.policy.compiler import CompiledPolicy
from tests.gen.clusters import GPU, HOSTNAME, ZONE, gen_cluster, gen_pod
from tests.gen.differential import Case as VolumeCase
from tests.gen.policies import (
    metric_policy_doc,
    metrics_cache,
    policy_doc,
    policy_node,
    policy_pod,
)
from tests.gen.volumes import SETTLES_TO, gen_volume_case
from tests.plugin_harness import run_filter, run_score
from tests.unit.policy.conftest import check_docs

POLICIES = 40
METRIC_POLICIES = 10
ROUNDS = 6  # clusters per plugin


def _compiled(doc: dict[str, Any]) -> CompiledPolicy | None:
    result = check_docs(doc)
    if not result.compiled:  # a generated contradiction, rejected by lint
        return None
    [policy] = result.compiled
    return policy


# Non-default args of the built-ins that take them: each variant is one more case, so the
# columnar forms are held to the reference forms under every scoring strategy and
# option, not only the defaults. A plugin that takes args must have a variant here
# (`test_every_plugin_with_args_has_a_variant`).
ARGS: dict[str, list[dict[str, Any]]] = {
    names.VOLUME_BINDING: [{"bindTimeoutSeconds": 30}],
    names.DYNAMIC_RESOURCES: [{"filterTimeout": "0", "bindingTimeout": "1m"}],
    names.COSCHEDULING: [{"permitWaitingTimeSeconds": 5, "podGroupBackoffSeconds": 1,
                          "podGroupRejectPercentage": 0}],
    # Few candidates wanted: the dry runs stop early, after the first node with victims.
    names.DEFAULT_PREEMPTION: [{"minCandidateNodesPercentage": 0,
                                "minCandidateNodesAbsolute": 1}],
    names.NODE_RESOURCES_FIT: [
        {"scoringStrategy": {"type": "MostAllocated", "resources": [
            {"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}]}},
        {"scoringStrategy": {"type": "RequestedToCapacityRatio", "resources": [
            {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
            {"name": GPU, "weight": 2}],
            "requestedToCapacityRatio": {"shape": [
                {"utilization": 0, "score": 10}, {"utilization": 60, "score": 0},
                {"utilization": 100, "score": 7}]}}},
        {"ignoredResources": [GPU], "scoringStrategy": {"type": "LeastAllocated",
                                                        "resources": [
            {"name": "cpu", "weight": 1}, {"name": "ephemeral-storage", "weight": 2}]}},
        {"ignoredResourceGroups": ["example.com"]},
    ],
    names.NODE_RESOURCES_BALANCED_ALLOCATION: [
        {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
                       {"name": GPU, "weight": 1}]},
        {"resources": [{"name": "cpu", "weight": 1},
                       {"name": "ephemeral-storage", "weight": 1}]},
    ],
    names.POD_TOPOLOGY_SPREAD: [
        {"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"},
            {"maxSkew": 2, "topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway"}]},
        {"defaultingType": "List"},
    ],
    names.INTER_POD_AFFINITY: [
        {"hardPodAffinityWeight": 7, "ignorePreferredTermsOfExistingPods": True},
        {"hardPodAffinityWeight": 0},
    ],
    names.NODE_AFFINITY: [
        {"addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": ZONE, "operator": "In",
                                       "values": ["zone-a", "zone-b"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 5, "preference": {"matchExpressions": [
                    {"key": "disk", "operator": "Exists"}]}}]}},
    ],
}


def _policy(draw: Callable[[random.Random], dict[str, Any]], seed: int) -> CompiledPolicy:
    policy = _compiled(draw(random.Random(seed)))
    assert policy is not None, "only seeds lint accepts are cases"
    return policy


def _valid_policies(kind: str, count: int) -> list[tuple[str, int]]:
    """The first `count` generator seeds whose policy lint accepts (a generated policy
    can contradict itself; lint rejects those, and they are no plugin to test)."""
    draw = metric_policy_doc if kind == "metrics" else policy_doc
    seeds = (s for s in range(10 * count) if _compiled(draw(random.Random(s))) is not None)
    return [(f"{kind}-{s}", s) for s in itertools.islice(seeds, count)]


# Built-ins whose inputs are storage objects: their worlds are the differential test's
# volume cases (the scheduling generator makes no volumes).
VOLUME_PLUGINS = {names.VOLUME_RESTRICTIONS, names.NODE_VOLUME_LIMITS, names.VOLUME_BINDING,
                  names.VOLUME_ZONE}

# (case id, factory of a fresh plugin, world generator, the built-in's args: None for
# its defaults and for policies)
Case = tuple[str, Callable[[], Plugin], str, dict[str, Any] | None]


def _cases() -> list[Case]:
    cases: list[Case] = []
    for name in registry.builtin_names():
        spec = registry.builtin(name)
        assert spec is not None
        world = "volumes" if name in VOLUME_PLUGINS else "builtin"
        cases.append((name, lambda spec=spec: spec.factory(None), world,  # type: ignore[misc]
                      None))
        for i, args in enumerate(ARGS.get(name, [])):
            cases.append((f"{name}-args{i}",
                          lambda spec=spec, args=args: spec.factory(args),  # type: ignore[misc]
                          world, args))
    for kind, count, draw in (("policy", POLICIES, policy_doc),
                              ("metrics", METRIC_POLICIES, metric_policy_doc)):
        for case, seed in _valid_policies(kind, count):
            cases.append((case,
                          lambda seed=seed, draw=draw: _policy(draw, seed),  # type: ignore[misc]
                          kind, None))
    return cases


def _has_filter_or_score(case: Case) -> bool:
    plugin = case[1]()
    return isinstance(plugin, FilterPlugin | ScorePlugin)


CASES = _cases()
# Cases whose generated worlds never get past PreFilter / PreScore, so their per-node
# forms are not compared here (only their PreFilter outcomes): policies whose appliesTo
# no generated pod matches. Listed so the gap is visible and cannot grow: a case that
# starts comparing must leave the list.
NOT_REACHED = {"policy-4", "policy-9", "policy-22", "policy-30", "policy-31", "policy-37",
               "policy-39"}
# The columnar forms are Filter's and Score's: a plugin with neither (PrioritySort,
# DefaultPreemption) has nothing to hold to its reference form there, only in the cycle.
COLUMNAR_CASES = [c for c in CASES if _has_filter_or_score(c)]


# Filters that declare they read the node alone (preemption's dry runs then ask them
# once per node): held to it below.
NODE_ALONE_CASES = [c for c in COLUMNAR_CASES
                    if isinstance(p := c[1](), FilterPlugin) and not filter_reads_node_pods(p)]


def _world(rng: random.Random, kind: str) -> tuple[ClusterState, list[Pod], MetricsCache | None]:
    """A generated cluster and incoming pods: the scheduling generator (every built-in's
    inputs) for built-ins, the policy generator (labels, annotations, resources the
    rules read) for policies."""
    storage: list[dict[str, Any]] = []
    if kind == "builtin":
        nodes, existing = gen_cluster(rng, rng.randint(1, 30), rng.randint(0, 40))
        pods = [gen_pod(rng, f"new-{i}").raw() for i in range(4)]
    elif kind == "volumes":
        # The differential test's volume cases: classes, PVs, claims and CSINodes
        # around a pod with claims (unbound here: no PV controller runs).
        cases = [gen_volume_case(rng.randrange(2**32), i, f"c{i}") for i in range(4)]
        nodes = [n for c in cases for n in c.nodes]
        existing = [p for c in cases for p in c.pods]
        storage = [o for c in cases for o in _bound_first(c)]
        pods = [c.pod for c in cases]
    else:
        nodes = [policy_node(rng, f"n{i}") for i in range(rng.randint(1, 10))]
        existing = [policy_pod(rng, f"e{i}", rng.choice(nodes)["metadata"]["name"])
                    for i in range(rng.randint(0, 10))]
        pods = [policy_pod(rng, f"new-{i}") for i in range(4)]
    cluster = ClusterState([node_from_dict(n) for n in nodes],
                           [pod_from_dict(p) for p in existing])
    for obj in storage:
        cluster.storage.upsert(obj["kind"], obj)
    cache = (metrics_cache(rng, [n["metadata"]["name"] for n in nodes])
             if kind == "metrics" else None)
    return cluster, [pod_from_dict(p) for p in pods], cache


def _bound_first(case: VolumeCase) -> list[dict[str, Any]]:
    """The case's storage with the claims the PV controller binds first bound, as the
    differential test has them: each to the PV pre-bound to it, else to the free PV of
    its class and exact size (the generator gives each such claim a PV of its size), or
    to the PV it names; and the objects with a SETTLES_TO phase in it (a claim being
    deleted has its deletionTimestamp)."""
    objects = copy.deepcopy(case.storage)
    pvs = [o for o in objects if o["kind"] == "PersistentVolume"]
    for obj in objects:
        phase = obj["metadata"]["labels"].get(SETTLES_TO)
        if phase == "Terminating":
            obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        elif phase is not None:
            obj["status"] = {"phase": phase}
    for key in case.bind_first:
        namespace, name = key.split("/")
        [claim] = [o for o in objects if o["kind"] == "PersistentVolumeClaim"
                   and (o["metadata"].get("namespace"), o["metadata"]["name"])
                   == (namespace, name)]
        spec = claim["spec"]
        ref = {"namespace": namespace, "name": name}
        [pv, *_] = ([v for v in pvs if v["spec"].get("claimRef") == ref
                     or v["metadata"]["name"] == spec.get("volumeName")]
                    or [v for v in pvs
                        if v["spec"]["storageClassName"] == spec["storageClassName"]
                        and "claimRef" not in v["spec"]
                        and v["spec"]["capacity"]["storage"]
                        == spec["resources"]["requests"]["storage"]])
        spec["volumeName"] = pv["metadata"]["name"]
        claim["status"] = {"phase": "Bound"}
        pv["spec"]["claimRef"] = {"namespace": namespace, "name": name,
                                  "uid": claim["metadata"].get("uid", "")}
        pv["status"] = {"phase": "Bound"}
    return objects


def _plugin(make: Callable[[], Plugin], cache: MetricsCache | None) -> Plugin:
    plugin = make()
    if cache is not None:
        assert isinstance(plugin, CompiledPolicy)
        plugin.use_metrics(cache)
    return plugin


@pytest.mark.parametrize(("case", "make", "kind", "args"), COLUMNAR_CASES,
                         ids=[c[0] for c in COLUMNAR_CASES])
def test_columnar_form_matches_reference_form(case: str, make: Callable[[], Plugin],
                                              kind: str, args: dict[str, Any] | None
                                              ) -> None:
    rng = random.Random(case)
    compared = 0  # runs that got past PreFilter / PreScore to per-node answers
    for _ in range(ROUNDS):
        cluster, pods, cache = _world(rng, kind)
        plugin = _plugin(make, cache)
        n = len(cluster.node_infos())
        for pod in pods:
            subset = sorted(rng.sample(range(n), rng.randint(1, n)))
            for nodes in (None, subset):
                if isinstance(plugin, FilterPlugin):
                    compared += run_filter(plugin, pod, cluster, nodes).stopped is None
                if isinstance(plugin, ScorePlugin):
                    compared += run_score(plugin, pod, cluster, nodes).stopped is None
            if rng.random() < 0.5:  # move the cluster on: caches must notice
                node = rng.choice(cluster.node_infos()).name
                cluster.assume(pod, node)
    # Every run stopped before the nodes (a PreFilter that always skips) compares only
    # PreFilter outcomes: the generators must reach the per-node forms.
    if case in NOT_REACHED:
        assert not compared, f"{case} is compared now: take it out of NOT_REACHED"
    else:
        assert compared, "no run got past PreFilter/PreScore: the forms were never compared"


@pytest.mark.parametrize(("case", "make", "kind", "args"), NODE_ALONE_CASES,
                         ids=[c[0] for c in NODE_ALONE_CASES])
def test_a_filter_that_reads_the_node_alone_ignores_the_pods_on_it(
        case: str, make: Callable[[], Plugin], kind: str, args: dict[str, Any] | None
) -> None:
    """`filter_reads_node_pods = False`: the verdict on a node is the same with one of
    its pods taken off and another pod (of the incoming ones) put on it."""
    rng = random.Random(f"node-alone-{case}")
    compared = 0
    for _ in range(ROUNDS):
        cluster, pods, cache = _world(rng, kind)
        plugin = _plugin(make, cache)
        assert isinstance(plugin, FilterPlugin)
        for pod in pods:
            state = CycleState(cluster.node_infos(), cluster)
            if isinstance(plugin, PreFilterPlugin):
                _, status = plugin.pre_filter(state, pod, cluster.node_infos())
                if status is not None and not status.is_success:
                    continue
            for info in cluster.node_infos():
                changed = info.clone()
                if changed.pods:
                    changed.remove_pod(rng.choice(list(changed.pods.values())))
                changed.add_pod(rng.choice([p for p in pods if p.uid != pod.uid] or pods))
                assert plugin.filter(state, pod, changed) == plugin.filter(state, pod, info)
                compared += 1
            if rng.random() < 0.5:
                cluster.assume(pod, rng.choice(cluster.node_infos()).name)
    assert compared


def test_the_filters_that_read_the_node_alone_are_the_ones_meant() -> None:
    assert sorted({c[0].split("-args")[0] for c in NODE_ALONE_CASES}) == sorted([
        names.NODE_AFFINITY, names.NODE_DECLARED_FEATURES, names.NODE_NAME,
        names.NODE_UNSCHEDULABLE, names.TAINT_TOLERATION, names.VOLUME_BINDING,
        names.VOLUME_ZONE])


def _profile(kind: str, plugin: Plugin, args: dict[str, Any] | None, seed: int
             ) -> Framework:
    """The framework the cycle runs: the default profile, joined by a policy, or with a
    built-in variant's args in its pluginConfig (a built-in is in the profile already,
    an out-of-tree one is enabled)."""
    profile: dict[str, Any] = {"schedulerName": "policyd"}
    if plugin.name in registry.out_of_tree_names():
        # In no default profile: enabled as scheduler-plugins' sample config does.
        points = registry.extension_points_of(plugin)
        profile["plugins"] = {"multiPoint": {"enabled": [{"name": plugin.name}]}}
        if "queueSort" in points:
            profile["plugins"]["queueSort"] = {"enabled": [{"name": plugin.name}],
                                               "disabled": [{"name": "*"}]}
    if args is not None:
        profile["pluginConfig"] = [{"name": plugin.name, "args": args}]
    policies = {} if kind in ("builtin", "volumes") else {plugin.name: plugin}
    return build_framework(profile, policies, seed=seed)


def _plugins_of(fw: Framework) -> list[object]:
    """Every plugin instance the framework runs, at any extension point."""
    return [fw.queue_sort, *fw.pre_filter_plugins, *fw.filter_plugins,
            *fw.pre_score_plugins, *(wp.plugin for wp in fw.score_plugins),
            *fw.post_filter_plugins, *fw.reserve_plugins, *fw.pre_bind_plugins]


def _settings(plugin: object) -> dict[str, Any]:
    """A plugin's configuration: its public attributes (what its args set)."""
    return {k: v for k, v in vars(plugin).items() if not k.startswith("_")}


@pytest.mark.parametrize(("case", "make", "kind", "args"), CASES, ids=[c[0] for c in CASES])
def test_default_path_decides_as_reference_path(case: str,
                                                make: Callable[[], Plugin],
                                                kind: str, args: dict[str, Any] | None
                                                ) -> None:
    """The plugin in a profile (a policy joins the default profile; a built-in is in
    it already, a variant with its args): same chosen node, feasible nodes and
    FailedScheduling message."""
    rng = random.Random(f"cycle-{case}")
    for round_ in range(ROUNDS // 2):
        cluster_seed = rng.randrange(2**32)
        outcomes = []
        for reference in (False, True):
            cluster, pods, cache = _world(random.Random(cluster_seed), kind)
            plugin = _plugin(make, cache)
            fw = _profile(kind, plugin, args, seed=round_)
            out = []
            for pod in pods:
                r = schedule_one(fw, pod, cluster, reference=reference)
                out.append((r.node, r.message, sorted(r.feasible)))
                if r.node is not None:
                    cluster.assume(pod, r.node)
            outcomes.append(out)
        assert outcomes[0] == outcomes[1]


def test_every_plugin_with_args_has_a_variant() -> None:
    """A built-in that accepts args is held to the contract with some of them set."""
    takes_args = []
    for name in registry.builtin_names():
        spec = registry.builtin(name)
        assert spec is not None
        try:
            spec.factory({"kind": "x", "notAField": 1})
        except PluginError as exc:
            if any(p.path != "" for p in exc.problems):  # it looked inside: args exist
                takes_args.append(name)
    assert takes_args and set(takes_args) <= set(ARGS), takes_args


def test_the_cases_are_the_ones_meant() -> None:
    """Every built-in and each of its variants, and the generated policies, are cases of
    the cycle test; the columnar test has each of those with a Filter or Score, and
    leaves out exactly the three built-ins with neither."""
    builtins = [(n, None) for n in registry.builtin_names()]
    variants = [(f"{n}-args{i}", a) for n, vs in ARGS.items() for i, a in enumerate(vs)]
    assert sorted((c[0], c[3]) for c in CASES if c[2] in ("builtin", "volumes")) == sorted(
        [*builtins, *variants], key=lambda c: c[0])
    assert [c[2] for c in CASES].count("policy") == POLICIES
    assert [c[2] for c in CASES].count("metrics") == METRIC_POLICIES
    left_out = {c[0] for c in CASES} - {c[0] for c in COLUMNAR_CASES}
    assert {c for c in left_out if not c.startswith(("policy-", "metrics-"))} == {
        names.PRIORITY_SORT, names.DEFAULT_PREEMPTION, names.GANG_SCHEDULING,
        names.COSCHEDULING,
        *(f"{name}-args{i}" for name in (names.DEFAULT_PREEMPTION, names.COSCHEDULING)
          for i in range(len(ARGS[name])))}
    # A generated policy is left out only when it has no rule at all (a valid policy
    # that joins the profile and changes nothing: a case for the cycle test only).
    for case in left_out:
        kind, _, seed = case.partition("-")
        if kind in ("policy", "metrics"):
            draw = metric_policy_doc if kind == "metrics" else policy_doc
            spec = draw(random.Random(int(seed)))["spec"]
            assert not spec.get("filters") and not spec.get("scores"), case


@pytest.mark.parametrize(("case", "make", "kind", "args"),
                         [c for c in CASES if c[3] is not None],
                         ids=[c[0] for c in CASES if c[3] is not None])
def test_a_variants_args_reach_the_framework_it_compares(
        case: str, make: Callable[[], Plugin], kind: str, args: dict[str, Any]) -> None:
    """The cycle test's framework runs the variant as its factory builds it, and that is
    not the default plugin: a variant whose args were dropped on the way, or that sets
    only defaults, would compare the default profile again."""
    wanted = make()
    fw = _profile(kind, wanted, args, seed=0)
    [got] = [p for p in _plugins_of(fw) if getattr(p, "name", None) == wanted.name][:1]
    assert _settings(got) == _settings(wanted)
    spec = registry.builtin(wanted.name)
    assert spec is not None
    assert _settings(spec.factory(None)) != _settings(wanted), "the variant is the default"
