"""Profile expansion (KubeSchedulerConfiguration v1 rules) and problem paths of
`policyd.config.plugins` and the plain loader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from policyd.config.loader import validate_config_file
from policyd.config.plugins import (
    ProfileError,
    build_framework,
    check_profile,
    closest_name,
    default_framework,
    parse_field_path,
    resolve_profile,
)
from policyd.framework.runtime import Framework
from policyd.policy import load_policies
from tests.unit.config.conftest import ROOT

DEFAULT_SCORES = [("TaintToleration", 3), ("NodeAffinity", 2), ("NodeResourcesFit", 1),
                  ("VolumeBinding", 1), ("PodTopologySpread", 2), ("InterPodAffinity", 2),
                  ("DynamicResources", 2),
                  ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1)]


def scores(fw: Framework) -> list[tuple[str, int]]:
    return [(s.plugin.name, s.weight) for s in fw.score_plugins]


def names(plugins: list[Any]) -> list[str]:
    return [p.name for p in plugins]


@pytest.fixture(scope="module")
def low_latency() -> dict[str, Any]:
    compiled, problems = load_policies([ROOT / "policies" / "low-latency.yaml"])
    assert problems == []
    return {p.name: p for p in compiled}


def test_default_profile_is_upstreams() -> None:
    fw = default_framework()
    assert fw.queue_sort is not None and fw.queue_sort.name == "PrioritySort"
    assert names(fw.filter_plugins) == [
        "NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts",
        "NodeResourcesFit", "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding",
        "VolumeZone", "PodTopologySpread", "InterPodAffinity", "DynamicResources",
        # Appended by v1.36 for its feature gate (beta, on), after DefaultBinder.
        "NodeDeclaredFeatures"]
    assert names(fw.pre_filter_plugins)[-1] == "NodeDeclaredFeatures"
    assert scores(fw) == DEFAULT_SCORES


@pytest.mark.parametrize(("plugins", "expected"), [
    # A default enabled again at its point: its config wins and it moves first
    # (expandMultiPointPlugins: overrides, then multiPoint, then the rest).
    ({"score": {"enabled": [{"name": "NodeAffinity", "weight": 5}]}},
     [("NodeAffinity", 5), ("TaintToleration", 3), ("NodeResourcesFit", 1),
      ("VolumeBinding", 1), ("PodTopologySpread", 2), ("InterPodAffinity", 2),
      ("DynamicResources", 2), ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1)]),
    ({"score": {"disabled": [{"name": "*"}], "enabled": [{"name": "ImageLocality",
                                                           "weight": 4}]}},
     [("ImageLocality", 4)]),
    ({"multiPoint": {"disabled": [{"name": "NodeAffinity"}, {"name": "ImageLocality"}]}},
     [s for s in DEFAULT_SCORES if s[0] not in ("NodeAffinity", "ImageLocality")]),
    # multiPoint enabled with a weight replaces the default in place.
    ({"multiPoint": {"enabled": [{"name": "ImageLocality", "weight": 9}]}},
     [*DEFAULT_SCORES[:-1], ("ImageLocality", 9)]),
    # weight 0 means the default weight.
    ({"score": {"enabled": [{"name": "TaintToleration", "weight": 0}]}}, DEFAULT_SCORES),
])
def test_score_expansion(plugins: dict[str, Any], expected: list[tuple[str, int]]) -> None:
    assert scores(build_framework({"plugins": plugins})) == expected


def test_multipoint_disable_removes_plugin_everywhere() -> None:
    fw = build_framework({"plugins": {"multiPoint": {"disabled": [{"name": "NodeAffinity"}]}}})
    for plugins in (fw.pre_filter_plugins, fw.filter_plugins, fw.pre_score_plugins):
        assert "NodeAffinity" not in names(plugins)
    assert "NodeAffinity" not in [n for n, _ in scores(fw)]


def test_disable_at_one_point_only() -> None:
    fw = build_framework({"plugins": {"filter": {"disabled": [{"name": "NodePorts"}]}}})
    assert "NodePorts" not in names(fw.filter_plugins)
    assert "NodePorts" in names(fw.pre_filter_plugins)


def test_pre_enqueue_is_a_point_of_its_own() -> None:
    """DynamicResources is the default profile's PreEnqueue plugin; disabling it there
    (as a kube-scheduler profile may) leaves its other points alone, and enabling a
    plugin at preEnqueue that has no PreEnqueue is refused as at any other point."""
    assert names(default_framework().pre_enqueue_plugins) == ["DynamicResources"]
    fw = build_framework({"plugins": {"preEnqueue": {"disabled": [{"name": "*"}]}}})
    assert fw.pre_enqueue_plugins == []
    assert "DynamicResources" in names(fw.pre_filter_plugins)
    with pytest.raises(ProfileError, match="does not implement the preEnqueue extension"):
        build_framework({"plugins": {"preEnqueue": {"enabled": [{"name": "NodePorts"}]}}})


def test_policy_plugins_default_and_override_weight(low_latency: dict[str, Any]) -> None:
    fw = build_framework({}, low_latency)
    assert scores(fw)[-1] == ("LowLatency", 2)  # spec.weight
    fw = build_framework({"plugins": {"score": {"enabled": [{"name": "LowLatency",
                                                             "weight": 6}]}}}, low_latency)
    assert scores(fw)[0] == ("LowLatency", 6)


def test_args_reach_the_plugin() -> None:
    fw = build_framework({"pluginConfig": [{"name": "NodeResourcesFit", "args": {
        "scoringStrategy": {"type": "MostAllocated"}}}]})
    assert "NodeResourcesFit" in names(fw.filter_plugins)


def test_problems_carry_json_paths_and_rules() -> None:
    with pytest.raises(ProfileError) as exc:
        build_framework({
            "plugins": {"filter": {"enabled": [{"name": "NodeAfinity"}]}},
            "pluginConfig": [
                {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "X"}}},
                {"name": "NodeResourcesFit"},
            ]}, path=("profiles", 2))
    got = [(p.path, p.rule) for p in exc.value.problems]
    assert got == [
        ("profiles[2].plugins.filter.enabled[0].name", "plugin-unknown"),
        ("profiles[2].pluginConfig[1]", "plugin-config-duplicate"),
        ("profiles[2].pluginConfig[0].args.scoringStrategy.type", "plugin-args"),
    ]
    assert 'did you mean "NodeAffinity"?' in exc.value.problems[0].message


def test_check_profile_reports_what_build_framework_refuses() -> None:
    profile = {"plugins": {"filter": {"enabled": [{"name": "NodeAfinity"}]}},
               "pluginConfig": [{"name": "NodeResourcesFit",
                                 "args": {"scoringStrategy": {"type": "X"}}}]}
    reported: list[tuple[tuple[str | int, ...], str, str]] = []
    check_profile(profile, {}, path=("profiles", 0),
                  report=lambda where, rule, message: reported.append((where, rule, message)))
    assert [(w, r) for w, r, _ in reported] == [
        (("profiles", 0, "plugins", "filter", "enabled", 0, "name"), "plugin-unknown"),
        (("profiles", 0, "pluginConfig", 0, "args", "scoringStrategy", "type"),
         "plugin-args")]
    with pytest.raises(ProfileError) as exc:
        build_framework(profile, path=("profiles", 0))
    assert [p.message for p in exc.value.problems] == [m for _, _, m in reported]


def test_resolve_profile_lists_each_point() -> None:
    problems: list[object] = []
    resolved = resolve_profile(
        {"schedulerName": "x", "plugins": {"queueSort": {"disabled": [{"name": "*"}]}}},
        report=lambda *problem: problems.append(problem))
    assert problems == []
    assert resolved.scheduler_name == "x"
    assert resolved.names_at("queueSort") == []
    assert resolved.names_at("preScore")[0] == "TaintToleration"


@pytest.mark.parametrize(("text", "path"), [
    ("", ()),
    ("kind", ("kind",)),
    ("scoringStrategy.resources[0].weight", ("scoringStrategy", "resources", 0, "weight")),
    ("addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1]",
     ("addedAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
      "nodeSelectorTerms", 1)),
    ("ignoredResources[3]", ("ignoredResources", 3)),
])
def test_parse_field_path(text: str, path: tuple[str | int, ...]) -> None:
    assert parse_field_path(text) == path


@pytest.mark.parametrize(("name", "hint"), [
    ("hwEncrypt", "HwEncrypt"), ("HWENCRYPT", "HwEncrypt"), ("NodeAffinty", "NodeAffinity"),
    ("Zzzzqqq", None),
])
def test_closest_name(name: str, hint: str | None) -> None:
    assert closest_name(name, ["HwEncrypt", "NodeAffinity", "NodePorts"]) == hint


def test_every_profile_problem_is_collected(tmp_path: Path) -> None:
    """Problems in several profiles are all reported, each at its JSON path, and no
    framework is built."""
    path = tmp_path / "p.yaml"
    path.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
                    "profiles:\n- {schedulerName: a}\n- {schedulerName: a}\n"
                    "- plugins: {score: {enabled: [{name: Nope}]}}\n")
    _, frameworks, problems = validate_config_file(path)
    assert frameworks == {}
    assert [(p.path, p.rule) for p in problems] == [
        ("profiles[1].schedulerName", "duplicate-scheduler-name"),
        ("profiles[2].plugins.score.enabled[0].name", "plugin-unknown")]
    assert problems[0].message.startswith('Duplicate value: "a"')
