"""`cel` filter and score rules: the issue's one-liner, missing keys as errors and their
guards, result types, and the node view built once per node record."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.model.cluster import ClusterState
from policyd.model.node_info import NodeInfo
from policyd.model.records import Node, Pod
from policyd.policy.compiler import compile_policy
from policyd.policy.requeue import POD_OWN_UPDATE
from policyd.policy.rules.filters.cel import CelFilter
from policyd.policy.rules.scores.cel import CelScore
from tests.builders import make_node, make_pod
from tests.unit.policy.conftest import make_policy


def _info(node: Node) -> NodeInfo:
    [info] = ClusterState([node], []).node_infos()
    return info


def _pod(**annotations: str) -> Pod:
    return make_pod("p").annotations(annotations).label("env", "prod").req(cpu="1").obj()


GOLD = make_node("gold").label("tier", "gold").capacity(cpu="8", memory="32Gi").obj()
SILVER = make_node("silver").label("tier", "silver").capacity(cpu="4", memory="8Gi").obj()
BARE = make_node("bare").capacity(cpu="2", memory="4Gi").obj()

ONE_LINER = 'node.labels["tier"] == pod.annotations["myorg.io/tier"]'


@pytest.mark.parametrize(("expression", "pod", "node", "passes"), [
    (ONE_LINER, {"myorg.io/tier": "gold"}, GOLD, True),
    (ONE_LINER, {"myorg.io/tier": "gold"}, SILVER, False),
    # A missing key is an error, and an error rejects.
    (ONE_LINER, {"myorg.io/tier": "gold"}, BARE, False),
    (ONE_LINER, {}, GOLD, False),
    # Guards: has(), in, optionals, && / || skipping the side that fails.
    ("has(node.labels.tier)", {}, GOLD, True),
    ("has(node.labels.tier)", {}, BARE, False),
    ('"myorg.io/tier" in pod.annotations', {"myorg.io/tier": "x"}, BARE, True),
    ('node.labels.?tier.orValue("none") == "none"', {}, BARE, True),
    ('!("myorg.io/tier" in pod.annotations) || node.labels.?tier.orValue("") == '
     'pod.annotations["myorg.io/tier"]', {}, BARE, True),
    ('!("myorg.io/tier" in pod.annotations) || node.labels.?tier.orValue("") == '
     'pod.annotations["myorg.io/tier"]', {"myorg.io/tier": "gold"}, BARE, False),
    # The raw objects, beyond the shortcuts.
    ('quantity(node.status.allocatable.memory).isGreaterThan(quantity("16Gi"))', {},
     GOLD, True),
    ('quantity(node.status.allocatable.memory).isGreaterThan(quantity("16Gi"))', {},
     SILVER, False),
    ('pod.spec.containers.all(c, quantity(c.resources.requests.cpu).asInteger() <= '
     'quantity(node.status.allocatable.cpu).asInteger())', {}, BARE, True),
    ('pod.metadata.labels.env == "prod" && node.metadata.name == "gold"', {}, GOLD, True),
    # Wholesale use of a variable gets the whole object.
    ('size(node) > 3 && node.metadata.name == "silver"', {}, SILVER, True),
    ('cel.bind(n, node, n.labels.tier) == "gold"', {}, GOLD, True),
    # A dyn result that is not a bool rejects (it is not true).
    ("node.labels.tier", {}, GOLD, False),
])
def test_filter(expression: str, pod: dict[str, str], node: Node, passes: bool) -> None:
    rule = CelFilter("r", "m", expression)
    policy: Any = None  # unused by cel rules
    check = rule.bind(policy, _pod(**pod))
    assert check is not None
    assert check(_info(node)) is passes


@pytest.mark.parametrize(("expression", "node", "value"), [
    ("int(node.labels.n)", make_node("a").label("n", "7").obj(), 7.0),
    ("double(node.labels.n) / 2.0", make_node("a").label("n", "5").obj(), 2.5),
    # The builder adds kubernetes.io/hostname: two labels.
    ("uint(size(node.labels)) * 3u", make_node("a").label("n", "5").obj(), 6.0),
    ("quantity(node.status.allocatable.memory).asApproximateFloat()", SILVER,
     8 * 2.0**30),
    # Missing: an error (no label, a label that is not a number), a string, a bool.
    ("int(node.labels.n)", BARE, None),
    ("int(node.labels.n)", make_node("a").label("n", "x").obj(), None),
    ("dyn(node.metadata.name)", BARE, None),
    ("dyn(true)", BARE, None),
])
def test_score(expression: str, node: Node, value: float | None) -> None:
    rule = CelScore({"id": "s", "weight": 1, "normalize": "none", "cel": expression})
    assert rule.bind(_pod())(_info(node)) == value


def test_the_node_view_is_built_once_per_node_record_and_holds_only_what_is_read() -> None:
    rule = CelFilter("r", "m", ONE_LINER)
    node = make_node("gold").label("tier", "gold").ready().image(10, "busybox").obj()
    info = _info(node)
    for _ in range(2):
        check = rule.bind(None, _pod(**{"myorg.io/tier": "gold"}))  # type: ignore[arg-type]
        assert check is not None and check(info)
    [(view, text)] = [v for k, v in node.cache.items() if k.startswith("cel-keyed-cel-view:")]
    assert view == {"labels": {"tier": "gold"}}
    assert text == '{"labels": {"tier": "gold"}}'


def test_a_pod_evaluates_once_per_distinct_node_view() -> None:
    rule = CelFilter("r", "m", ONE_LINER)
    calls: list[object] = []
    evaluate = rule.expr.rule.evaluate

    class Counting:
        def evaluate(self, activation: Any) -> Any:
            calls.append(activation["node"])
            return evaluate(activation)
    rule.expr.rule = Counting()  # type: ignore[assignment]
    nodes = [make_node(f"n{i}").label("tier", ("gold", "silver")[i % 2]).obj()
             for i in range(6)] + [BARE]
    infos = ClusterState(nodes, []).node_infos()
    check = rule.bind(None, _pod(**{"myorg.io/tier": "gold"}))  # type: ignore[arg-type]
    assert check is not None
    assert [check(i) for i in infos] == [True, False] * 3 + [False]
    assert len(calls) == 3  # gold, silver, and the node without the label (an error)
    again = rule.bind(None, _pod(**{"myorg.io/tier": "silver"}))  # type: ignore[arg-type]
    assert again is not None
    assert [again(i) for i in infos] == [False, True] * 3 + [False]
    assert len(calls) == 6


def test_a_node_only_result_is_kept_on_the_node_record_errors_too() -> None:
    rule = CelScore({"id": "s", "weight": 1, "normalize": "none",
                     "cel": "int(node.labels.n)"})
    good = make_node("a").label("n", "4").obj()
    bad = make_node("b").obj()
    for _ in range(2):
        value = rule.bind(_pod())
        assert (value(_info(good)), value(_info(bad))) == (4.0, None)
    assert good.cache["cel-result:int(node.labels.n)"] == 4
    assert "no such key: n" in str(bad.cache["cel-result:int(node.labels.n)"])


def test_the_issue_one_liner_as_a_policy() -> None:
    doc = make_policy(filters=[{"id": "tier", "message": "node(s) are not in the pod's tier",
                                "cel": ONE_LINER}])
    policy = compile_policy(doc)
    (rule,) = policy.filter_rules
    assert isinstance(rule, CelFilter)
    check = rule.bind(policy, _pod(**{"myorg.io/tier": "silver"}))
    assert check is not None
    assert [check(_info(n)) for n in (GOLD, SILVER, BARE)] == [False, True, False]


def test_node_label_keys_are_the_labels_read_by_name() -> None:
    rule = CelFilter("r", "m", 'node.labels.tier == "a" && has(node.metadata.labels.Zone) '
                               '&& node.labels[?"myorg.io/x"].hasValue() && '
                               'pod.labels.env == "b" && size(node.labels) > 0')
    assert sorted(rule.node_label_keys()) == ["Zone", "myorg.io/x", "tier"]
    score = CelScore({"id": "s", "weight": 1, "normalize": "none",
                      "cel": "int(node.metadata.labels.n)"})
    assert score.node_label_keys() == ("n",)


def test_a_rule_that_skipped_lint_fails_naming_it() -> None:
    with pytest.raises(ValueError, match=r"^rule 'r': invalid CEL 'node\.x =': ERROR: "
                                         r"<input>:1:8: Syntax error"):
        CelFilter("r", "m", "node.x =")


def test_only_a_rule_naming_pod_requeues_on_the_pod_update() -> None:
    for expression, reads in ((ONE_LINER, True), ('node.labels.?tier.orValue("") == "a"',
                                                  False)):
        policy = compile_policy(make_policy(filters=[{"id": "f", "message": "m",
                                                      "cel": expression}]))
        assert policy.filter_rules[0].reads_pod is reads
        events = [e.event for e in policy.events_to_register()]
        assert (POD_OWN_UPDATE in events) is reads
