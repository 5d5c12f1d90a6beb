"""DynamicResources' queueing hints (isSchedulableAfterClaimChange and
isSchedulableAfterPodChange, v1.36.3): which claim and pod changes may let a pod it
rejected fit."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.framework.events import QUEUE, QUEUE_SKIP, QueueingHint
from policyd.plugins.dynamicresources.hints import after_claim_change, after_pod_change
from tests.builders import PodBuilder
from tests.unit.plugins.dynamicresources.scene import allocation, claim, pod_using

Obj = dict[str, Any]

ALLOCATED = {"allocation": allocation("n1", "g0")}


def _template_pod(generated: str | None = "job-gpu") -> PodBuilder:
    pod = pod_using("job", uid="job-uid").resource_claim("gpu", template="t")
    if generated is not None:
        pod = pod.set("status.resourceClaimStatuses",
                      [{"name": "gpu", "resourceClaimName": generated}])
    return pod


def _with_finalizer(obj: Obj) -> Obj:
    return {**obj, "metadata": {**obj["metadata"], "finalizers": ["x"]}}


CLAIM_CASES: dict[str, tuple[PodBuilder, Obj | None, Obj, QueueingHint]] = {
    "the pod's claim created": (pod_using("p", "c1"), None, claim("c1"), QUEUE),
    "another claim created": (pod_using("p", "c1"), None, claim("c2"), QUEUE_SKIP),
    "same name, other namespace": (pod_using("p", "c1"), None,
                                   claim("c1", namespace="other"), QUEUE_SKIP),
    "the pod's claim allocated": (pod_using("p", "c1"), claim("c1"),
                                  claim("c1", status=ALLOCATED), QUEUE),
    "only metadata changed": (pod_using("p", "c1"), claim("c1"),
                              _with_finalizer(claim("c1")), QUEUE_SKIP),
    "another claim deallocated: devices freed": (
        pod_using("p", "c1"), claim("c2", status=ALLOCATED), claim("c2"), QUEUE),
    "another claim allocated": (pod_using("p", "c1"), claim("c2"),
                                claim("c2", status=ALLOCATED), QUEUE_SKIP),
    "template's claim not created yet: nothing helps": (
        _template_pod(None), claim("c2", status=ALLOCATED), claim("c2"), QUEUE_SKIP),
    "template's generated claim, owned": (
        _template_pod(), None, claim("job-gpu", owner_uid="job-uid"), QUEUE),
    "template's generated claim, not the pod's": (
        _template_pod(), None, claim("job-gpu", owner_uid="someone"), QUEUE_SKIP),
    "not an object": (pod_using("p", "c1"), None, "junk", QUEUE),  # type: ignore[dict-item]
}


@pytest.mark.parametrize(("pod", "old", "new", "hint"), CLAIM_CASES.values(),
                         ids=CLAIM_CASES.keys())
def test_after_claim_change(pod: PodBuilder, old: Obj | None, new: Obj,
                            hint: QueueingHint) -> None:
    assert after_claim_change(pod.obj(), old, new) is hint


def test_after_pod_change() -> None:
    waiting = _template_pod(None).obj()
    assert after_pod_change(waiting, None, _template_pod().obj()) is QUEUE
    assert after_pod_change(waiting, None, _template_pod(None).obj()) is QUEUE_SKIP
    other = pod_using("other", uid="other-uid").obj()
    assert after_pod_change(waiting, None, other) is QUEUE_SKIP
