"""The in-place resize share of the differential cases (`tests.gen.differential.
resize_in_place`): running bound pods only, every kind of resize state, each decoding,
and enough of them that counting status changes what a node holds."""

from __future__ import annotations

from collections import Counter

from policyd.model.records import pod_from_dict
from policyd.model.resources import pod_requests
from tests.gen.differential import gen_case

CASES = [gen_case(5, i, f"r{i}") for i in range(120)]
BOUND = [p for c in CASES for p in c.pods]
RESIZING = [p for p in BOUND if "conditions" in p["status"]]


def test_only_running_bound_pods_resize() -> None:
    assert RESIZING
    for p in RESIZING:
        assert p["spec"]["nodeName"] and not p["status"].get("phase")
    assert all("conditions" not in c.pod.get("status", {}) for c in CASES)


def test_every_kind_of_resize_occurs() -> None:
    kinds: Counter[str] = Counter()
    for p in RESIZING:
        status = p["status"]
        reasons = [c.get("reason", c["type"]) for c in status["conditions"]]
        kinds[reasons[0] if reasons else "no condition"] += 1
        kinds["pod level"] += "resources" in status
        kinds["pod-level allocation"] += "allocatedResources" in status
        kinds["container level"] += any(
            "resources" in cs for cs in status.get("containerStatuses", []))
        kinds["sidecar or init"] += any(
            "resources" in cs for cs in status.get("initContainerStatuses", []))
    for kind in ("no condition", "PodResizeInProgress", "Deferred", "Infeasible",
                 "pod level", "pod-level allocation", "container level", "sidecar or init"):
        assert kinds[kind] >= 3, (kind, kinds)


def test_status_changes_what_a_node_holds() -> None:
    # Not a no-op: for many resizing pods the status counts differ from the spec.
    changed = 0
    for raw in RESIZING:
        p = pod_from_dict(raw)
        changed += pod_requests(p, use_status=True) != pod_requests(p)
    assert changed >= len(RESIZING) // 4
