"""PrioritySort: the queue order of kube-scheduler's default profile.

Higher `spec.priority` goes first; between equal priorities the pod that has waited
longer goes first, so no pod of a given priority starves behind newer ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policyd.framework import PluginError
from policyd.model.records import Pod
from policyd.plugins import names
from policyd.problems import field_problem

DEFAULT_WEIGHT: int | None = None


class PrioritySort:
    name = names.PRIORITY_SORT

    def less(self, a: Pod, b: Pod) -> bool:
        """Whether `a` should be scheduled before `b`.

        Upstream compares the QueuedPodInfo timestamps, i.e. when each pod (re-)entered
        the scheduling queue. policyd approximates that with the pod's creation
        timestamp: for a pod seen once it is the same order, and it keeps the order
        stable across restarts of the daemon. A pod that came back from backoff is
        therefore not moved behind newer pods of its priority, as upstream would.
        """
        if a.priority != b.priority:
            return a.priority > b.priority
        return a.creation_timestamp < b.creation_timestamp


def new(args: Mapping[str, Any] | None = None) -> PrioritySort:
    if args:
        raise PluginError(names.PRIORITY_SORT, [field_problem("",
                                                              "PrioritySort takes no arguments")])
    return PrioritySort()
