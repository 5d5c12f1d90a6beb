"""The live demo reads each pod's node and latest event as raw JSON through policyd's
own client; the latest event is found by the first time field it has, as kubectl."""

from __future__ import annotations

from typing import Any, cast

from policyd.devcluster.demo import Outcome, _outcomes
from policyd.kube.client import KubeClient


class FakeKube:
    def __init__(self) -> None:
        self.queries: list[tuple[str, Any]] = []

    def request(self, method: str, path: str, *, query: Any = None) -> dict[str, Any]:
        self.queries.append((path, query))
        if path.endswith("/pods/big"):
            return {"spec": {}}
        if path.endswith("/pods/small"):
            return {"spec": {"nodeName": "n1"}}
        name = query["fieldSelector"].rsplit("=", 1)[1]
        if name == "big":
            return {"items": [
                {"reason": "FailedScheduling", "message": "0/3 nodes are available",
                 "eventTime": "2026-01-01T00:00:05.000001Z", "metadata": {}},
                {"reason": "Old", "message": "", "lastTimestamp": "2026-01-01T00:00:05Z",
                 "metadata": {}},
            ]}
        return {"items": [
            {"reason": "Scheduled", "message": "assigned",
             "metadata": {"creationTimestamp": "2026-01-01T00:00:01Z"}},
        ]}


def test_outcomes_from_raw_pods_and_events() -> None:
    kube = FakeKube()
    pods = [{"metadata": {"name": "big", "namespace": "demo"}},
            {"metadata": {"name": "small"}}]
    assert _outcomes(cast(KubeClient, kube), pods) == [
        Outcome("demo/big", None, "FailedScheduling", "0/3 nodes are available"),
        Outcome("default/small", "n1", "Scheduled", "assigned"),
    ]
    assert kube.queries[1] == ("/api/v1/namespaces/demo/events",
                               {"fieldSelector": "involvedObject.kind=Pod,involvedObject.name=big"})
