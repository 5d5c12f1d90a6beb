"""The daemon's /debug pages that show the scheduler: what waits, where, and why.

Read-only views built on request from another thread; each returns JSON-ready data.
"""

from __future__ import annotations

from typing import Any

from policyd.daemon.scheduling_state import SchedulingState


def queue_view(state: SchedulingState, now: float) -> dict[str, Any]:
    """Pending pods with their queue, attempts and last failure message, oldest
    first: what /debug/queue serves."""
    pods: list[dict[str, Any]] = []
    for pod, where, attempts, added, requeued, plugins in state.queue.pending():
        pods.append({
            "pod": pod.key, "uid": pod.uid, "schedulerName": pod.scheduler_name,
            "queue": where, "attempts": attempts,
            "pendingSeconds": round(now - added, 3),
            "sinceRequeueSeconds": round(now - requeued, 3),
            "unschedulablePlugins": sorted(plugins),
            "lastFailure": state.throttle.last_message(pod.uid)})
    pods.sort(key=lambda p: -p["pendingSeconds"])
    return {"counts": state.queue.counts(), "pods": pods}


def metrics_cache_view(node_metrics: Any) -> dict[str, Any]:
    """The node metrics cache and its providers: what /debug/metrics-cache serves
    (`node_metrics` is the daemon's MetricsManager, None in a build without them)."""
    if node_metrics is None:
        return {"metrics": {}, "providers": {}}
    view: dict[str, Any] = node_metrics.debug_view()
    return view
