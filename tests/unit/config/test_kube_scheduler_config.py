"""kube-scheduler's own configuration file, read unchanged: a KubeSchedulerConfiguration
v1 is checked and run as the PolicydConfiguration with the same fields; a field of
policyd's own in it is refused (kube-scheduler would refuse the file), saying how to
set it instead; the fields policyd accepts without acting on them warn when true."""

from __future__ import annotations

from pathlib import Path

import pytest

from policyd.config.loader import build_frameworks
from policyd.config.validate import ValidatedConfig, validate
from policyd.model.file_kinds import PROFILE, wrong_file
from policyd.problems import ERROR, WARNING

KSC = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  qps: 100
  burst: 200
leaderElection:
  leaderElect: false
podInitialBackoffSeconds: 2
profiles:
  - schedulerName: migrating
    plugins:
      score:
        disabled:
          - name: NodeResourcesBalancedAllocation
      placementGenerate:
        disabled:
          - name: "*"
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: MostAllocated
"""


def _check(tmp_path: Path, text: str, *policies: Path
           ) -> tuple[list[str], list[str], ValidatedConfig]:
    path = tmp_path / "kube-scheduler.yaml"
    path.write_text(text)
    checked = validate(path, extra_policies=policies)
    errors = [f"{p.path}: {p.message}" for p in checked.problems if p.level == ERROR]
    warnings = [f"{p.path}: {p.message}" for p in checked.problems if p.level == WARNING]
    return errors, warnings, checked


def test_kube_schedulers_file_runs_as_written(tmp_path: Path) -> None:
    errors, warnings, checked = _check(tmp_path, KSC)
    assert errors == [] and warnings == []
    config = checked.config
    assert (config.client_connection.qps, config.client_connection.burst) == (100, 200)
    assert config.pod_initial_backoff_seconds == 2
    assert not config.leader_election.leader_elect
    fws = build_frameworks(checked)
    assert list(fws) == ["migrating"]
    names = {s.name for s in fws["migrating"].scores}
    assert "NodeResourcesFit" in names and "NodeResourcesBalancedAllocation" not in names


def test_policies_join_it_from_the_command_line(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[3]
    errors, _, checked = _check(tmp_path, KSC, repo / "policies" / "hw-encrypt.yaml")
    assert errors == []
    fw = build_frameworks(checked)["migrating"]
    assert "HwEncrypt" in {f.name for f in fw.filters}


@pytest.mark.parametrize(("field", "value", "hint"), [
    ("policies", "[p.yaml]", "give `policyd run --policies`"),
    ("featureGates", "{SchedulerPopFromBackoffQ: false}", "give `policyd run --feature-gates`"),
    ("clusterPolicies", "true", "give `policyd run --cluster-policies`"),
    ("metricsProviders", "[]", "plus policyd's"),
])
def test_policyds_own_fields_are_refused_saying_how(tmp_path: Path, field: str, value: str,
                                                    hint: str) -> None:
    errors, _, _ = _check(tmp_path, f"{KSC}{field}: {value}\n")
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"{field}: {field} is not a field of "
                                "KubeSchedulerConfiguration (kube-scheduler would refuse")
    assert "PolicydConfiguration" in errors[0] and hint in errors[0]


def test_an_older_api_version_is_refused(tmp_path: Path) -> None:
    errors, _, _ = _check(tmp_path, KSC.replace("config.k8s.io/v1\n",
                                                "config.k8s.io/v1beta3\n"))
    assert errors == ['apiVersion: Invalid value: "kubescheduler.config.k8s.io/v1beta3": a '
                      "KubeSchedulerConfiguration is read as apiVersion "
                      "'kubescheduler.config.k8s.io/v1' (kube-scheduler v1.36 reads no other)"]


@pytest.mark.parametrize("field", ["enableProfiling", "enableContentionProfiling",
                                   "delayCacheUntilActive"])
def test_fields_without_effect_are_accepted(tmp_path: Path, field: str) -> None:
    """Profiling is on by default in kube-scheduler: no warning either way; a delayed
    cache would change a failover, so asking for one warns."""
    errors, warnings, _ = _check(tmp_path, f"{KSC}{field}: false\n")
    assert errors == warnings == []
    errors, warnings, _ = _check(tmp_path, f"{KSC}{field}: true\n")
    assert errors == []
    if field == "delayCacheUntilActive":
        assert len(warnings) == 1
        assert warnings[0].startswith(f"{field}: has no effect in policyd (true makes "
                                      "kube-scheduler fill its cache only once it leads")
    else:
        assert warnings == []
    errors, _, _ = _check(tmp_path, f"{KSC}{field}: yes please\n")
    assert len(errors) == 1 and errors[0].startswith(f"{field}: ")


def test_a_policydconfiguration_takes_them_too(tmp_path: Path) -> None:
    text = KSC.replace("kubescheduler.config.k8s.io/v1", "policyd.io/v1alpha1").replace(
        "KubeSchedulerConfiguration", "PolicydConfiguration")
    errors, warnings, _ = _check(tmp_path, f"{text}enableProfiling: false\n"
                                           "featureGates: {SchedulerPopFromBackoffQ: false}\n")
    assert errors == warnings == []


def test_it_is_a_profile_to_every_command() -> None:
    data = {"apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration"}
    assert wrong_file(data, "k.yaml", PROFILE) is None


def test_configz_is_kube_schedulers_shape(tmp_path: Path) -> None:
    """/configz: kube-scheduler's component name over a KubeSchedulerConfiguration v1
    with defaults filled in, policyd's own fields beside it."""
    from policyd.config.effective import configz

    _, _, checked = _check(tmp_path, KSC, Path(__file__).resolve().parents[3] / "policies")
    page = configz(checked)
    assert set(page) == {"componentconfig", "policyd"}
    config = page["componentconfig"]
    assert (config["apiVersion"], config["kind"]) == ("kubescheduler.config.k8s.io/v1",
                                                      "KubeSchedulerConfiguration")
    assert not set(config) & {"policies", "featureGates", "clusterPolicies"}
    assert config["podInitialBackoffSeconds"] == 2 and config["podMaxBackoffSeconds"] == 10
    assert config["clientConnection"]["qps"] == 100
    [profile] = config["profiles"]
    assert profile["schedulerName"] == "migrating"
    assert page["policyd"]["policies"] and "SchedulerPopFromBackoffQ" in page["policyd"][
        "featureGates"]
