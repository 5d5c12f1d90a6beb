"""The FailedScheduling message, built exactly like kube-scheduler's `FitError.Error()`.

`0/N nodes are available: ` + either the PreFilter rejection message or, for every
reason of every rejected node, `"<count> <reason>"` sorted as plain strings (so `10 x`
sorts before `2 x`) and joined by `, `; then `.`; then, when PostFilter plugins ran,
a space and their message (e.g. `no new claims to deallocate, preemption: ...`).

With no nodes at all there is no FitError: upstream's `schedulePod` returns
`ErrNoNodesAvailable` before any plugin runs, and its text is the whole message.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from policyd.framework.status import Status

# kube-scheduler's ErrNoNodesAvailable (pkg/scheduler/schedule_one.go), word for word.
NO_NODES_AVAILABLE = "no nodes available to schedule pods"
MAX_EVENT_MESSAGE = 1024  # events.k8s.io note limit; the pod condition keeps it whole


@dataclass(slots=True)
class Diagnosis:
    """Why a pod fits no node: the first rejecting status of each node, in a cycle."""

    node_to_status: dict[str, Status] = field(default_factory=dict)
    # The status of every node that PreFilter narrowed away ("absent" upstream).
    absent_nodes_status: Status | None = None
    pre_filter_message: str = ""
    unschedulable_plugins: set[str] = field(default_factory=set)
    # What the PostFilter plugins said (upstream's PostFilterMsg), "" when none ran.
    post_filter_message: str = ""


def fit_error_message(num_all_nodes: int, diagnosis: Diagnosis) -> str:
    if num_all_nodes == 0:
        return NO_NODES_AVAILABLE
    message = f"0/{num_all_nodes} nodes are available:"
    post = f" {diagnosis.post_filter_message}" if diagnosis.post_filter_message else ""
    if diagnosis.pre_filter_message:
        return f"{message} {diagnosis.pre_filter_message}.{post}"
    reasons = reason_counts(diagnosis.node_to_status)
    absent = num_all_nodes - len(diagnosis.node_to_status)
    if absent > 0 and diagnosis.absent_nodes_status is not None:
        for reason in diagnosis.absent_nodes_status.reasons:
            reasons[reason] = reasons.get(reason, 0) + absent
    histogram = sorted(f"{count} {reason}" for reason, count in reasons.items())
    if histogram:
        message += f" {', '.join(histogram)}."
    return message + post


def reason_counts(node_to_status: Mapping[str, Status]) -> dict[str, int]:
    """Reason -> number of nodes, in the order reasons first appear. Nodes failing
    alike mostly share one status object (thousands of nodes, a few objects): each
    distinct object's reasons are counted once, times its number of nodes."""
    nodes = Counter(map(id, node_to_status.values()))
    by_id = {id(s): s for s in node_to_status.values()}
    counts: dict[str, int] = {}
    for key, n in nodes.items():
        for reason in by_id[key].reasons:
            counts[reason] = counts.get(reason, 0) + n
    return counts


def truncate_event_message(message: str) -> str:
    if len(message) <= MAX_EVENT_MESSAGE:
        return message
    return message[: MAX_EVENT_MESSAGE - 3] + "..."
