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


@dataclass
class KubeScores:
    """How kube-scheduler scored one pod: per node, each plugin's weighted score (a
    plugin skipped by its PreScore logs nothing) and the node's total."""

    plugins: dict[str, dict[str, int]] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)


def read_score_lines(text: str, into: dict[str, KubeScores]) -> int:
    """Add the scores logged in `text` (whole lines) to `into`, keyed by the pod's
    `namespace/name`; return how many score lines it read."""
    read = 0
    for m in _PLUGIN_SCORE.finditer(text):
        pod, plugin, node, score = m.groups()
        into.setdefault(pod, KubeScores()).plugins.setdefault(node, {})[plugin] = int(score)
        read += 1
    for m in _FINAL_SCORE.finditer(text):
        pod, node, score = m.groups()
        into.setdefault(pod, KubeScores()).totals[node] = int(score)
        read += 1
    return read
