"""The diff's claims, each checked on generated clusters and generated policy changes
against what the engine says of each version on its own: explain's cycle
(`schedule_one(explain=True)`, the reference path) for the pending and rescheduled
pods, and a full audit (every policy, not only the changed ones) for the bound pods."""

from __future__ import annotations

import copy
import dataclasses
import random
from typing import Any

import pytest

from policyd.config.plugins import default_framework
from policyd.config.profile_schema import DEFAULT_SCHEDULER_NAME
from policyd.engine.audit import Violation, audit, by_scheduler
from policyd.engine.cycle import ScheduleResult, schedule_one
from policyd.engine.diff import (
    FITS,
    MOVES,
    SAME,
    STARTS_FITTING,
    STILL_UNFIT,
    STOPS_FITTING,
    TIE,
    DiffResult,
    PodChange,
    Version,
    diff,
)
from policyd.model.cluster import ClusterState
from policyd.model.records import Node, Pod, node_from_dict, pod_from_dict
from policyd.policy.compiler import CompiledPolicy
from tests.builders import PodBuilder, make_node, make_pod
from tests.gen.policies import policy_doc, policy_node, policy_pod
from tests.unit.policy.conftest import check_docs, make_policy


def compiled(docs: list[dict[str, Any]]) -> list[CompiledPolicy]:
    result = check_docs(*docs)
    assert [p for p in result.problems if p.level == "error"] == []
    return list(result.compiled)


def named(doc: dict[str, Any], i: int) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["metadata"]["name"] = f"p{i}"
    doc["spec"]["pluginName"] = f"P{i}"
    return doc


def valid_policy(rng: random.Random, i: int) -> dict[str, Any]:
    """A generated policy lint accepts (the generator may draw a selector that can
    never match, which lint refuses), named p<i>."""
    while True:
        doc = named(policy_doc(rng), i)
        if not [p for p in check_docs(doc).problems if p.level == "error"]:
            return doc


