"""PolicyTest pod group cases (issue 30): `podGroup` with `placed`, `nodes`, `fits`
runs the group's pending pods through the profile's pod group cycle; wrong
expectations fail saying what happened, and a case mixing pod and group expectations,
an unknown group, or a profile without GenericWorkload is told clearly."""

from __future__ import annotations

import shutil
from pathlib import Path

from policyd.policytest.run_tests import RunResult, run_tests

DATA = Path(__file__).parents[2] / "data" / "gangs"


def _suite(tmp_path: Path, edit: tuple[str, str] | None = None,
           profile: tuple[str, str] | None = None) -> RunResult:
    for f in DATA.iterdir():
        shutil.copy(f, tmp_path / f.name)
    for name, change in (("gang.test.yaml", edit), ("profile.yaml", profile)):
        if change is not None:
            path = tmp_path / name
            text = path.read_text()
            assert change[0] in text
            path.write_text(text.replace(*change))
    return run_tests([tmp_path / "gang.test.yaml"])


def test_the_example_gang_cases_pass(tmp_path: Path) -> None:
    result = _suite(tmp_path)
    assert not result.problems, result.problems
    assert [(c.name, c.passed) for c in result.cases] == [
        ("the job lands whole in the zone with room for it", True),
        ("no zone holds five; nothing is placed", True)]


def test_a_wrong_group_expectation_fails_saying_what_happened(tmp_path: Path) -> None:
    result = _suite(tmp_path, ("      placed: false\n      fits: 4",
                               "      placed: true\n      fits: 5"))
    case = result.cases[1]
    assert not case.passed
    assert case.failures[0].startswith("expected the group placed, but: pod group "
                                       "default/big (gang of minCount 5): 4 of 5 fit")
    assert case.failures[1].startswith("expected 5 of its pods to fit, but 4 did")


def test_wrong_nodes_fail(tmp_path: Path) -> None:
    result = _suite(tmp_path, ("nodes: [a1, a2]", "nodes: [b1]"))
    assert result.cases[0].failures[0].startswith(
        "expected the group on nodes ['b1'], but it got ['a1', 'a2']")


def test_a_group_case_with_a_pods_expectation_is_refused(tmp_path: Path) -> None:
    result = _suite(tmp_path, ("      placed: true\n", "      placed: true\n"
                                                     "      scheduledTo: a1\n"))
    assert [(p.rule, p.message) for p in result.problems] == [
        ("wrong-expectation", "a podGroup case states placed, nodes, fits, not scheduledTo")]


def test_an_unknown_group_is_refused(tmp_path: Path) -> None:
    result = _suite(tmp_path, ("podGroup: train", "podGroup: trian"))
    assert [p.rule for p in result.problems] == ["unknown-pod-group"]
    assert "no scheduling.k8s.io PodGroup named 'trian'" in result.problems[0].message


def test_without_generic_workload_the_case_says_why(tmp_path: Path) -> None:
    result = _suite(tmp_path, profile=(
        "featureGates: {GenericWorkload: true, GangScheduling: true}\n", ""))
    assert all(not c.passed for c in result.cases)
    assert "GenericWorkload feature gate is off" in result.cases[0].failures[0]
