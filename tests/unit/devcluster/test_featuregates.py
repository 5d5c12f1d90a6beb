"""The dev cluster's --feature-gates: shape-only parsing, the merge into a component's
own flag, and the gate -> API version table."""

from __future__ import annotations

import pytest

from policyd.devcluster.featuregates import (
    API_VERSIONS,
    checked,
    describe,
    format_gates,
    parse_gates,
    runtime_config,
    runtime_config_args,
    split_gate_args,
    with_gates,
)
from policyd.errors import EXIT_USAGE, PolicydError
from policyd.features import BY_NAME


def test_any_well_formed_gate_is_accepted_in_order() -> None:
    # Neither is a gate policyd models (policyd run refuses GangScheduling=true, and
    # knows nothing of WorkloadWithJob): the API server and controllers read them.
    gates = parse_gates("GenericWorkload=true, GangScheduling=True,,WorkloadWithJob=0")
    assert gates == {"GenericWorkload": True, "GangScheduling": True,
                     "WorkloadWithJob": False}
    assert list(gates) == ["GenericWorkload", "GangScheduling", "WorkloadWithJob"]
    assert format_gates(gates) == "GenericWorkload=true,GangScheduling=true,WorkloadWithJob=false"
    # The kube: prefix and a later setting winning, as kube-scheduler's own flag reads.
    assert parse_gates("kube:A=true,kube:A=false") == {"A": False}
    assert parse_gates("") == {} and describe({}) == "defaults"


@pytest.mark.parametrize(("text", "problem"), [
    ("X=maybe", 'invalid value of X=maybe, err: strconv.ParseBool: parsing "maybe": '
                "invalid syntax"),
    ("=true", "a feature gate name is missing before '='"),
    ("GenericWorkload", "missing bool value for GenericWorkload"),
    ("Generic-Workload=true", "'Generic-Workload' is not a feature gate name"),
    ("1Gate=true", "'1Gate' is not a feature gate name"),
    ("apiserver:A=true", "component not registered: apiserver"),
])
def test_malformed_settings_are_usage_errors(text: str, problem: str) -> None:
    with pytest.raises(PolicydError) as err:
        parse_gates(text)
    assert err.value.exit_code == EXIT_USAGE
    assert str(err.value).startswith(f'invalid argument {text!r} for "--feature-gates" flag: ')
    assert problem in str(err.value)


def test_a_mapping_is_checked_as_a_flag_is() -> None:
    assert checked({"GenericWorkload": True}) == {"GenericWorkload": True}
    with pytest.raises(PolicydError, match="a feature gate name is missing"):
        checked({"": True})
    with pytest.raises(PolicydError, match="'yes' is not a bool"):
        checked({"A": "yes"})  # type: ignore[dict-item]


def test_generic_workload_enables_scheduling_v1alpha2() -> None:
    assert runtime_config({"GenericWorkload": True, "GangScheduling": True}) == [
        "scheduling.k8s.io/v1alpha2"]
    assert runtime_config_args({"GenericWorkload": True}) == [
        "--runtime-config=scheduling.k8s.io/v1alpha2=true"]
    # Off, or not given: nothing enabled, no flag.
    assert runtime_config({"GenericWorkload": False}) == []
    assert runtime_config_args({"GangScheduling": True}) == []
    both = {"DRADeviceTaintRules": True, "GenericWorkload": True}
    assert runtime_config_args(both) == [
        "--runtime-config=scheduling.k8s.io/v1alpha2=true,resource.k8s.io/v1beta2=true"]


def test_the_table_names_real_alpha_or_beta_versions() -> None:
    for gate, versions in API_VERSIONS.items():
        assert gate[0].isupper() and versions
        for version in versions:
            group, _, ver = version.partition("/")
            assert "." in group and ("alpha" in ver or "beta" in ver), version
    # The scheduler gates in it are policyd's own names for them.
    assert {"GenericWorkload", "DRADeviceTaintRules"} <= set(BY_NAME)


def test_a_components_own_flag_is_merged_and_wins_per_name() -> None:
    plane = {"GenericWorkload": True, "GangScheduling": True}
    args = with_gates(["-v=2", "--feature-gates=GangScheduling=false",
                       "--feature-gates", "TopologyAwareWorkloadScheduling=true"], plane)
    assert args == ["-v=2", "--feature-gates=GenericWorkload=true,GangScheduling=false,"
                            "TopologyAwareWorkloadScheduling=true"]
    assert with_gates(["-v=2"], {}) == ["-v=2"]
    assert with_gates([], plane) == ["--feature-gates=GenericWorkload=true,GangScheduling=true"]
    assert split_gate_args(["--feature-gates=A=true", "x"]) == (["x"], {"A": True})
    with pytest.raises(PolicydError, match="flag needs an argument"):
        split_gate_args(["--feature-gates"])
    with pytest.raises(PolicydError, match="maybe"):
        with_gates(["--feature-gates=A=maybe"], plane)
