"""File reloads and cluster-policy rebuilds through one ConfigWatcher: a combination
that cannot be built leaves the running one scheduling and the objects say why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from policyd.daemon.cluster_policies import NOT_APPLIED, ClusterPolicies
from policyd.daemon.loaded_profile import LoadedConfig, load
from policyd.daemon.reload import ConfigWatcher
from tests.clocks import ManualClock

GPU: dict[str, Any] = {
    "metadata": {"name": "gpu", "uid": "u-gpu", "generation": 1},
    "spec": {"pluginName": "Gpu", "filters": [{
        "id": "gpu", "message": "no gpu", "nodeLabels": {"matchLabels": {"gpu": "true"}}}]}}

PROFILE = """\
apiVersion: policyd.io/v1alpha1
kind: PolicydConfiguration
clusterPolicies: true
profiles:
  - schedulerName: policyd
    plugins:
      filter:
        enabled: [{name: Gpu}]
"""


def _running_with_gpu(tmp_path: Path) -> tuple[ClusterPolicies, LoadedConfig]:
    """The profile loaded with the GPU object in effect, as the daemon starts."""
    path = tmp_path / "profile.yaml"
    path.write_text(PROFILE)
    cluster = ClusterPolicies()
    cluster.replace_all([GPU])
    first = load(path, None, cluster)
    cluster.applied()
    return cluster, first


def test_a_rebuild_the_profile_refuses_keeps_the_running_frameworks(tmp_path: Path) -> None:
    cluster, first = _running_with_gpu(tmp_path)
    applied: list[LoadedConfig] = []
    refused: list[str] = []
    file_reloads: list[LoadedConfig] = []
    watcher = ConfigWatcher(first, apply=file_reloads.append, rejected=refused.append,
                            clock=ManualClock(), cluster=cluster,
                            apply_cluster=applied.append,
                            cluster_rejected=refused.append)
    # The object is deleted, but the profile names its plugin: nothing changes.
    cluster.remove(GPU)
    assert watcher.recombine("schedulingpolicy/gpu deleted") is False
    assert applied == [] and file_reloads == []
    assert "schedulingpolicy/gpu deleted" in refused[0] and '"Gpu"' in refused[0]
    assert "gpu" in cluster.running  # still scheduling with it
    # Re-created with a new version the profile accepts: it runs.
    cluster.upsert({**GPU, "metadata": {**GPU["metadata"], "generation": 2}})
    assert watcher.recombine("schedulingpolicy/gpu added") is True
    assert len(applied) == 1 and cluster.running["gpu"].generation == 2
    assert cluster.conditions()["gpu"].accepted


def test_a_new_version_the_profile_cannot_run_says_not_applied(tmp_path: Path) -> None:
    cluster, first = _running_with_gpu(tmp_path)
    refused: list[str] = []
    watcher = ConfigWatcher(first, apply=lambda loaded: None, rejected=refused.append,
                            clock=ManualClock(), cluster=cluster)
    # Generation 2 has only a score rule: the profile enables it as a filter.
    score_only = {"metadata": {**GPU["metadata"], "generation": 2},
                  "spec": {"pluginName": "Gpu", "scores": [{
                      "id": "gpu", "weight": 1, "normalize": "none", "labelValue": {
                          "label": "gpu", "values": {"true": 100}, "default": 0}}]}}
    cluster.upsert(score_only)
    assert cluster.plan().verdicts["gpu"].accepted  # valid alone
    assert watcher.recombine("schedulingpolicy/gpu changed") is False
    cond = cluster.conditions()["gpu"]
    assert (cond.accepted, cond.reason, cond.generation) == (False, NOT_APPLIED, 2)
    assert cond.message.endswith("generation 1 still in effect")
