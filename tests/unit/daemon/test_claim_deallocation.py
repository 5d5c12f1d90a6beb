"""DynamicResources' PostFilter in the daemon: the allocated claim it chose to free is
written (an UpdateStatus clearing allocation, reservedFor and devices, the rest of the
claim as it was) after the cycle, and the FailedScheduling message is upstream's."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any, cast

import pytest

from policyd.config.plugins import default_framework
from policyd.daemon.coordinator import Scheduler
from policyd.daemon.event_recorder import EventSink
from policyd.daemon.metrics import Metrics
from policyd.kube.client import ApiError, KubeClient
from tests.builders import make_node
from tests.unit.plugins.dynamicresources.scene import allocation, claim, gpu_class, pod_using

Obj = dict[str, Any]


class Api:
    """Records each request; `refuse` answers every status update with a 409."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.calls: list[tuple[str, str, Any]] = []

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Obj:
        self.calls.append((method, path, copy.deepcopy(body)))
        if self.refuse and path.endswith("/status") and method == "PUT":
            raise ApiError(409, "Conflict", "the object has been modified")
        return cast(Obj, body or {})


@pytest.fixture
def made() -> Iterator[list[Scheduler]]:
    out: list[Scheduler] = []
    yield out
    for s in out:
        s.shutdown(0)


def _scheduler(api: Api, made: list[Scheduler]) -> tuple[Scheduler, list[str]]:
    metrics = Metrics()
    sink = EventSink(cast(KubeClient, api), metrics, "test")  # never started
    told: list[str] = []
    setattr(sink, "failed",  # noqa: B010 (the writer is never started)
            lambda ns, name, uid, message, component, **_: told.append(message))
    s = Scheduler(cast(KubeClient, api), {"policyd": default_framework([])},
                  metrics=metrics, events=sink)
    made.append(s)
    s.on_node_add(make_node("n1").capacity(cpu="8", pods="10").raw())
    s.on_dra("DeviceClass", gpu_class())
    # Allocated on a node that is gone, reserved for nobody, with a label of its own.
    idle = claim("c1", status={"allocation": allocation("gone", "g0"),
                               "devices": [{"driver": "d", "pool": "p", "device": "g0"}]})
    idle["metadata"]["labels"] = {"team": "ml"}
    s.on_dra("ResourceClaim", idle)
    return s, told


def test_the_idle_claim_postfilter_chose_is_deallocated(made: list[Scheduler]) -> None:
    api = Api()
    s, told = _scheduler(api, made)
    s.on_pod_add(pod_using("p", "c1").set("spec.schedulerName", "policyd").raw())
    qp = s.queue.pop(timeout=0)
    assert qp is not None
    s.schedule(qp)
    assert told == ["0/1 nodes are available: 1 resourceclaim not available on the node. "
                    "deallocation of ResourceClaim completed, preemption: 0/1 nodes are "
                    "available: 1 Preemption is not helpful for scheduling."]
    [(method, path, body)] = [c for c in api.calls if "resourceclaims" in c[1]]
    assert (method, path) == ("PUT", "/apis/resource.k8s.io/v1/namespaces/default/"
                                     "resourceclaims/c1/status")
    assert body["status"] == {}  # allocation, reservedFor and devices cleared
    assert body["metadata"]["labels"] == {"team": "ml"}  # the rest as it was


def test_a_failed_deallocation_is_logged_and_the_pod_still_told(
        made: list[Scheduler], caplog: pytest.LogCaptureFixture) -> None:
    s, told = _scheduler(Api(refuse=True), made)
    s.on_pod_add(pod_using("p", "c1").set("spec.schedulerName", "policyd").raw())
    qp = s.queue.pop(timeout=0)
    assert qp is not None
    s.schedule(qp)
    assert len(told) == 1
    assert "deallocating ResourceClaim default/c1 for default/p failed: 409 Conflict" \
        in caplog.text
