"""SchedulingPolicy objects from the API server are checked as files are."""

from __future__ import annotations

import copy
from typing import Any

from policyd.policy.objects import check_objects, describe, object_document

POLICY: dict[str, Any] = {
    "apiVersion": "policyd.io/v1alpha1", "kind": "SchedulingPolicy",
    "metadata": {"name": "hw", "uid": "u-1", "resourceVersion": "7", "generation": 3,
                 "creationTimestamp": "2026-12-01T10:00:00Z", "managedFields": [{}]},
    "spec": {"pluginName": "Hw", "filters": [{
        "id": "hw", "message": "no hw", "nodeLabels": {"matchLabels": {"hw": "true"}}}]},
    "status": {"conditions": [{"type": "Accepted", "status": "True"}]},
}


def _policy(name: str, plugin: str, **spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(POLICY)
    out["metadata"]["name"] = name
    out["spec"]["pluginName"] = plugin
    out["spec"].update(spec)
    return out


def test_server_fields_are_not_the_authors_and_a_valid_object_compiles() -> None:
    (verdict,) = check_objects([POLICY])
    assert verdict.accepted and verdict.errors == []
    assert verdict.compiled is not None and verdict.compiled.name == "Hw"
    assert (verdict.name, verdict.generation) == ("hw", 3)
    assert set(object_document(POLICY).data["metadata"]) == {"name"}


def test_each_object_is_judged_alone() -> None:
    bad = _policy("bad", "Bad", filters=[{"id": "x", "jmespath": "node.metadata.["}])
    good, wrong = check_objects([POLICY, bad])
    assert good.accepted and not wrong.accepted
    assert wrong.errors and all(p.file == "schedulingpolicy/bad" for p in wrong.problems)
    assert describe(wrong.errors[0]).startswith("spec.filters[0]")


def test_a_name_or_plugin_a_file_already_uses_is_an_error_on_the_object() -> None:
    file_doc = object_document(_policy("hw", "Other"))
    file_doc.file = "policies/hw.yaml"
    (same_name,) = check_objects([POLICY], [file_doc])
    assert not same_name.accepted
    assert "policies/hw.yaml" in same_name.errors[0].message
    (same_plugin,) = check_objects([_policy("other", "Other")], [file_doc])
    assert [p.rule for p in same_plugin.errors] == ["duplicate-plugin-name"]


def test_two_objects_with_one_plugin_name_leave_the_second_refused() -> None:
    first, second = check_objects([POLICY, _policy("hw2", "Hw")])
    assert first.accepted and not second.accepted


def test_metric_rules_must_name_a_metric_of_the_profile_when_one_is_given() -> None:
    from policyd.policy.metric_refs import MetricCheck

    scored = _policy("lat", "Lat", scores=[
        {"id": "fast", "weight": 2, "normalize": "minmax",
         "metric": {"name": "latency_ms", "prefer": "lowest"}},
        {"id": "cool", "weight": 1, "normalize": "minmax",
         "metric": {"name": "temprature", "prefer": "lowest"}}])
    (unchecked,) = check_objects([scored])  # no profile (explain without --config)
    assert unchecked.accepted, unchecked.problems
    profile = MetricCheck(frozenset({"latency_ms", "temperature"}), "policyd.yaml")
    (checked,) = check_objects([scored], metrics=profile)
    assert not checked.accepted
    (error,) = checked.errors
    assert (error.rule, error.path) == ("unknown-metric", "spec.scores[1].metric.name")
    assert describe(error) == (
        "spec.scores[1].metric.name: metric 'temprature' is not defined by any "
        "metricsProviders entry of policyd.yaml; did you mean 'temperature'?")
    (fine,) = check_objects([scored], metrics=MetricCheck(
        frozenset({"latency_ms", "temprature"}), "policyd.yaml"))
    assert fine.accepted
