"""Which SchedulingPolicy objects a live explain/simulate runs (`frameworks_for` with
the cluster's objects, as the live read returns them): all accepted ones without a
profile; with a profile only when it says clusterPolicies: true; a refused one left
out with a warning naming it and its first problem."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from policyd.cli.schedule_cmds import frameworks_for
from policyd.errors import PolicydError

ROOT = Path(__file__).resolve().parents[3]


def _object(name: str, plugin: str, **server: Any) -> dict[str, Any]:
    """The repo's hw-encrypt policy as the API server returns it, renamed."""
    doc: dict[str, Any] = YAML(typ="safe").load((ROOT / "policies/hw-encrypt.yaml").read_text())
    obj = copy.deepcopy(doc)
    obj["metadata"] = {"name": name, "uid": f"uid-{name}", "generation": 2,
                       "resourceVersion": "7", **server}
    obj["spec"]["pluginName"] = plugin
    return obj


def _filter_names(frameworks: dict[str, Any]) -> set[str]:
    return {p.name for fw in frameworks.values() for p in fw.filter_plugins}


def test_without_a_profile_every_accepted_object_runs_and_refused_ones_are_said() -> None:
    bad = _object("broken", "Broken")
    bad["spec"]["filters"][0]["annotationToNodeLabel"]["label"] = 7  # not a string
    clash = _object("clash", "HwEncrypt")  # the --policies file's pluginName
    warnings: list[str] = []
    frameworks = frameworks_for(None, [ROOT / "policies/hw-encrypt.yaml"], None,
                                [_object("team-a", "TeamA"), bad, clash], warnings)
    names = _filter_names(frameworks)
    assert {"TeamA", "HwEncrypt"} <= names and "Broken" not in names
    assert len(warnings) == 2
    assert warnings[0].startswith("schedulingpolicy/broken left out: spec.filters[0]")
    assert warnings[1].startswith("schedulingpolicy/clash left out: ")
    assert "HwEncrypt" in warnings[1]
    assert all("older accepted version" in w for w in warnings)


def test_no_crd_or_no_objects_changes_nothing() -> None:
    none: list[dict[str, Any]] = []
    for objects in (None, none):
        warnings: list[str] = []
        frameworks = frameworks_for(None, [], None, objects, warnings)
        assert "TeamA" not in _filter_names(frameworks) and warnings == []


def test_a_profile_without_cluster_policies_does_not_run_them(tmp_path: Path) -> None:
    profile = tmp_path / "profile.yaml"
    profile.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
                       "profiles:\n- schedulerName: team\n")
    warnings: list[str] = []
    frameworks = frameworks_for(profile, [], None, [_object("team-a", "TeamA")], warnings)
    assert "TeamA" not in _filter_names(frameworks)
    assert warnings == [f"1 SchedulingPolicy object(s) in the cluster not run: {profile} "
                        "does not set clusterPolicies: true (--cluster-policies runs them)"]


def test_a_profile_with_cluster_policies_runs_them_and_may_name_them(tmp_path: Path) -> None:
    profile = tmp_path / "profile.yaml"
    profile.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
                       "clusterPolicies: true\n"
                       "profiles:\n- schedulerName: team\n"
                       "  plugins:\n    filter:\n      disabled: [{name: TeamB}]\n")
    bad = _object("broken", "Broken")
    bad["spec"]["filters"][0]["annotationToNodeLabel"]["label"] = 7
    warnings: list[str] = []
    frameworks = frameworks_for(profile, [], None,
                                [_object("team-a", "TeamA"), _object("team-b", "TeamB"), bad],
                                warnings)
    names = _filter_names(frameworks)
    assert "TeamA" in names and "TeamB" not in names and "Broken" not in names
    assert len(warnings) == 1 and warnings[0].startswith("schedulingpolicy/broken left out")


def test_naming_a_cluster_policy_without_enabling_them_is_the_daemons_error(
        tmp_path: Path) -> None:
    profile = tmp_path / "profile.yaml"
    profile.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
                       "profiles:\n- schedulerName: team\n"
                       "  plugins:\n    filter:\n      disabled: [{name: TeamA}]\n")
    with pytest.raises(PolicydError) as caught:
        frameworks_for(profile, [], None, [_object("team-a", "TeamA")], [])
    assert "TeamA" in str(caught.value) and caught.value.exit_code == 2


def test_cluster_policies_flag_runs_them_with_a_kube_scheduler_file(tmp_path: Path) -> None:
    """--cluster-policies: what `clusterPolicies: true` does, for a file that cannot
    say it; the file may then name an object's plugin."""
    profile = tmp_path / "kube-scheduler.yaml"
    profile.write_text("apiVersion: kubescheduler.config.k8s.io/v1\n"
                       "kind: KubeSchedulerConfiguration\n"
                       "profiles:\n- schedulerName: team\n"
                       "  plugins:\n    score:\n      disabled: [{name: TeamA}]\n")
    objects = [_object("team-a", "TeamA")]
    with pytest.raises(PolicydError, match="TeamA"):
        frameworks_for(profile, [], None, objects, [])
    warnings: list[str] = []
    frameworks = frameworks_for(profile, [], None, objects, warnings,
                                cluster_policies_flag=True)
    assert "TeamA" in _filter_names(frameworks) and warnings == []
