"""`clusterPolicies`: the profile option, and profiles validated with the daemon's
already-compiled cluster policies beside the files."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from policyd.config.loader import validate_config_file
from policyd.config.validate import validate
from policyd.daemon.cluster_policies import ClusterPolicies
from policyd.daemon.loaded_profile import InvalidConfig, load
from tests.unit.config.conftest import HEAD, where

GPU: dict[str, Any] = {
    "metadata": {"name": "gpu", "uid": "u-gpu", "generation": 2},
    "spec": {"pluginName": "Gpu", "filters": [{
        "id": "gpu", "message": "no gpu", "nodeLabels": {"matchLabels": {"gpu": "true"}}}]}}

NAMES_GPU = """\
clusterPolicies: true
profiles:
  - schedulerName: policyd
    plugins:
      score:
        disabled: [{name: Gpu}]
"""


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "profile.yaml"
    path.write_text(HEAD + textwrap.dedent(body))
    return path


def model(*objects: dict[str, Any]) -> ClusterPolicies:
    m = ClusterPolicies()
    m.replace_all(objects)
    return m


def test_the_option_defaults_to_false_and_must_be_a_boolean(tmp_path: Path,
                                                            policy_dir: Path) -> None:
    assert validate(write(tmp_path, "")).config.cluster_policies is False
    assert validate(write(tmp_path, "clusterPolicies: true\n")).config.cluster_policies
    problems = validate(write(tmp_path, "clusterPolicies: yes please\n")).problems
    assert where(problems) == [(4, 18, "schema")]


def test_cluster_policies_are_plugins_enabled_by_default_and_namable(
        tmp_path: Path, policy_dir: Path) -> None:
    path = write(tmp_path, NAMES_GPU)
    # Without them, the profile names a plugin nobody provides.
    assert [p.rule for p in validate(path).problems] == ["plugin-unknown"]
    cluster = model(GPU)
    checked = validate(path, cluster_policies=cluster)
    assert checked.valid, checked.problems
    assert checked.cluster_plugins == ("Gpu",)
    assert set(checked.policies) == {"HwEncrypt", "LowLatency", "Gpu"}
    # The file policies were what the objects were checked against.
    assert {d.file for d in checked.policy_documents} == {
        str(policy_dir / "hw-encrypt.yaml"), str(policy_dir / "low-latency.yaml")}
    _, frameworks, _ = validate_config_file(path, cluster_policies=cluster)
    fw = frameworks["policyd"]
    # Enabled by default as a filter; disabled at score (it has no score anyway).
    assert "Gpu" in [p.name for p in fw.filter_plugins]


def test_an_object_using_a_files_plugin_name_is_never_run(tmp_path: Path,
                                                           policy_dir: Path) -> None:
    taken = {**GPU, "spec": {**GPU["spec"], "pluginName": "HwEncrypt"}}
    cluster = model(taken)
    checked = validate(write(tmp_path, "clusterPolicies: true\n"), cluster_policies=cluster)
    assert checked.valid and checked.cluster_plugins == ()
    assert checked.policies["HwEncrypt"].source.startswith(str(policy_dir))


def test_load_leaves_plugins_only_cluster_policies_provide_for_later(
        tmp_path: Path, policy_dir: Path) -> None:
    path = write(tmp_path, NAMES_GPU)
    pending = load(path, cluster_pending=True)
    assert not pending.complete and pending.frameworks == {}
    assert pending.settings.cluster_policies
    cluster = model(GPU)
    loaded = load(path, None, cluster)
    assert loaded.complete and "policyd" in loaded.frameworks
    with pytest.raises(InvalidConfig):
        load(path)  # no cluster policies: the profile is wrong


def test_other_problems_are_never_left_for_later(tmp_path: Path, policy_dir: Path) -> None:
    path = write(tmp_path, NAMES_GPU + "parallelism: 0\n")
    with pytest.raises(InvalidConfig):
        load(path, cluster_pending=True)
    off = write(tmp_path, NAMES_GPU.replace("true", "false"))
    with pytest.raises(InvalidConfig):
        load(off, cluster_pending=True)


def test_turning_the_option_on_or_off_needs_a_restart(tmp_path: Path,
                                                      policy_dir: Path) -> None:
    from policyd.daemon.loaded_profile import needs_restart

    before = load(write(tmp_path, "")).settings
    after = load(write(tmp_path, "clusterPolicies: true\n")).settings
    assert needs_restart(before, after) == ["clusterPolicies (false -> true)"]


def test_an_object_naming_a_metric_the_profile_lacks_is_refused_like_a_file(
        tmp_path: Path, policy_dir: Path) -> None:
    lat = {"metadata": {"name": "lat", "uid": "u-lat", "generation": 1},
           "spec": {"pluginName": "Lat", "scores": [
               {"id": "fast", "weight": 1, "normalize": "minmax",
                "metric": {"name": "latency", "prefer": "lowest"}}]}}
    cluster = model(lat)
    checked = validate(write(tmp_path, """\
        clusterPolicies: true
        metricsProviders:
          - {name: a, kind: nodeAnnotation, metric: latency_ms, annotation: x}
        """), cluster_policies=cluster)
    assert checked.valid and checked.cluster_plugins == ()  # refused, not run
    verdict = cluster.proposed.verdicts["lat"] if cluster.proposed else None
    assert verdict is not None and not verdict.accepted
    assert verdict.messages == (
        "spec.scores[0].metric.name: metric 'latency' is not defined by any "
        f"metricsProviders entry of {tmp_path / 'profile.yaml'}; did you mean "
        "'latency_ms'?",)
    # Defined by the profile: runs.
    assert validate(write(tmp_path, """\
        clusterPolicies: true
        metricsProviders:
          - {name: a, kind: nodeAnnotation, metric: latency, annotation: x}
        """), cluster_policies=cluster).cluster_plugins == ("Lat",)


def test_opt_in_runs_cluster_policies_only_for_a_profile_that_enables_them(
        tmp_path: Path, policy_dir: Path) -> None:
    # explain/simulate/audit (`cluster_policies_opt_in`): offered, then dropped when the
    # profile does not say clusterPolicies: true, so naming one is the error it is for
    # the daemon; the daemon (no opt-in) offers them only when its profile enabled them.
    names_gpu = write(tmp_path, NAMES_GPU.replace("clusterPolicies: true\n", ""))
    config, frameworks, problems = validate_config_file(
        names_gpu, cluster_policies=model(GPU), cluster_policies_opt_in=True)
    assert config.cluster_policies is False and frameworks == {}
    assert [p.rule for p in problems] == ["plugin-unknown"]
    _, frameworks, problems = validate_config_file(names_gpu, cluster_policies=model(GPU))
    assert problems == [] and "Gpu" in [p.name for p in frameworks["policyd"].filter_plugins]
    enabled = tmp_path / "enabled.yaml"
    enabled.write_text(names_gpu.read_text().replace(
        "profiles:", "clusterPolicies: true\nprofiles:"))
    _, frameworks, problems = validate_config_file(
        enabled, cluster_policies=model(GPU), cluster_policies_opt_in=True)
    assert problems == [] and "Gpu" in [p.name for p in frameworks["policyd"].filter_plugins]
