"""The pod fields preemption reads that the `Pod` record does not decode: they stay in
`Pod.raw`, read here once per record (memoized in `Pod.cache`).

A malformed value reads as absent: these fields are written by the API server and
the scheduler, and preemption must not fail a cycle over one victim's status.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from policyd.model.records import Pod

PREEMPT_NEVER = "Never"
# The DisruptionTarget condition the scheduler puts on a victim before deleting it
# (v1.DisruptionTarget, v1.PodReasonPreemptionByScheduler).
DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"

_START_KEY = "DefaultPreemption/startTime"


def _status(pod: Pod) -> dict[str, Any]:
    status = pod.raw.get("status")
    return status if isinstance(status, dict) else {}


def preemption_policy(pod: Pod) -> str:
    """spec.preemptionPolicy; "" when unset (the API server defaults it to
    PreemptLowerPriority, which is what "" means here)."""
    spec = pod.raw.get("spec")
    value = spec.get("preemptionPolicy") if isinstance(spec, dict) else None
    return value if isinstance(value, str) else ""


def start_time(pod: Pod) -> float:
    """status.startTime in seconds since the epoch; +inf when unset. Upstream reads an
    unset start time (an assumed pod, a pod bound but not started) as "now", later
    than any real start: +inf orders it the same way, and the same way every time
    (upstream's time.Now() differs from call to call)."""
    cached = pod.cache.get(_START_KEY)
    if cached is None:
        cached = pod.cache[_START_KEY] = _parse_time(_status(pod).get("startTime"))
    return float(cached)


def _parse_time(value: Any) -> float:
    if not isinstance(value, str):
        return math.inf
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return math.inf


def terminating_by_preemption(pod: Pod) -> bool:
    """podTerminatingByPreemption: being deleted, and the first DisruptionTarget
    condition is True with reason PreemptionByScheduler."""
    if not pod.deleting:
        return False
    conditions = _status(pod).get("conditions")
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, dict) and condition.get("type") == DISRUPTION_TARGET:
            return (condition.get("status") == "True"
                    and condition.get("reason") == REASON_PREEMPTION_BY_SCHEDULER)
    return False


def importance_key(pod: Pod) -> tuple[int, float]:
    """util.MoreImportantPod as a sort key: higher priority first, then the earlier
    start. Sorting is stable, so pods equal by both keep their order (upstream's
    sort.Slice promises none)."""
    return (-pod.priority, start_time(pod))
