"""`--cluster-policies`: `clusterPolicies: true` over the profile file, the one way a
KubeSchedulerConfiguration (which cannot carry the field) runs SchedulingPolicy
objects. Validation and the daemon's loading here; the commands in
tests/unit/cli/test_cluster_policies_flag_cli.py, the daemon with real objects in
tests/e2e/test_kube_scheduler_config.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from policyd.config.effective import configz
from policyd.config.validate import validate
from policyd.daemon.cluster_policies import ClusterPolicies
from policyd.daemon.loaded_profile import InvalidConfig, load
from tests.unit.config.test_cluster_policies_option import GPU
from tests.unit.config.test_kube_scheduler_config import KSC

# The kube-scheduler file names a plugin only a SchedulingPolicy object provides.
NAMES_GPU = KSC.replace("          - name: NodeResourcesBalancedAllocation\n",
                        "          - name: NodeResourcesBalancedAllocation\n"
                        "          - name: Gpu\n")


def _write(tmp_path: Path, text: str, name: str = "kube-scheduler.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_flag_turns_them_on_for_a_kube_scheduler_file(tmp_path: Path) -> None:
    path = _write(tmp_path, KSC)
    assert validate(path).config.cluster_policies is False
    checked = validate(path, cluster_policies_flag=True)
    assert checked.valid, checked.problems
    assert checked.config.cluster_policies is True
    # /configz shows it with policyd's own fields, never in kube-scheduler's part.
    page = configz(checked)
    assert page["policyd"]["clusterPolicies"] is True
    assert "clusterPolicies" not in page["componentconfig"]


def test_the_flag_wins_over_a_policydconfiguration_saying_false(tmp_path: Path) -> None:
    path = _write(tmp_path, "apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
                            "clusterPolicies: false\n", "profile.yaml")
    assert validate(path).config.cluster_policies is False
    assert validate(path, cluster_policies_flag=True).config.cluster_policies is True


def test_the_field_in_a_kube_scheduler_file_points_at_the_flag(tmp_path: Path) -> None:
    checked = validate(_write(tmp_path, KSC + "clusterPolicies: true\n"),
                       cluster_policies_flag=True)
    [error] = [p.message for p in checked.problems if p.is_error]
    assert "give `policyd run --cluster-policies`" in error


def test_load_leaves_cluster_plugins_for_later_and_keeps_the_flag(tmp_path: Path) -> None:
    """The daemon's start-up: without the flag a plugin no file provides is an error
    before any request; with it the file waits for the cluster's objects, and every
    reload (which reads `cluster_policies_flag` back) applies the flag again."""
    path = _write(tmp_path, NAMES_GPU)
    with pytest.raises(InvalidConfig, match="Gpu"):
        load(path, cluster_pending=True)
    pending = load(path, cluster_pending=True, cluster_policies_flag=True)
    assert not pending.complete and pending.settings.cluster_policies
    assert pending.cluster_policies_flag
    cluster = ClusterPolicies()
    cluster.replace_all([GPU])
    loaded = load(path, None, cluster, cluster_policies_flag=pending.cluster_policies_flag)
    assert loaded.complete and loaded.settings.cluster_policies
    assert "Gpu" in [p.name for p in loaded.frameworks["migrating"].filter_plugins]
