"""`simulate` and `explain` answer for a pod group (issue 30): which pods of the gang fit
where, the node set the group would get, what the rest lack; a gang that would be held
exits 1 in both, a gang that fits 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

from policyd.cli.app import register_commands
from tests.cli_runs import run_cli

PROFILE = """\
apiVersion: policyd.io/v1alpha1
kind: PolicydConfiguration
featureGates: {GenericWorkload: true, GangScheduling: true}
profiles:
  - schedulerName: default-scheduler
"""


def _node(name: str, cpu: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}}


def _files(tmp_path: Path, cpus: list[str], members: int, min_count: int
           ) -> list[str | Path]:
    group = {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
             "metadata": {"name": "train", "namespace": "ml"},
             "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}
    pods = [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"w{i}", "namespace": "ml", "uid": f"uid-w{i}"},
             "spec": {"schedulingGroup": {"podGroupName": "train"},
                      "containers": [{"name": "main", "image": "pause", "resources": {
                          "requests": {"cpu": "1"}}}]}} for i in range(members)]
    nodes = [_node(f"n{i}", cpu) for i, cpu in enumerate(cpus)]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(
        {"apiVersion": "v1", "kind": "List", "items": [*nodes, group, *pods]}))
    (tmp_path / "profile.yaml").write_text(PROFILE)
    return ["--cluster", tmp_path / "cluster.yaml", "--config", tmp_path / "profile.yaml"]


def test_simulate_says_what_the_held_gang_lacks(tmp_path: Path) -> None:
    args = _files(tmp_path, ["2", "1"], members=4, min_count=4)
    ran = run_cli(register_commands(), ["simulate", *args])
    assert ran.code == 1, ran.output
    assert ("pod group ml/train (gang of minCount 4): 3 of 4 fit (on 2 nodes: n0, n1); "
            "held, nothing placed: 1 short of its minCount. 1 that does not fit: 0/2 nodes "
            "are available: 2 Insufficient cpu.") in ran.stdout
    ran = run_cli(register_commands(), ["simulate", *args, "-o", "json"])
    (group,) = json.loads(ran.stdout)["podGroups"]
    assert (group["placed"], group["tried"], group["nodes"]) == (False, 4, ["n0", "n1"])


@pytest.mark.parametrize("cpus,code,placed", [(["2", "2"], 0, True), (["2", "1"], 1, False)])
def test_explain_answers_for_the_members_group(tmp_path: Path, cpus: list[str], code: int,
                                               placed: bool) -> None:
    args = _files(tmp_path, cpus, members=4, min_count=4)
    ran = run_cli(register_commands(), ["explain", "ml/w3", *args, "-o", "json"])
    assert ran.code == code, ran.output
    out = json.loads(ran.stdout)
    assert out["podGroup"]["placed"] is placed
    assert out["podGroup"]["podGroup"] == "ml/train"
    # Not held out of the queue: the group and its 4 pods exist.
    assert not any("held out of the queue" in n for n in out["notes"]), out["notes"]


def test_explain_of_a_member_whose_group_is_missing_says_it_is_held(tmp_path: Path) -> None:
    args = _files(tmp_path, ["2", "2"], members=3, min_count=4)
    ran = run_cli(register_commands(), ["explain", "ml/w0", *args])
    assert "held out of the queue by GangScheduling (waiting for minCount pods from a " \
           "gang to appear in scheduling queue)" in ran.stdout, ran.output


COSCHED_PROFILE = """\
apiVersion: policyd.io/v1alpha1
kind: PolicydConfiguration
profiles:
  - schedulerName: default-scheduler
    plugins:
      multiPoint: {enabled: [{name: Coscheduling}]}
      queueSort: {enabled: [{name: Coscheduling}], disabled: [{name: "*"}]}
"""


def _cosched_files(tmp_path: Path, cpus: list[str], members: int, min_member: int
                   ) -> list[str | Path]:
    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": "spark", "namespace": "ml"},
             "spec": {"minMember": min_member}}
    pods = [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"e{i}", "namespace": "ml", "uid": f"uid-e{i}",
                          "labels": {"scheduling.x-k8s.io/pod-group": "spark"}},
             "spec": {"containers": [{"name": "main", "image": "pause", "resources": {
                 "requests": {"cpu": "1"}}}]}} for i in range(members)]
    nodes = [_node(f"n{i}", cpu) for i, cpu in enumerate(cpus)]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(
        {"apiVersion": "v1", "kind": "List", "items": [*nodes, group, *pods]}))
    (tmp_path / "profile.yaml").write_text(COSCHED_PROFILE)
    return ["--cluster", tmp_path / "cluster.yaml", "--config", tmp_path / "profile.yaml"]


@pytest.mark.parametrize("cpus,placed", [(["2", "2"], True), (["2", "1"], False)])
def test_scheduler_plugins_groups_are_answered_too(tmp_path: Path, cpus: list[str],
                                                  placed: bool) -> None:
    """Coscheduling places pod by pod, Permit holding the quorum: simulate and explain
    say how the group fared as a whole."""
    args = _cosched_files(tmp_path, cpus, members=4, min_member=4)
    ran = run_cli(register_commands(), ["simulate", *args, "-o", "json"])
    (group,) = json.loads(ran.stdout)["podGroups"]
    assert (group["api"], group["placed"], group["tried"]) == (
        "scheduling.x-k8s.io/v1alpha1", placed, 4)
    assert len(group["fits"]) == (4 if placed else 0)
    ran = run_cli(register_commands(), ["explain", "ml/e0", *args, "-o", "json"])
    assert ran.code == (0 if placed else 1), ran.output
    assert json.loads(ran.stdout)["podGroup"]["placed"] is placed
