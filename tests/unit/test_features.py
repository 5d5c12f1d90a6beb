"""The feature-gate table, its flag parser and every refusal, in component-base's words
(k8s.io/component-base v0.36.3 featuregate/feature_gate.go: SetWithLogger,
unsafeSetFromMap) and with kube_features.go's v1.36 defaults and dependencies."""

from __future__ import annotations

import pytest

from policyd import features as f


def _refusal(settings: list[tuple[str, bool]]) -> list[str]:
    with pytest.raises(f.FeatureGateError) as err:
        f.with_settings(settings)
    return err.value.messages


def test_defaults_are_v1_36s() -> None:
    on = {"NodeDeclaredFeatures", "SchedulerPopFromBackoffQ", "InPlacePodVerticalScaling",
          "NominatedNodeNameForExpectation", "InPlacePodLevelResourcesVerticalScaling",
          "SchedulerQueueingHints", "DynamicResourceAllocation"}
    off = {"StorageCapacityScoring", "VolumeLimitScaling", "GangScheduling",
           "SchedulerAsyncAPICalls", "DRADeviceTaintRules"}
    assert all(f.DEFAULTS.enabled(n) for n in on)
    assert not any(f.DEFAULTS.enabled(n) for n in off)
    assert f.DEFAULTS.overrides() == {} and f.DEFAULTS.describe() == "defaults"
    assert f.dependency_problems(f.DEFAULTS) == []


def test_every_dependency_names_gates_of_the_table() -> None:
    for name, deps in f.DEPENDENCIES.items():
        assert name in f.BY_NAME and all(d in f.BY_NAME for d in deps)


@pytest.mark.parametrize(("text", "expected"), [
    ("SchedulerPopFromBackoffQ=false", [("SchedulerPopFromBackoffQ", False)]),
    (" A = 1 ,, B=F, ,", [("A", True), ("B", False)]),
    ("kube:A=true, kube: B=false", [("A", True), ("B", False)]),
    ("", []),
    ("A=t,A=TRUE,A=True,A=0,A=f,A=FALSE,A=False",
     [("A", v) for v in (True, True, True, False, False, False, False)]),
])
def test_parse_flag(text: str, expected: list[tuple[str, bool]]) -> None:
    assert f.parse_flag(text) == expected


@pytest.mark.parametrize(("text", "message"), [
    ("NodeDeclaredFeatures", "missing bool value for NodeDeclaredFeatures"),
    ("wardle:A=true", "component not registered: wardle"),
    ("kube:A=true,B=false", "set kube feature gates with default empty prefix or kube: "
                            "prefix consistently, do not mix use"),
    ("A=yes", 'invalid value of A=yes, err: strconv.ParseBool: parsing "yes": '
              "invalid syntax"),
    ('A=x"y\\', 'invalid value of A=x"y\\, err: strconv.ParseBool: parsing "x\\"y\\\\": '
                "invalid syntax"),
    ("A=", 'invalid value of A=, err: strconv.ParseBool: parsing "": invalid syntax'),
])
def test_parse_flag_refusals(text: str, message: str) -> None:
    with pytest.raises(f.FeatureGateError) as err:
        f.parse_flag(text)
    assert str(err.value) == message


def test_an_unknown_name_is_the_only_error_and_lists_the_known_ones() -> None:
    (msg,) = _refusal([("DRAAdminAccess", False), ("NoSuchGate", True)])
    assert msg.startswith("unrecognized feature gate: NoSuchGate (the kube-scheduler v1.36 "
                          "gates policyd knows: DRAAdminAccess, ")
    assert "SchedulerPopFromBackoffQ" in msg


def test_locked_and_unmodelled_gates_are_refused_each() -> None:
    assert _refusal([("InPlacePodVerticalScaling", False),
                     ("WorkloadAwarePreemption", True)]) == [
        "cannot set feature gate InPlacePodVerticalScaling to false, feature is locked "
        "to true",
        "feature gate WorkloadAwarePreemption=true is not supported: policyd implements "
        "only kube-scheduler v1.36's default (WorkloadAwarePreemption=false)",
    ]


def test_a_gate_set_to_its_default_is_accepted_even_when_locked_or_unmodelled() -> None:
    gates = f.with_settings([("InPlacePodVerticalScaling", True),
                             ("GangScheduling", False)])
    assert gates.overrides() == {}


def test_node_declared_features_off_alone_breaks_dependencies_as_upstream() -> None:
    """kube-scheduler v1.36.3 `--feature-gates=NodeDeclaredFeatures=false` exits with
    these four (observed on the built binary), two of them gates it never reads."""
    assert _refusal([("NodeDeclaredFeatures", False)]) == [
        f"{name} is enabled, but depends on features that are disabled: "
        "[NodeDeclaredFeatures]" for name in (
            "ExtendWebSocketsToKubelet", "InPlacePodLevelResourcesVerticalScaling",
            "InPlacePodVerticalScalingInitContainers",
            "RestartAllContainersOnContainerExits")]
    settings = f.turning_off("NodeDeclaredFeatures")
    gates = f.with_settings(settings)
    assert not gates.enabled("NodeDeclaredFeatures")
    assert gates.describe() == (
        "ExtendWebSocketsToKubelet=false,InPlacePodLevelResourcesVerticalScaling=false,"
        "InPlacePodVerticalScalingInitContainers=false,NodeDeclaredFeatures=false,"
        "RestartAllContainersOnContainerExits=false")


def test_gates_the_scheduler_does_not_read_take_either_value_but_their_locks() -> None:
    gates = f.with_settings([("ContainerRestartRules", False),
                             ("RestartAllContainersOnContainerExits", False)])
    assert not gates.enabled("ContainerRestartRules")
    assert _refusal([("RestartAllContainersOnContainerExits", True),
                     ("ContainerRestartRules", False)]) == [
        "RestartAllContainersOnContainerExits is enabled, but depends on features that "
        "are disabled: [ContainerRestartRules]"]
    assert _refusal([("UserNamespacesSupport", False)]) == [
        "cannot set feature gate UserNamespacesSupport to false, feature is locked to "
        "true"]


def test_the_last_setting_of_a_name_wins() -> None:
    gates = f.with_settings([("SchedulerPopFromBackoffQ", False),
                             ("SchedulerPopFromBackoffQ", True)])
    assert gates.enabled("SchedulerPopFromBackoffQ")


def test_check_settings_leaves_dependencies_for_later() -> None:
    assert f.check_settings([("NodeDeclaredFeatures", False)]) == {
        "NodeDeclaredFeatures": False}


def test_settings_apply_over_a_base() -> None:
    base = f.with_settings([("SchedulerPopFromBackoffQ", False)])
    gates = f.with_settings([("NominatedNodeNameForExpectation", False)], base)
    assert gates.overrides() == {"SchedulerPopFromBackoffQ": False,
                                 "NominatedNodeNameForExpectation": False}
