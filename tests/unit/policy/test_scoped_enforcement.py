"""Scoped enforcement: a policy's mode per namespace (`spec.scopedModes`) and its
exceptions (`spec.exceptions`), in the cycle (both paths), the audit of bound pods,
the admission projection, and lint."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from policyd.admission.projection import project_pod
from policyd.config.plugins import default_framework
from policyd.engine.audit import audit, by_scheduler
from policyd.engine.cycle import schedule_one
from policyd.model.cluster import ClusterState
from policyd.model.records import Node, Pod
from policyd.policy.compiler import CompiledPolicy, scope_notes
from tests.builders import make_node, make_pod
from tests.clocks import ManualClock
from tests.unit.policy.conftest import check_docs, make_policy, rules

ZONE_RULE = {"id": "zone", "message": "node(s) are not in zone a", "nodeLabels": {
    "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}
FUTURE, PAST = "2999-01-01T00:00:00Z", "2001-01-01T00:00:00Z"


def policy(**spec: Any) -> dict[str, Any]:
    return make_policy("zone-a", "ZoneA", filters=[ZONE_RULE], **spec)


def compiled(doc: dict[str, Any]) -> CompiledPolicy:
    result = check_docs(doc)
    assert [p for p in result.problems if p.level == "error"] == []
    (p,) = result.compiled
    return p


def nodes() -> list[Node]:
    return [make_node("na").label("zone", "a").obj(), make_node("nb").label("zone", "b").obj()]


def pod(name: str, namespace: str, **labels: str) -> Pod:
    b = make_pod(name, namespace).uid(f"uid-{namespace}-{name}")
    for k, v in labels.items():
        b = b.label(k, v)
    return b.obj()


SCOPED = policy(mode="Audit", scopedModes=[{"mode": "Enforce", "namespaces": ["prod-*"]}])


def outcome(p: CompiledPolicy, target: Pod, reference: bool) -> tuple[set[str], list[str]]:
    """(feasible nodes, audited rules that rejected some node) of one cycle."""
    fw = default_framework([p])
    result = schedule_one(fw, target, ClusterState(nodes(), []), explain=reference)
    return set(result.feasible), sorted(f.rule for f in result.findings)


@pytest.mark.parametrize("reference", [False, True], ids=["fast", "reference"])
def test_the_namespace_decides_the_mode_on_both_paths(reference: bool) -> None:
    p = compiled(SCOPED)
    assert outcome(p, pod("web", "prod-eu"), reference) == ({"na"}, [])  # enforced
    assert outcome(p, pod("web", "dev"), reference) == ({"na", "nb"}, ["zone"])  # audited
    assert (p.mode_for(pod("x", "prod-eu")), p.mode_for(pod("x", "dev"))) == (
        "Enforce", "Audit")


def test_the_first_matching_scope_wins_and_spec_mode_is_the_rest() -> None:
    p = compiled(policy(scopedModes=[{"mode": "Audit", "namespaces": ["prod-canary"]},
                                     {"mode": "Enforce", "namespaces": ["prod-*"]}]))
    assert [p.mode_for(pod("x", ns)) for ns in ("prod-canary", "prod-eu", "dev")] == [
        "Audit", "Enforce", "Enforce"]


def exception(**kw: Any) -> dict[str, Any]:
    return {"name": "legacy", "reason": "moving to zone a (TICKET-1)", "expires": FUTURE,
            "rules": ["zone"], "match": {"namespaces": ["prod-eu"]}, **kw}


@pytest.mark.parametrize("reference", [False, True], ids=["fast", "reference"])
def test_an_exception_exempts_its_pods_from_its_rules_until_it_expires(
        reference: bool) -> None:
    p = compiled(policy(exceptions=[exception()]))
    assert outcome(p, pod("web", "prod-eu"), reference)[0] == {"na", "nb"}
    assert outcome(p, pod("web", "prod-us"), reference)[0] == {"na"}  # not matched
    p.now = lambda: 4102444800.0 * 10  # long after 2999: expired
    assert outcome(p, pod("web2", "prod-eu"), reference)[0] == {"na"}
    assert p.expired_exemption(pod("web3", "prod-eu"), "zone") is not None


def owned(name: str, namespace: str, kind: str, owner: str, **labels: str) -> Pod:
    b = make_pod(name, namespace).uid(f"uid-{name}").set(
        "metadata.ownerReferences", [{"apiVersion": "apps/v1", "kind": kind, "name": owner,
                                      "uid": "o", "controller": True}])
    for k, v in labels.items():
        b = b.label(k, v)
    return b.obj()


@pytest.mark.parametrize(("target", "workload", "exempt"), [
    (owned("web-5d8-x", "shop", "ReplicaSet", "web-5d8", **{"pod-template-hash": "5d8"}),
     {"kind": "Deployment", "name": "web"}, True),
    (owned("web-5d8-x", "shop", "ReplicaSet", "web-5d8", **{"pod-template-hash": "5d8"}),
     {"kind": "Deployment", "name": "api"}, False),
    (owned("db-0", "shop", "StatefulSet", "db"), {"kind": "StatefulSet", "name": "d*"}, True),
    (owned("db-0", "shop", "StatefulSet", "db"), {"kind": "Job", "name": "db"}, False),
    (pod("solo", "shop"), {"kind": "Pod", "name": "solo"}, True),
])
def test_workloads_are_matched_through_their_controller(
        target: Pod, workload: dict[str, str], exempt: bool) -> None:
    p = compiled(policy(exceptions=[exception(match={"workloads": [workload]})]))
    assert (p.exemption(target, "zone") is not None) is exempt


def test_every_match_part_must_match() -> None:
    p = compiled(policy(exceptions=[exception(match={
        "namespaces": ["shop"], "podSelector": {"matchLabels": {"tier": "legacy"}}})]))
    assert p.exemption(pod("a", "shop", tier="legacy"), "zone") is not None
    assert p.exemption(pod("b", "shop", tier="new"), "zone") is None
    assert p.exemption(pod("c", "other", tier="legacy"), "zone") is None


def test_the_audit_reports_the_pods_mode_and_the_exemptions() -> None:
    p = compiled(policy(mode="Audit", scopedModes=[{"mode": "Enforce",
                                                     "namespaces": ["prod-*"]}],
                        exceptions=[exception(match={"namespaces": ["prod-legacy"]})]))
    bound = [pod("a", "prod-eu"), pod("b", "dev"), pod("c", "prod-legacy")]
    bound = [on_node(x, "nb") for x in bound]
    result = audit(ClusterState(nodes(), bound), bound, by_scheduler({}, [p]))
    assert [(v.pod, v.mode) for v in result.violations] == [
        ("dev/b", "Audit"), ("prod-eu/a", "Enforce")]
    assert [(e.pod, e.rule, e.exception, e.reason, e.expires) for e in result.exempted] == [
        ("prod-legacy/c", "zone", "legacy", "moving to zone a (TICKET-1)", FUTURE)]


def on_node(p: Pod, node: str) -> Pod:
    return dataclasses.replace(p, node_name=node)


def test_the_projection_follows_the_pods_mode_and_exemptions() -> None:
    p = compiled(policy(mode="Audit", scopedModes=[{"mode": "Enforce",
                                                     "namespaces": ["prod-*"]}],
                        exceptions=[exception(match={"namespaces": ["prod-legacy"]})]))
    assert [r.rule for r in project_pod(pod("a", "prod-eu"), [p])] == ["zone"]
    assert project_pod(pod("b", "dev"), [p]) == []  # audited there
    assert project_pod(pod("c", "prod-legacy"), [p]) == []  # exempt


@pytest.mark.parametrize(("spec", "expected"), [
    ({"exceptions": [exception(rules=["zonez"])]},
     [("exception-unknown-rule", "spec.exceptions[0].rules[0]")]),
    ({"exceptions": [exception(), exception()]},
     [("exception-duplicate", "spec.exceptions[1].name")]),
    ({"exceptions": [exception(expires="2027-01-31")]},
     [("exception-expiry", "spec.exceptions[0].expires")]),
    ({"exceptions": [exception(match={})]},
     [("exception-empty-match", "spec.exceptions[0].match")]),
])
def test_lint_errors(spec: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    assert rules(check_docs(policy(**spec)).problems) == expected


@pytest.mark.parametrize(("spec", "expected"), [
    ({"exceptions": [exception(expires=PAST)]},
     ("exception-expired", "spec.exceptions[0].expires")),
    ({"appliesTo": {"namespaces": {"include": ["prod-eu"]}},
      "exceptions": [exception(match={"namespaces": ["dev-*"]})]},
     ("exception-matches-nothing", "spec.exceptions[0].match.namespaces")),
    ({"scopedModes": [{"mode": "Audit", "namespaces": ["prod-*"]},
                      {"mode": "Enforce", "namespaces": ["prod-eu"]}]},
     ("scoped-mode-shadowed", "spec.scopedModes[1].namespaces")),
])
def test_lint_warnings(spec: dict[str, Any], expected: tuple[str, str]) -> None:
    found = rules(check_docs(policy(**spec)).problems, warnings=True)
    assert expected in found
    assert [r for r in found if r[0].startswith(("exception", "scoped"))] == [expected]


def test_generated_pods_agree_on_both_paths() -> None:
    rng = random.Random(7)
    p = compiled(policy(mode=rng.choice(["Audit", "Enforce"]),
                        scopedModes=[{"mode": "Enforce", "namespaces": ["prod-*"]},
                                     {"mode": "Audit", "namespaces": ["dev-*"]}],
                        exceptions=[exception(match={"podSelector": {
                            "matchLabels": {"legacy": "yes"}}})]))
    for i in range(40):
        ns = rng.choice(["prod-a", "prod-b", "dev-x", "other"])
        labels = {"legacy": "yes"} if rng.random() < 0.3 else {}
        target = pod(f"p{i}", ns, **labels)
        assert outcome(p, target, False) == outcome(p, target, True), (ns, labels)


def test_exceptions_expire_by_the_clock_without_a_reload() -> None:
    clock = ManualClock(wall_start=4102444800.0 - 60)  # a minute before 2100-01-01
    p = compiled(policy(exceptions=[exception(expires="2100-01-01T00:00:00Z")]))
    p.now = clock.wall
    assert outcome(p, pod("a", "prod-eu"), False)[0] == {"na", "nb"}
    clock.advance(61)
    assert outcome(p, pod("b", "prod-eu"), False)[0] == {"na"}
    assert outcome(p, pod("c", "prod-eu"), True)[0] == {"na"}


def test_explain_notes_name_the_mode_the_exception_and_an_expiry() -> None:
    p = compiled(policy(mode="Audit", scopedModes=[{"mode": "Enforce",
                                                     "namespaces": ["prod-*"]}],
                        exceptions=[exception()]))
    assert scope_notes([p], pod("a", "prod-eu")) == [
        "policy zone-a is in Enforce mode in namespace prod-eu (spec.scopedModes; "
        "spec.mode is Audit)",
        "rule zone of policy zone-a: exempted by exception legacy (moving to zone a "
        "(TICKET-1); expires 2999-01-01T00:00:00Z)"]
    p.now = lambda: 4102444800.0 * 10
    assert scope_notes([p], pod("b", "prod-eu"))[1] == (
        "rule zone of policy zone-a: exception legacy expired at 2999-01-01T00:00:00Z; "
        "rule applies (moving to zone a (TICKET-1))")


@pytest.mark.parametrize(("spec", "expected"), [
    ({"exceptions": [exception(expires=(datetime.now(UTC) + timedelta(days=3)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"))]},
     ("exception-expiring", "spec.exceptions[0].expires")),
    ({"appliesTo": {"namespaces": {"exclude": ["prod-eu"]}},
      "exceptions": [exception()]},
     ("exception-matches-nothing", "spec.exceptions[0].match.namespaces")),
    ({"appliesTo": {"namespaces": {"include": ["prod-eu", "prod-us"],
                                   "exclude": ["prod-eu"]}},
      "exceptions": [exception()]},
     ("exception-matches-nothing", "spec.exceptions[0].match.namespaces")),
    ({"appliesTo": {"namespaces": {"include": ["prod-eu", "dev-x"]}},
      "scopedModes": [{"mode": "Enforce", "namespaces": ["prod-*"]},
                      {"mode": "Audit", "namespaces": ["staging-*", "qa"]}]},
     ("scoped-mode-matches-nothing", "spec.scopedModes[1].namespaces")),
    ({"appliesTo": {"namespaces": {"exclude": ["kube-system"]}}, "mode": "Audit",
      "scopedModes": [{"mode": "Enforce", "namespaces": ["kube-system"]}]},
     ("scoped-mode-matches-nothing", "spec.scopedModes[0].namespaces")),
])
def test_more_lint_warnings(spec: dict[str, Any], expected: tuple[str, str]) -> None:
    test_lint_warnings(spec, expected)


def labels(*reqs: tuple[str, str, list[str]], **match_labels: str) -> dict[str, Any]:
    return {"matchLabels": match_labels, "matchExpressions": [
        {"key": k, "operator": op, **({"values": v} if v else {})} for k, op, v in reqs]}


SELECTOR = "spec.exceptions[0].match.podSelector"


@pytest.mark.parametrize(("applies", "selector"), [
    (labels(tier="web"), labels(tier="batch")),
    (labels(("tier", "In", ["web", "api"])), labels(("tier", "NotIn", ["api", "web"]))),
    (labels(("legacy", "DoesNotExist", [])), labels(legacy="yes")),
    (labels(("legacy", "DoesNotExist", [])), labels(("legacy", "Exists", []))),
    (labels(tier="web"), labels(("tier", "In", ["batch", "jobs"]))),
    # The exception's own selector is impossible, whatever the policy applies to.
    ({}, labels(("tier", "NotIn", ["batch"]), tier="batch")),
    (labels(app="x"), labels(("tier", "Exists", []), ("tier", "DoesNotExist", []))),
], ids=["values", "in-notin", "absent-value", "absent-exists", "value-in", "own-notin",
        "own-exists"])
def test_an_exception_whose_labels_no_applied_pod_has_matches_nothing(
        applies: dict[str, Any], selector: dict[str, Any]) -> None:
    spec = {"appliesTo": {"labelSelector": applies},
            "exceptions": [exception(match={"podSelector": selector})]}
    found = rules(check_docs(policy(**spec)).problems, warnings=True)
    assert [r for r in found if r[0].startswith("exception")] == [
        ("exception-matches-nothing", SELECTOR)]
    p = compiled(policy(**spec))  # a warning: the policy still loads and runs
    assert p.scopes.exceptions


@pytest.mark.parametrize(("applies", "selector"), [
    (labels(("tier", "In", ["web", "batch"])), labels(tier="batch")),
    (labels(tier="web"), labels(("tier", "NotIn", ["batch"]))),
    (labels(("legacy", "NotIn", ["no"])), labels(legacy="yes")),
    (labels(tier="web"), labels(legacy="yes")),
    # An impossible labelSelector is never-matches' error, not also the exception's.
    (labels(("tier", "NotIn", ["web"]), tier="web"), labels(tier="batch")),
])
def test_an_exception_whose_labels_an_applied_pod_can_have_is_not_a_finding(
        applies: dict[str, Any], selector: dict[str, Any]) -> None:
    spec = {"appliesTo": {"labelSelector": applies},
            "exceptions": [exception(match={"podSelector": selector})]}
    found = rules(check_docs(policy(**spec)).problems, warnings=True)
    assert [r for r in found if r[0].startswith("exception")] == []


def test_a_scope_reaching_an_applied_namespace_is_not_a_finding() -> None:
    spec = {"appliesTo": {"namespaces": {"include": ["prod-eu", "dev-x"],
                                         "exclude": ["dev-x"]}},
            "scopedModes": [{"mode": "Enforce", "namespaces": ["qa", "prod-*"]}]}
    found = rules(check_docs(policy(**spec)).problems, warnings=True)
    assert [r for r in found if r[0].startswith("scoped")] == []


def test_an_exception_reaching_an_applied_namespace_is_not_a_finding() -> None:
    spec = {"appliesTo": {"namespaces": {"exclude": ["prod-us"]}},
            "exceptions": [exception(match={"namespaces": ["prod-*"]})]}
    found = rules(check_docs(policy(**spec)).problems, warnings=True)
    assert [r for r in found if r[0].startswith("exception")] == []
