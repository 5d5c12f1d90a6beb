"""Which pods kube-scheduler tried, in which order, and what each try decided, read
from its log.

The sequence cases compare queue order and the state carried from one decision to the
next, and kube-scheduler tells neither through its API: the API shows where a pod ended
up, not whether its first try failed and a retry placed it, nor the order of the tries.
Its schedule_one.go logs them, at the verbosity `score_log.SCORE_LOG_ARGS` already sets
(the scheduling cycle runs one pod at a time, so a try's lines follow its "Attempting"
line; the binding line comes later, from the binding goroutine). The format is pinned by
a unit test on lines captured from v1.36.3
(tests/data/kube_scheduler_v1.36_queue_lines.txt).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from tests.integration.differential.score_log import KubeScores, parse_score_line

_ATTEMPT = re.compile(r'"Attempting to schedule pod" pod="([^"]+)"')
_BOUND = re.compile(r'"Successfully bound pod to node" pod="([^"]+)" node="([^"]+)" '
                    r"evaluatedNodes=\d+ feasibleNodes=(\d+)")
# klog quotes a string value as Go's strconv.Quote does.
_UNABLE = re.compile(r'"Unable to schedule pod; no fit; waiting" pod="([^"]+)" '
                     r'err="((?:[^"\\]|\\.)*)"')


@dataclass
class Attempt:
    """One scheduling try of one pod (`namespace/name`); `number` is 1 for its first.
    `node` and `feasible` once it was bound, `message` (the FailedScheduling message)
    when no node fitted; neither while the try is undecided."""

    pod: str
    number: int
    scores: KubeScores = field(default_factory=KubeScores)
    node: str | None = None
    feasible: int | None = None
    message: str | None = None

    @property
    def decided(self) -> bool:
        return self.node is not None or self.message is not None


def _unquote(quoted: str) -> str:
    """The string a Go-quoted value (without its quotes) stands for: ASCII messages
    escape only what JSON escapes the same way."""
    try:
        text: str = json.loads(f'"{quoted}"')
    except json.JSONDecodeError:
        return quoted
    return text


def read_attempts(text: str) -> list[Attempt]:
    """Every try logged in `text` (whole lines), in the order kube-scheduler made them."""
    attempts: list[Attempt] = []
    latest: dict[str, Attempt] = {}
    for line in text.splitlines():
        if m := _ATTEMPT.search(line):
            pod = m.group(1)
            previous = latest.get(pod)
            latest[pod] = Attempt(pod, previous.number + 1 if previous else 1)
            attempts.append(latest[pod])
        elif (score := parse_score_line(line)) is not None:
            if score.pod in latest:
                latest[score.pod].scores.add(score)
        elif m := _BOUND.search(line):
            if m.group(1) in latest:
                latest[m.group(1)].node = m.group(2)
                latest[m.group(1)].feasible = int(m.group(3))
        elif (m := _UNABLE.search(line)) and m.group(1) in latest:
            latest[m.group(1)].message = _unquote(m.group(2))
    return attempts


def first_attempts(attempts: list[Attempt]) -> dict[str, Attempt]:
    """Each pod's first try, in the order they were made (a dict keeps it)."""
    return {a.pod: a for a in attempts if a.number == 1}
