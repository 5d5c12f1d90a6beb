"""The differential test reads kube-scheduler's scores from its log; these lines were
captured from kube-scheduler v1.36.3 at -v=10 during a differential run, so a parser
that no longer reads them (or a format change after an upgrade, once the fixture is
recaptured) fails here instead of silently comparing no scores."""

from __future__ import annotations

from pathlib import Path

from tests.integration.differential.score_log import KubeScores, read_score_lines

LINES = Path(__file__).parents[2] / "data" / "kube_scheduler_v1.36_score_lines.txt"


def _read() -> tuple[dict[str, KubeScores], int]:
    scores: dict[str, KubeScores] = {}
    return scores, read_score_lines(LINES.read_text(), scores)


def test_every_score_line_is_read() -> None:
    lines = LINES.read_text().splitlines()
    score_lines = [ln for ln in lines if " score=" in ln]
    assert len(score_lines) > 50 and len(score_lines) < len(lines)
    scores, read = _read()
    assert read == len(score_lines)
    # Only pods that were scored: the unschedulable pod's lines carry no scores.
    assert sorted(scores) == ["d9626-114-a/under-test", "d9626-161-b/under-test",
                              "d9626-36-a/under-test", "d9626-99-a/under-test"]


def test_one_pod_read_exactly() -> None:
    scores, _ = _read()
    pod = scores["d9626-36-a/under-test"]
    assert pod.totals == {"d9626-36-n6": 612, "d9626-36-n4": 624}
    assert pod.plugins["d9626-36-n4"] == {
        "TaintToleration": 300, "NodeAffinity": 200, "NodeResourcesFit": 65,
        "InterPodAffinity": 0, "NodeResourcesBalancedAllocation": 59, "ImageLocality": 0}


def test_totals_are_the_sum_of_the_weighted_plugin_scores() -> None:
    scores, _ = _read()
    for pod in scores.values():
        assert pod.totals.keys() == pod.plugins.keys()
        for node, by_plugin in pod.plugins.items():
            assert sum(by_plugin.values()) == pod.totals[node]


def test_skipped_plugins_log_nothing() -> None:
    # A plugin whose PreScore skips (NodeResourcesBalancedAllocation for a pod without
    # requests) is absent, not zero, in kube-scheduler's lines.
    scores, _ = _read()
    plugins = {p for s in scores.values() for node in s.plugins.values() for p in node}
    assert plugins == {"TaintToleration", "NodeAffinity", "NodeResourcesFit",
                       "PodTopologySpread", "InterPodAffinity",
                       "NodeResourcesBalancedAllocation", "ImageLocality"}
    assert "NodeResourcesBalancedAllocation" not in set().union(
        *scores["d9626-114-a/under-test"].plugins.values())


def test_other_text_is_ignored() -> None:
    scores: dict[str, KubeScores] = {}
    assert read_score_lines('I1201 schedule_one.go:123] "Attempting to schedule pod" '
                            'pod="a/b"\n', scores) == 0
    assert scores == {}