def changed_policies(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A policy set and a change of it: some policies kept, some rewritten under the
    same name, some removed, some added."""
    old = [valid_policy(rng, i) for i in range(rng.randint(1, 4))]
    new = []
    for i, doc in enumerate(old):
        roll = rng.random()
        if roll < 0.4:
            new.append(doc)  # unchanged
        elif roll < 0.85:
            new.append(valid_policy(rng, i))  # rewritten
    new += [valid_policy(rng, 10 + i) for i in range(rng.randint(0, 2))]
    return old, new


def cluster(rng: random.Random) -> tuple[list[Node], list[Pod]]:
    nodes = [node_from_dict(policy_node(rng, f"n{i}")) for i in range(rng.randint(3, 12))]
    pods = []
    for i in range(rng.randint(4, 30)):
        bound = rng.random() < 0.6
        raw = policy_pod(rng, f"x{i}", node=rng.choice(nodes).name if bound else "")
        raw["spec"]["schedulerName"] = DEFAULT_SCHEDULER_NAME
        pods.append(pod_from_dict(raw))
    return nodes, pods


def version(nodes: list[Node], pods: list[Pod], policies: list[CompiledPolicy],
            seed: int) -> Version:
    fw = default_framework(policies, scheduler_name=DEFAULT_SCHEDULER_NAME, seed=seed)
    return Version({DEFAULT_SCHEDULER_NAME: fw}, ClusterState(nodes, pods), policies,
                   by_scheduler({}, policies))


def explained(v: Version, pod: Pod) -> ScheduleResult:
    return schedule_one(v.frameworks[DEFAULT_SCHEDULER_NAME], pod, v.cluster, explain=True)


def best(result: ScheduleResult) -> tuple[set[str], int | None]:
    """The nodes at the best total in explain's scores, and that total."""
    scores = result.scores
    if scores is None or not scores.totals:
        return set(result.feasible), None
    top = max(scores.totals)
    return {n.name for n, t in zip(scores.nodes, scores.totals, strict=True) if t == top}, top


def total_of(result: ScheduleResult, node: str) -> int | None:
    scores = result.scores
    if scores is None:
        return None
    return next((t for n, t in zip(scores.nodes, scores.totals, strict=True)
                 if n.name == node), None)


def check_placement(c: PodChange, old: Version, new: Version, pod: Pod) -> None:
    before, after = explained(old, pod), explained(new, pod)
    fits_before, fits_after = before.node is not None, after.node is not None
    assert (c.old.status == FITS) == fits_before, c
    assert (c.new.status == FITS) == fits_after, c
    expected = {(True, False): STOPS_FITTING, (False, True): STARTS_FITTING,
                (False, False): STILL_UNFIT}.get((fits_before, fits_after))
    if expected is not None:
        assert c.change == expected
        if not fits_after:
            assert c.new.message == after.message
        return
    old_best, _ = best(before)
    new_best, _ = best(after)
    assert c.old.node in before.feasible and c.new.node in after.feasible
    # The diff's choices are among explain's best nodes, its counts are explain's.
    if c.old.total is not None:
        assert c.old.node in old_best and c.old.total == total_of(before, c.old.node)
        assert c.old.tied == len(old_best) and c.old.feasible == len(before.feasible)
    if c.new.total is not None:
        assert c.new.node in new_best and c.new.total == total_of(after, c.new.node)
        assert c.new.tied == len(new_best)
        assert c.old_node_now == total_of(after, c.old.node)
    if c.change == MOVES:
        # A move: neither version would have drawn the other's node.
        assert not old_best & new_best and c.new.node not in old_best
    elif c.change == SAME:
        assert old_best == new_best
    else:
        assert c.change == TIE
        assert old_best != new_best and old_best & new_best


def key(v: Violation) -> tuple[str, str, str]:
    return (v.pod, v.policy, v.rule)


def check_bound(result: DiffResult, old: Version, new: Version, pods: list[Pod]) -> None:
    # Every policy of each version, asked about every bound pod: the full answer the
    # diff's changed-policies-only audit must agree with.
    before = {key(v): v for v in audit(old.cluster, pods, old.choose).violations}
    after = {key(v): v for v in audit(new.cluster, pods, new.choose).violations}
    assert {key(v) for v in result.new_violations} == after.keys() - before.keys()
    assert {key(v) for v in result.fixed_violations} == before.keys() - after.keys()
    for v in result.new_violations:
        assert v == after[key(v)]


SEEDS = range(40)
# What the generated changes did, across the seeds (checked to be no empty test below).
SEEN: dict[str, int] = {}


@pytest.mark.parametrize("seed", SEEDS)
def test_every_claim_matches_each_version_alone(seed: int) -> None:
    rng = random.Random(seed)
    old_docs, new_docs = changed_policies(rng)
    nodes, pods = cluster(rng)
    old = version(nodes, pods, compiled(old_docs), seed)
    new = version(nodes, pods, compiled(new_docs), seed)
    result = diff(old, new, pods, rescore_bound=3, seed=seed)
    pending = [p for p in pods if not p.node_name and not p.finished and not p.deleting]
    assert [c.pod for c in result.pending] == [p.key for p in pending]
    for c, pod in zip(result.pending, pending, strict=True):
        check_placement(c, old, new, pod)
    check_bound(result, old, new, pods)
    for name, count in [*result.counts.items(), ("new-violation", len(result.new_violations)),
                        ("fixed", len(result.fixed_violations))]:
        SEEN[name] = SEEN.get(name, 0) + count
    for c in result.rescored:
        [pod] = [p for p in pods if p.key == c.pod]
        unbound = dataclasses.replace(pod, node_name="", cache={})  # back in the queue
        with old.cluster.what_if(remove=[pod]), new.cluster.what_if(remove=[pod]):
            check_placement(c, old, new, unbound)
    # Nothing was left changed: every bound pod on its node in both states.
    for v in (old, new):
        assert all(v.cluster.node_of(p.uid) == p.node_name for p in pods
                   if p.node_name and not p.finished)


def test_the_generated_changes_cover_every_kind_of_claim() -> None:
    # Runs after the seeds above (pytest keeps file order): each kind of claim was
    # made at least once, so the checks above were not vacuous.
    if len(SEEN) == 0:
        pytest.skip("run with the generated cases")
    # (A tie is rarer on these clusters: test_overlapping_best_nodes_are_a_tie.)
    for kind in (STARTS_FITTING, STOPS_FITTING, MOVES, SAME, "new-violation", "fixed"):
        assert SEEN.get(kind, 0) > 0, (kind, SEEN)


def pod(name: str) -> PodBuilder:
    return make_pod(name).scheduler(DEFAULT_SCHEDULER_NAME)


def prod_policy(values: list[str], name: str = "env-prod", mode: str = "Enforce"
                ) -> dict[str, Any]:
    return make_policy(name, "EnvProd", mode=mode, filters=[{
        "id": "prod-only", "message": "not a prod node", "nodeLabels": {
            "matchExpressions": [{"key": "env", "operator": "In", "values": values}]}}])


def test_a_narrowed_filter_names_the_bound_pods_it_now_rejects_and_those_it_frees() -> None:
    nodes = [make_node("a").label("env", "prod").obj(),
             make_node("b").label("env", "staging").obj()]
    pods = [pod("on-a").node("a").obj(), pod("on-b").node("b").obj(),
            pod("waiting").obj()]
    old = version(nodes, pods, compiled([prod_policy(["prod"])]), 1)
    new = version(nodes, pods, compiled([prod_policy(["staging"])]), 1)
    result = diff(old, new, pods)
    assert [(v.pod, v.node, v.rule) for v in result.new_violations] == [
        ("default/on-a", "a", "prod-only")]
    assert [(v.pod, v.node) for v in result.fixed_violations] == [("default/on-b", "b")]
    [waiting] = result.pending
    assert (waiting.old.node, waiting.new.node, waiting.change) == ("a", "b", MOVES)


def test_an_unchanged_policy_is_not_asked_again() -> None:
    # The pod violates the policy in both versions: not a new violation, and the
    # diff does not even ask (only the changed policy is audited).
    nodes = [make_node("a").label("env", "dev").obj()]
    pods = [pod("on-a").node("a").obj()]
    same = prod_policy(["prod"])
    other_old = prod_policy(["x"], name="other")
    other_old["spec"]["pluginName"] = "Other"
    other_new = copy.deepcopy(other_old)
    other_new["spec"]["filters"][0]["nodeLabels"]["matchExpressions"][0]["values"] = ["dev"]
    old = version(nodes, pods, compiled([same, other_old]), 1)
    new = version(nodes, pods, compiled([same, other_new]), 1)
    result = diff(old, new, pods)
    assert result.new_violations == []
    assert [(v.policy, v.pod) for v in result.fixed_violations] == [("other", "default/on-a")]
    assert [(c.policy, c.change) for c in result.policies] == [("other", "changed")]


def test_identical_nodes_are_the_same_placement_whatever_the_draw() -> None:
    nodes = [make_node(n).obj() for n in ("a", "b", "c")]
    pods = [pod("waiting").obj()]
    results = [diff(version(nodes, pods, [], s), version(nodes, pods, [], s + 1), pods)
               for s in range(8)]
    assert {r.pending[0].change for r in results} == {SAME}
    assert any(r.pending[0].old.node != r.pending[0].new.node for r in results)
    assert all(r.pending[0].old.tied == 3 for r in results)


def test_overlapping_best_nodes_are_a_tie() -> None:
    # Old: a and b tie (c is not prod); new: b and c tie (a is not allowed any more).
    nodes = [make_node("a").label("env", "prod").obj(),
             make_node("b").label("env", "prod").label("x", "1").obj(),
             make_node("c").label("env", "staging").label("x", "1").obj()]
    pods = [pod("waiting").label("env", "prod").obj()]
    old_policy = prod_policy(["prod"])
    new_policy = make_policy("env-prod", "EnvProd", filters=[{
        "id": "x-only", "message": "no x", "nodeLabels": {
            "matchExpressions": [{"key": "x", "operator": "Exists"}]}}])
    result = diff(version(nodes, pods, compiled([old_policy]), 1),
                  version(nodes, pods, compiled([new_policy]), 1), pods)
    [c] = result.pending
    assert (c.old.tied, c.new.tied, c.change) == (2, 2, TIE)
    assert set(c.old.best) == {"a", "b"} and set(c.new.best) == {"b", "c"}


FILTERS = ["NodeResourcesFit", "TaintToleration", "NodeAffinity", "NodePorts",
           "PodTopologySpread", "InterPodAffinity", "NodeUnschedulable"]


def profile_version(nodes: list[Node], pods: list[Pod], disabled: list[str]) -> Version:
    from policyd.config.plugins import build_framework

    fw = build_framework({"schedulerName": DEFAULT_SCHEDULER_NAME, "plugins": {
        "filter": {"disabled": [{"name": n} for n in disabled]}}}, {}, seed=1)
    return Version({DEFAULT_SCHEDULER_NAME: fw}, ClusterState(nodes, pods), [],
                   by_scheduler({DEFAULT_SCHEDULER_NAME: []}))


def explained_rejection(v: Version, pod: Pod) -> tuple[str, str] | None:
    """explain's first rejecting plugin on the pod's own node, the pod taken off it."""
    fw = v.frameworks[DEFAULT_SCHEDULER_NAME]
    with v.cluster.what_if(remove=[pod]):
        result = schedule_one(fw, pod, v.cluster, explain=True)
    for plugin, status in result.filter_details.get(pod.node_name, {}).items():
        if status is not None and status.is_rejected:
            return plugin, status.message
    return None


BUILTIN_SEEN = [0, 0]  # new and fixed violations over the seeds


@pytest.mark.parametrize("seed", range(12))
def test_builtin_filter_changes_match_explain_on_each_pods_node(seed: int) -> None:
    from tests.gen.clusters import gen_cluster, gen_pod

    rng = random.Random(seed)
    node_objs, pod_objs = gen_cluster(rng, rng.randint(3, 8), rng.randint(5, 25))
    pod_objs += [gen_pod(rng, f"new-{i}").raw() for i in range(3)]
    for raw in pod_objs:
        raw["spec"]["schedulerName"] = DEFAULT_SCHEDULER_NAME
    nodes = [node_from_dict(n) for n in node_objs]
    pods = [pod_from_dict(p) for p in pod_objs]
    old = profile_version(nodes, pods, rng.sample(FILTERS, rng.randint(0, 3)))
    new = profile_version(nodes, pods, rng.sample(FILTERS, rng.randint(0, 3)))
    result = diff(old, new, pods, builtins_changed=True)
    added = {(v.pod, v.plugin, v.message) for v in result.new_violations}
    fixed = {(v.pod, v.plugin, v.message) for v in result.fixed_violations}
    expected_added, expected_fixed = set(), set()
    for pod in pods:
        if not pod.node_name or pod.finished or pod.deleting:
            continue
        was, now = explained_rejection(old, pod), explained_rejection(new, pod)
        if now is not None and (was is None or was[0] != now[0]):
            expected_added.add((pod.key, *now))
        if was is not None and (now is None or now[0] != was[0]):
            expected_fixed.add((pod.key, *was))
    assert added == expected_added
    assert fixed == expected_fixed
    BUILTIN_SEEN[0] += len(added)
    BUILTIN_SEEN[1] += len(fixed)
    for c, pod in zip(result.pending, [p for p in pods if not p.node_name
                                       and not p.finished and not p.deleting], strict=True):
        check_placement(c, old, new, pod)


def test_the_builtin_seeds_found_new_and_fixed_violations() -> None:
    if BUILTIN_SEEN == [0, 0]:
        pytest.skip("run with the generated cases")
    assert BUILTIN_SEEN[0] > 0 and BUILTIN_SEEN[1] > 0, BUILTIN_SEEN
