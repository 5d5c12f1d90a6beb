"""attach_metrics finds the plugins that read node metrics by the UsesNodeMetrics
protocol, which compiled policies satisfy without importing this package."""

from __future__ import annotations

from policyd.config.plugins import default_framework
from policyd.nodemetrics import StaticMetrics, UsesNodeMetrics, attach_metrics
from tests.unit.policy.conftest import check_docs, make_policy

METRIC_SCORE = {"id": "l", "weight": 1, "normalize": "minmax",
                "metric": {"name": "lat", "prefer": "lowest"}}


def test_compiled_policies_satisfy_the_protocol_and_built_ins_do_not() -> None:
    [policy] = check_docs(make_policy(scores=[METRIC_SCORE])).compiled
    assert isinstance(policy, UsesNodeMetrics)
    assert policy.metric_names == ("lat",)
    fw = default_framework([])
    assert not any(isinstance(wp.plugin, UsesNodeMetrics) for wp in fw.score_plugins)


def test_a_policy_in_several_profiles_is_attached_once_and_others_not_at_all() -> None:
    result = check_docs(make_policy(scores=[METRIC_SCORE]),
                        make_policy("q", "Q", scores=[{
                            "id": "n", "weight": 1, "normalize": "max",
                            "numeric": {"label": "n"}}]))
    with_metric, without = result.compiled
    frameworks = [default_framework([with_metric, without]), default_framework([with_metric])]
    static = StaticMetrics({"lat": {"a": 1}})
    assert attach_metrics(frameworks, static) == 1
    assert getattr(with_metric.score_rules[0], "source", None) is static
