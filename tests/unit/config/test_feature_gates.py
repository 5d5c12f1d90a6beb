"""The profile's `featureGates` (and --feature-gates over it): each refusal at its
key's line and column, dependencies checked on the combined gates, the gates reaching
the frameworks and check-config's effective configuration."""

from __future__ import annotations

from pathlib import Path

from policyd.config.effective import effective_configuration
from policyd.config.loader import validate_config_file, validated_config_file
from policyd.features import BY_NAME, turning_off
from policyd.plugins import names
from tests.unit.config.conftest import HEAD, Check, where

# What kube-scheduler v1.36.3 needs to start with NodeDeclaredFeatures off: every gate
# on by default that depends on it, off too.
BOTH_OFF = "featureGates:\n" + "".join(f"  {name}: false\n"
                                       for name, _ in turning_off("NodeDeclaredFeatures"))


def _profile(tmp_path: Path, policy_dir: Path, body: str) -> Path:
    path = tmp_path / "profile.yaml"
    path.write_text(HEAD + body)
    return path


def test_every_refused_gate_at_its_key(check: Check) -> None:
    problems = check("""\
        featureGates:
          NoSuchGate: true
          SidecarContainers: false
          WorkloadAwarePreemption: true
          SchedulerPopFromBackoffQ: "false"
          NominatedNodeNameForExpectation: false
        """)
    assert where(problems) == [(5, 3, "feature-gate"), (6, 3, "feature-gate"),
                               (7, 3, "feature-gate"), (8, 29, "schema")]
    assert problems[0].message.startswith(
        "unrecognized feature gate: NoSuchGate (the kube-scheduler v1.36 gates policyd "
        "knows: DRAAdminAccess, ")
    assert problems[1].message == ("cannot set feature gate SidecarContainers to false, "
                                   "feature is locked to true")
    assert problems[2].message == (
        "feature gate WorkloadAwarePreemption=true is not supported: policyd implements "
        "only kube-scheduler v1.36's default (WorkloadAwarePreemption=false)")


def test_an_unmet_dependency_at_the_feature_gates_key(check: Check) -> None:
    problems = check("""\
        featureGates:
          NodeDeclaredFeatures: false
        """)
    assert where(problems) == [(4, 1, "feature-gate")] * 4
    assert [p.message for p in problems] == [
        f"{name} is enabled, but depends on features that are disabled: "
        "[NodeDeclaredFeatures]" for name in (
            "ExtendWebSocketsToKubelet", "InPlacePodLevelResourcesVerticalScaling",
            "InPlacePodVerticalScalingInitContainers",
            "RestartAllContainersOnContainerExits")]
    assert check(BOTH_OFF) == []


def test_not_a_mapping_is_the_schemas(check: Check) -> None:
    assert where(check("featureGates: [NodeDeclaredFeatures]\n")) == [(4, 15, "schema")]


def test_the_gates_reach_every_framework(tmp_path: Path, policy_dir: Path) -> None:
    config, frameworks, problems = validate_config_file(
        _profile(tmp_path, policy_dir, BOTH_OFF))
    assert problems == []
    assert not config.feature_gates.enabled("NodeDeclaredFeatures")
    fw = frameworks["policyd"]
    assert fw.features == config.feature_gates
    assert names.NODE_DECLARED_FEATURES not in [p.name for p in fw.filter_plugins]


def test_overrides_apply_over_the_profile_per_gate(tmp_path: Path,
                                                  policy_dir: Path) -> None:
    path = _profile(tmp_path, policy_dir, BOTH_OFF)
    config, frameworks, problems = validate_config_file(
        path, gate_overrides=(("NodeDeclaredFeatures", True),
                              ("SchedulerPopFromBackoffQ", False)))
    assert problems == []
    assert config.feature_gates.overrides() == {
        **{n: False for n, _ in turning_off("NodeDeclaredFeatures")[1:]},
        "SchedulerPopFromBackoffQ": False}
    assert names.NODE_DECLARED_FEATURES in [
        p.name for p in frameworks["policyd"].filter_plugins]


def test_an_override_that_breaks_a_dependency_is_said_so(tmp_path: Path,
                                                         policy_dir: Path) -> None:
    path = _profile(tmp_path, policy_dir, "")
    _, frameworks, problems = validate_config_file(
        path, gate_overrides=(("NodeDeclaredFeatures", False),))
    assert frameworks == {}
    assert [(p.line, p.column, p.rule) for p in problems] == [(1, 1, "feature-gate")] * 4
    assert problems[0].message.endswith("[NodeDeclaredFeatures] (with --feature-gates "
                                        "applied)")


def test_pinned_gates_win_for_building(tmp_path: Path, policy_dir: Path) -> None:
    """The daemon's reload builds with the gates it started with."""
    from policyd.features import DEFAULTS

    config, frameworks, _ = validate_config_file(_profile(tmp_path, policy_dir, BOTH_OFF),
                                                 pinned_gates=DEFAULTS)
    assert not config.feature_gates.enabled("NodeDeclaredFeatures")
    assert frameworks["policyd"].features is DEFAULTS


def test_effective_configuration_lists_every_gate_and_reads_back(
        tmp_path: Path, policy_dir: Path) -> None:
    import yaml  # type: ignore[import-untyped]

    checked = validated_config_file(_profile(tmp_path, policy_dir, BOTH_OFF))
    doc = effective_configuration(checked)
    assert list(doc["featureGates"]) == sorted(BY_NAME)
    assert doc["featureGates"]["NodeDeclaredFeatures"] is False
    assert doc["featureGates"]["SchedulerPopFromBackoffQ"] is True
    filters = [e["name"] for e in doc["profiles"][0]["plugins"]["filter"]["enabled"]]
    assert names.NODE_DECLARED_FEATURES not in filters
    again = tmp_path / "effective.yaml"
    again.write_text(yaml.safe_dump(doc))
    back = validated_config_file(again)
    assert back.problems == [] and effective_configuration(back) == doc
