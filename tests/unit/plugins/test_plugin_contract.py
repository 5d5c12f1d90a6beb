"""The plugin contract: every plugin's columnar form gives exactly its reference form's
answer. Driven by the registry and the policy generator, so a new built-in is covered
by registering it, and compiled policies by the rule kinds the schema has.

For each plugin, on generated clusters and pods (all nodes and a subset, as after
earlier filters): the same PreFilter outcome, a mask passing exactly the nodes `filter`
passes, the same reasons from `filter` on either cycle, and the same scores from
score_vector (+ normalize_vector) as from score + normalize_score. Then the whole cycle:
`schedule_one` on the default path against `reference=True`, with the plugin in a
profile, must give the same node (seeded), feasible nodes and message.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from policyd.config.plugins import default_framework
from policyd.engine.cycle import schedule_one
from policyd.framework.interfaces import FilterPlugin, Plugin, ScorePlugin
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod, node_from_dict, pod_from_dict
from policyd.nodemetrics import MetricsCache
from policyd.plugins import registry
from policyd.policy.compiler import CompiledPolicy
from tests.gen.clusters import gen_cluster, gen_pod
from tests.gen.policies import (
    metric_policy_doc,
    metrics_cache,
    policy_doc,
    policy_node,
    policy_pod,
)
from tests.plugin_harness import run_filter, run_score
from tests.unit.policy.conftest import check_docs

POLICY_SEEDS = range(40)
METRIC_POLICY_SEEDS = range(10)
ROUNDS = 6  # clusters per plugin


def _compiled(doc: dict[str, Any]) -> CompiledPolicy | None:
    result = check_docs(doc)
    if not result.compiled:  # a generated contradiction, rejected by lint
        return None
    [policy] = result.compiled
    return policy


# (case id, factory of a fresh plugin, cluster generator)
Case = tuple[str, Callable[[], Plugin | None], str]


def _cases() -> list[Case]:
    cases: list[Case] = []
    for name in registry.builtin_names():
        spec = registry.builtin(name)
        assert spec is not None
        cases.append((name, lambda spec=spec: spec.factory(None), "builtin"))  # type: ignore[misc]
    for seed in POLICY_SEEDS:
        cases.append((f"policy-{seed}",
                      lambda seed=seed: _compiled(policy_doc(random.Random(seed))),  # type: ignore[misc]
                      "policy"))
    for seed in METRIC_POLICY_SEEDS:
        cases.append((f"metric-policy-{seed}",
                      lambda seed=seed: _compiled(metric_policy_doc(random.Random(seed))),  # type: ignore[misc]
                      "metrics"))
    return cases


CASES = _cases()


def _world(rng: random.Random, kind: str) -> tuple[ClusterState, list[Pod], MetricsCache | None]:
    """A generated cluster and incoming pods: the scheduling generator (every built-in's
    inputs) for built-ins, the policy generator (labels, annotations, resources the
    rules read) for policies."""
    if kind == "builtin":
        nodes, existing = gen_cluster(rng, rng.randint(1, 30), rng.randint(0, 40))
        pods = [gen_pod(rng, f"new-{i}").raw() for i in range(4)]
    else:
        nodes = [policy_node(rng, f"n{i}") for i in range(rng.randint(1, 10))]
        existing = [policy_pod(rng, f"e{i}", rng.choice(nodes)["metadata"]["name"])
                    for i in range(rng.randint(0, 10))]
        pods = [policy_pod(rng, f"new-{i}") for i in range(4)]
    cluster = ClusterState([node_from_dict(n) for n in nodes],
                           [pod_from_dict(p) for p in existing])
    cache = (metrics_cache(rng, [n["metadata"]["name"] for n in nodes])
             if kind == "metrics" else None)
    return cluster, [pod_from_dict(p) for p in pods], cache


def _plugin(make: Callable[[], Plugin | None], cache: MetricsCache | None) -> Plugin:
    plugin = make()
    if plugin is None:
        pytest.skip("the generated policy is contradictory (lint rejects it)")
    if cache is not None:
        assert isinstance(plugin, CompiledPolicy)
        plugin.use_metrics(cache)
    return plugin


@pytest.mark.parametrize(("case", "make", "kind"), CASES, ids=[c[0] for c in CASES])
def test_columnar_form_matches_reference_form(case: str, make: Callable[[], Plugin | None],
                                              kind: str) -> None:
    rng = random.Random(case)
    for _ in range(ROUNDS):
        cluster, pods, cache = _world(rng, kind)
        plugin = _plugin(make, cache)
        n = len(cluster.node_infos())
        for pod in pods:
            subset = sorted(rng.sample(range(n), rng.randint(1, n)))
            for nodes in (None, subset):
                if isinstance(plugin, FilterPlugin):
                    run_filter(plugin, pod, cluster, nodes)
                if isinstance(plugin, ScorePlugin):
                    run_score(plugin, pod, cluster, nodes)
            if rng.random() < 0.5:  # move the cluster on: caches must notice
                node = rng.choice(cluster.node_infos()).name
                cluster.assume(pod, node)


@pytest.mark.parametrize(("case", "make", "kind"), CASES, ids=[c[0] for c in CASES])
def test_default_path_decides_as_reference_path(case: str,
                                                make: Callable[[], Plugin | None],
                                                kind: str) -> None:
    """The plugin in a profile (a policy joins the default profile; a built-in is in
    it already): same chosen node, feasible nodes and FailedScheduling message."""
    rng = random.Random(f"cycle-{case}")
    for round_ in range(ROUNDS // 2):
        cluster_seed = rng.randrange(2**32)
        outcomes = []
        for reference in (False, True):
            cluster, pods, cache = _world(random.Random(cluster_seed), kind)
            plugin = _plugin(make, cache)
            fw = default_framework([] if kind == "builtin" else [plugin], seed=round_)
            out = []
            for pod in pods:
                r = schedule_one(fw, pod, cluster, reference=reference)
                out.append((r.node, r.message, sorted(r.feasible)))
                if r.node is not None:
                    cluster.assume(pod, r.node)
            outcomes.append(out)
        assert outcomes[0] == outcomes[1]
