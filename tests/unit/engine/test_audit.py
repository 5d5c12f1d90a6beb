"""The audit of bound pods: each filter rule of each policy that applies to a pod asked
about the pod's node as it is now, with the pod itself not counted against itself."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.engine.audit import (
    FINISHED,
    NODE_MISSING,
    NOT_SERVED,
    TERMINATING,
    AuditResult,
    Violation,
    audit,
    by_scheduler,
)
from policyd.model.cluster import ClusterState
from policyd.model.records import Node, Pod
from policyd.policy.compiler import CompiledPolicy
from tests.builders import make_node, make_pod
from tests.unit.policy.conftest import check_docs, make_policy

HW = {"annotation": "hw", "value": "true", "label": "hw", "labelValue": "true"}


def policy(name: str, *filters: dict[str, Any], **spec: Any) -> CompiledPolicy:
    """A policy checked and compiled as a file would be (any error fails the test)."""
    result = check_docs(make_policy(name, name.title().replace("-", ""),
                                    filters=list(filters), **spec))
    assert [p for p in result.problems if p.level == "error"] == []
    [compiled] = result.compiled
    return compiled


def rule(rid: str, kind: str, spec: Any) -> dict[str, Any]:
    return {"id": rid, "message": f"{rid} says no", kind: spec}


PROD = rule("prod-only", "nodeLabels",
            {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]})


def run(nodes: list[Node], pods: list[Pod], *policies: CompiledPolicy) -> AuditResult:
    state = ClusterState(nodes, pods)
    before = (state.generation, {i.name: dict(i.requested) for i in state})
    result = audit(state, pods, by_scheduler({}, policies))
    # The audit's temporary removals are undone: the state is as it was.
    assert {i.name: dict(i.requested) for i in state} == before[1]
    assert all(state.node_of(p.uid) == p.node_name for p in pods
               if p.node_name and not p.finished and state.get(p.node_name))
    return result


def test_label_drift_gives_exactly_that_violation() -> None:
    env_prod = policy("env-prod", PROD, appliesTo={"labelSelector": {"matchLabels":
                                                                     {"tier": "prod"}}})
    nodes = [make_node("a").label("env", "prod").obj(),
             make_node("b").label("env", "staging").obj()]  # b's env label drifted
    pods = [make_pod("on-a").label("tier", "prod").node("a").obj(),
            make_pod("on-b").label("tier", "prod").node("b").obj(),
            make_pod("other").node("b").obj()]  # the policy does not apply to it
    result = run(nodes, pods, env_prod)
    assert result.violations == [Violation("default/on-b", "b", "env-prod", "EnvProd",
                                           "prod-only", "Enforce", "prod-only says no")]
    assert result.checked == 3 and result.skipped == []
    [checks] = result.policies
    assert checks.pods == [("default/on-a", "a"), ("default/on-b", "b")]
    assert result.violating_pods() == {"env-prod": 1}


def test_a_node_that_lost_its_label_reports_every_pod_there_per_rule() -> None:
    hw = policy("hw-encrypt", rule("hw-node", "annotationToNodeLabel", HW),
                appliesTo={"annotationSelector": {"matchAnnotations": {"hw": "true"}}})
    nodes = [make_node("a").obj()]  # the hw=true label is gone
    pods = [make_pod(f"p{i}").annotation("hw", "true").node("a").obj() for i in range(3)]
    result = run(nodes, pods, hw)
    assert [(v.pod, v.rule) for v in result.violations] == [
        (f"default/p{i}", "hw-node") for i in range(3)]


@pytest.mark.parametrize("headroom", [{"resource": "memory", "quantity": "1Gi"},
                                      {"resource": "memory", "percent": 25},
                                      {"resource": "pods", "quantity": 1}])
def test_headroom_does_not_count_the_pod_against_itself(headroom: dict[str, Any]) -> None:
    keep = policy("keep", rule("room", "headroom", headroom))
    # 4Gi allocatable, 3 pods max. The pod took 3Gi when it fitted with 1Gi (25%) left,
    # and it is the only pod with one more pod slot left: it fits exactly.
    node = make_node("a").capacity(cpu="4", memory="4Gi", pods="2").obj()
    pod = make_pod("fits").req(memory="3Gi").node("a").obj()
    assert run([node], [pod], keep).violations == []
    # A second pod of 1Gi on the node: now there is no room left for either.
    other = make_pod("late").req(memory="1Gi").node("a").obj()
    result = run([node], [pod, other], keep)
    assert {v.pod for v in result.violations} == {"default/fits", "default/late"}


def test_max_pods_per_node_counts_the_other_pods_only() -> None:
    cap = policy("cap", rule("two", "maxPodsPerNode", 2))
    node = make_node("a").obj()
    two = [make_pod(f"p{i}").node("a").obj() for i in range(2)]
    assert run([node], two, cap).violations == []
    three = [*two, make_pod("p2").node("a").obj()]
    assert len(run([node], three, cap).violations) == 3


def test_a_policy_that_does_not_apply_is_neither_reported_nor_checked() -> None:
    only_shop = policy("shop-prod", PROD, appliesTo={"namespaces": {"include": ["shop"]}})
    nodes = [make_node("a").label("env", "dev").obj()]
    pods = [make_pod("web", "default").node("a").obj()]
    result = run(nodes, pods, only_shop)
    assert result.violations == [] and result.policies == [] and result.checked == 1


def test_audit_mode_policies_are_reported_with_their_mode() -> None:
    audited = policy("env-prod", PROD, mode="Audit")
    enforced = policy("hw", rule("hw-node", "annotationToNodeLabel", HW))
    nodes = [make_node("a").obj()]
    pods = [make_pod("p").annotation("hw", "true").node("a").obj()]
    result = run(nodes, pods, audited, enforced)
    assert [(v.policy, v.mode) for v in result.violations] == [
        ("env-prod", "Audit"), ("hw", "Enforce")]
    assert [(c.policy, c.mode) for c in result.policies] == [
        ("env-prod", "Audit"), ("hw", "Enforce")]


def test_several_rules_of_one_policy_each_give_their_violation() -> None:
    both = policy("both", PROD, rule("hw-node", "annotationToNodeLabel", HW))
    nodes = [make_node("a").obj()]
    pods = [make_pod("p").annotation("hw", "true").node("a").obj()]
    assert [v.rule for v in run(nodes, pods, both).violations] == ["hw-node", "prod-only"]
    # A rule that does not bind to the pod (no annotation) is not asked.
    plain = [make_pod("q").node("a").obj()]
    assert [v.rule for v in run(nodes, plain, both).violations] == ["prod-only"]


def test_pods_not_audited_are_skipped_with_a_reason() -> None:
    prod = policy("env-prod", PROD)
    nodes = [make_node("a").label("env", "prod").obj()]
    pods = [make_pod("gone").node("missing").obj(),
            make_pod("done").node("a").phase("Succeeded").obj(),
            make_pod("leaving").node("a").terminating().obj(),
            make_pod("pending").obj(),  # not bound: not the audit's business
            make_pod("ok").node("a").obj()]
    result = run(nodes, pods, prod)
    assert [(s.pod, s.kind) for s in result.skipped] == [
        ("default/gone", NODE_MISSING), ("default/done", FINISHED),
        ("default/leaving", TERMINATING)]
    assert "missing" in result.skipped[0].reason and "not in the" in result.skipped[0].reason
    assert result.checked == 1 and result.violations == []


def test_pods_of_a_scheduler_no_profile_serves_are_skipped_or_judged_by_others() -> None:
    prod = policy("env-prod", PROD)
    nodes = [make_node("a").obj()]
    ours = make_pod("ours").scheduler("policyd").node("a").obj()
    theirs = make_pod("theirs").node("a").obj()  # default-scheduler
    state = ClusterState(nodes, [ours, theirs])
    served = audit(state, [ours, theirs], by_scheduler({"policyd": [prod]}))
    assert [v.pod for v in served.violations] == ["default/ours"]
    assert [(s.pod, s.kind) for s in served.skipped] == [("default/theirs", NOT_SERVED)]
    assert '"default-scheduler" (unset in the pod)' in served.skipped[0].reason
    everyone = audit(state, [ours, theirs], by_scheduler({"policyd": [prod]}, [prod]))
    assert [v.pod for v in everyone.violations] == ["default/ours", "default/theirs"]
    assert everyone.skipped == []


def test_score_only_policies_are_not_audited() -> None:
    scores = check_docs(make_policy("s", "S", scores=[{
        "id": "z", "weight": 1, "normalize": "none",
        "labelValue": {"label": "zone", "values": {"a": 100}, "default": 0}}])).compiled
    nodes = [make_node("a").obj()]
    pods = [make_pod("p").node("a").obj()]
    result = run(nodes, pods, *scores)
    assert result.violations == [] and result.policies == []


def score(rid: str, kind: str, spec: Any) -> dict[str, Any]:
    return {"id": rid, "weight": 1, "normalize": "max", kind: spec}


def test_label_keys_differing_only_by_case_are_found_for_every_rule_kind() -> None:
    from policyd.engine.audit import CaseMismatch, label_case_mismatches

    hw = policy("hw-encrypt", rule("hw-node", "annotationToNodeLabel", HW))
    prod = policy("env-prod", PROD)
    zoned = policy("zoned", scores=[
        score("z", "labelValue", {"label": "Zone", "values": {"a": 10}}),
        score("lat", "numeric", {"label": "myorg.io/latency-ms", "prefer": "lowest"})])
    nodes = [make_node("a").label("env", "prod").label("hw", "true").obj(),  # all fine
             make_node("b").label("ENV", "prod").label("HW", "true").obj(),
             make_node("c").label("zone", "a").label("MyOrg.io/latency-ms", "3").obj(),
             make_node("d").label("Env", "x").label("env", "prod").obj()]  # env is there
    found = label_case_mismatches([prod, hw, zoned, prod], nodes)
    assert found == [
        CaseMismatch("b", "env-prod", "EnvProd", "ENV", "env"),
        CaseMismatch("b", "hw-encrypt", "HwEncrypt", "HW", "hw"),
        CaseMismatch("c", "zoned", "Zoned", "zone", "Zone"),
        CaseMismatch("c", "zoned", "Zoned", "MyOrg.io/latency-ms", "myorg.io/latency-ms")]
    assert found[0].describe() == 'node has label "ENV", policy wants "env"'
    assert label_case_mismatches([], nodes) == []
    # A key no policy reads by name (a JMESPath rule reads what it likes) is not checked.
    assert policy("jp", rule("j", "jmespath", "node.metadata.labels.env == 'prod'")
                  ).node_label_keys == ()
