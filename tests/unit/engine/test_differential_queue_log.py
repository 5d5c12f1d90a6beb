"""The differential test's sequence cases read from kube-scheduler's log which pods it
tried, in which order, and what each try decided. These lines were captured from
kube-scheduler v1.36.3 (its schedule_one.go lines at the differential test's
verbosity): two sequence cases queued before the scheduler started, then a big node
added to each, which made it retry the pods that had not fitted. A parser that no
longer reads them, or a format change after an upgrade (once the fixture is
recaptured), fails here instead of comparing the order of nothing."""

from __future__ import annotations

import re
from pathlib import Path

from tests.integration.differential.queue_log import Attempt, first_attempts, read_attempts

LINES = Path(__file__).parents[2] / "data" / "kube_scheduler_v1.36_queue_lines.txt"


def _attempts() -> list[Attempt]:
    return read_attempts(LINES.read_text())


def test_every_try_is_read_in_the_order_logged() -> None:
    logged = re.findall(r'"Attempting to schedule pod" pod="([^"]+)"', LINES.read_text())
    assert len(logged) == 16
    assert [a.pod for a in _attempts()] == logged


def test_tries_of_one_pod_are_numbered() -> None:
    tries = [a for a in _attempts() if a.pod == "qcap-7-b/s05"]
    assert [a.number for a in tries] == [1, 2, 3]
    # Each retry saw the nodes added since: its own message.
    assert [a.message[:6] if a.message else None for a in tries] == ["0/6 no", "0/7 no",
                                                                     "0/8 no"]
    assert all(a.node is None for a in tries)


def test_first_tries_keep_their_order_and_outcome() -> None:
    first = first_attempts(_attempts())
    assert list(first)[:4] == ["qcap-7-b/s02", "qcap-7-b/s04", "qcap-7-b/s00",
                               "qcap-5-b/s00"]
    assert len(first) == 12
    s07 = first["qcap-7-b/s07"]
    assert s07.node is None
    assert s07.message == ("0/6 nodes are available: 1 Insufficient cpu, 1 Insufficient "
                           "ephemeral-storage, 4 node(s) didn't match Pod's node "
                           "affinity/selector.")
    # Its retry, once the big node was there, placed it.
    retry = next(a for a in _attempts() if a.pod == "qcap-7-b/s07" and a.number == 2)
    assert (retry.node, retry.feasible, retry.message) == ("qcap-7-big", 1, None)


def test_every_try_is_decided_once() -> None:
    for a in _attempts():
        assert a.decided
        assert (a.node is None) != (a.message is None)
        assert (a.feasible is None) == (a.node is None)


def test_scores_belong_to_the_try_that_logged_them() -> None:
    first = first_attempts(_attempts())
    s00 = first["qcap-5-b/s00"]
    assert s00.feasible == 4
    assert s00.scores.totals == {"qcap-5-n0": 437, "qcap-5-n1": 432, "qcap-5-n2": 428,
                                 "qcap-5-n3": 440}
    # kube-scheduler chose the best total; the next pod's lines did not leak in.
    assert s00.node == max(s00.scores.totals, key=s00.scores.totals.__getitem__)
    for a in _attempts():
        for node, plugins in a.scores.plugins.items():
            assert sum(plugins.values()) == a.scores.totals[node]
        if a.node is not None and a.feasible is not None and a.feasible > 1:
            assert len(a.scores.totals) == a.feasible
        else:
            # No fit, or one feasible node: kube-scheduler scores nothing.
            assert not a.scores.totals


def test_other_lines_are_ignored() -> None:
    text = ('I1201 01:49:23.952128   24527 schedule_one.go:107] "About to try and schedule '
            'pod" pod="a/b"\n')
    assert read_attempts(text) == []
