"""kube-scheduler's scores, read from its log.

kube-scheduler has no API that tells how it scored a pod; at -v=10 its schedule_one.go
logs every plugin's weighted score on every node it scores and each node's total. The
differential test compares policyd against those lines, so the lines' format is pinned
by a unit test on lines captured from v1.36.3
(tests/data/kube_scheduler_v1.36_score_lines.txt): a changed format must fail there,
not turn the score comparison into a comparison of nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# kube-scheduler flags that log the scores (only schedule_one.go at -v=10, the rest at
# the default level), flushed often enough to read them right away.
SCORE_LOG_ARGS = ("--vmodule=schedule_one=10", "--log-flush-frequency=100ms")

_PLUGIN_SCORE = re.compile(
    r'"Plugin scored node for pod" pod="([^"]+)" plugin="([^"]+)" node="([^"]+)" '
    r"score=(-?\d+)")
_FINAL_SCORE = re.compile(
    r'"Calculated node\'s final score for pod" pod="([^"]+)" node="([^"]+)" score=(-?\d+)')


@dataclass(frozen=True)
class ScoreLine:
    """One score line: `plugin` is None on the line of the node's total."""

    pod: str
    node: str
    plugin: str | None
    score: int


def parse_score_line(line: str) -> ScoreLine | None:
    """The score `line` logs, or None when it is not a score line."""
    m = _PLUGIN_SCORE.search(line)
    if m is not None:
        pod, plugin, node, score = m.groups()
        return ScoreLine(pod, node, plugin, int(score))
    m = _FINAL_SCORE.search(line)
    if m is not None:
        pod, node, score = m.groups()
        return ScoreLine(pod, node, None, int(score))
    return None


@dataclass
class KubeScores:
    """How kube-scheduler scored one pod: per node, each plugin's weighted score (a
    plugin skipped by its PreScore logs nothing) and the node's total."""

    plugins: dict[str, dict[str, int]] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)

    def add(self, line: ScoreLine) -> None:
        if line.plugin is None:
            self.totals[line.node] = line.score
        else:
            self.plugins.setdefault(line.node, {})[line.plugin] = line.score


def read_score_lines(text: str, into: dict[str, KubeScores]) -> int:
    """Add the scores logged in `text` (whole lines) to `into`, keyed by the pod's
    `namespace/name`; return how many score lines it read."""
    read = 0
    for line in text.splitlines():
        score = parse_score_line(line)
        if score is not None:
            into.setdefault(score.pod, KubeScores()).add(score)
            read += 1
    return read
