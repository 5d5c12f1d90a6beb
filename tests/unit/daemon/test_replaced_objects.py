"""The scheduler fed by informers through a re-list that hides a delete and re-create
under the same name (issue 12, item 2): the old uid's requests leave its node."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest

from policyd.daemon.coordinator import Scheduler
from policyd.engine.cycle import schedule_one
from policyd.kube.client import KubeClient
from policyd.kube.informer import Informer
from tests.builders import make_node, make_pod

Obj = dict[str, Any]


class _Lister:
    def __init__(self) -> None:
        self.items: list[Obj] = []

    def request(self, method: str, path: str, query: Obj | None = None) -> Obj:
        return {"items": [dict(o) for o in self.items], "metadata": {"resourceVersion": "1"}}


class _Calls:
    def __init__(self, add: Callable[[Obj], None], update: Callable[[Obj, Obj], None],
                 delete: Callable[[Obj], None]) -> None:
        self.on_add, self.on_update, self.on_delete = add, update, delete


def _informers(sched: Scheduler) -> tuple[Informer, _Lister, Informer, _Lister]:
    pods, nodes = _Lister(), _Lister()
    pod_inf = Informer(cast(KubeClient, pods), "/api/v1/pods", _Calls(
        sched.on_pod_add, sched.on_pod_update, sched.on_pod_delete))
    node_inf = Informer(cast(KubeClient, nodes), "/api/v1/nodes", _Calls(
        sched.on_node_add, sched.on_node_update, sched.on_node_delete))
    return pod_inf, pods, node_inf, nodes


def _pod(name: str, uid: str, rv: str, cpu: str, node: str = "",
         scheduler: str = "other") -> Obj:
    b = make_pod(name).uid(uid).scheduler(scheduler).req(cpu=cpu).resource_version(rv)
    if node:
        b.node(node)
    return b.raw()


def _node(name: str, uid: str, cpu: str = "1") -> Obj:
    return (make_node(name).uid(uid).capacity(cpu=cpu, memory="1Gi", pods="10")
            .resource_version("1").raw())


@pytest.mark.parametrize("recreated_on", ["", "n2"], ids=["pending", "bound-elsewhere"])
def test_a_pod_recreated_while_the_watch_was_down_frees_its_node(
        sched: Scheduler, recreated_on: str) -> None:
    pod_inf, pods, node_inf, nodes = _informers(sched)
    nodes.items = [_node("n1", "n1-uid"), _node("n2", "n2-uid", cpu="4")]
    pods.items = [_pod("web-0", "old", "5", "500m", node="n1")]
    node_inf._list()
    pod_inf._list()
    # The watch is down: web-0 is deleted and re-created under its name; a new pod
    # that fits n1 only without the old web-0 arrives.
    pods.items = [_pod("web-0", "new", "9", "500m", node=recreated_on),
                  _pod("big", "big", "10", "600m", scheduler="policyd")]
    pod_inf._list()
    n1 = sched.cluster.get("n1")
    assert n1 is not None and n1.requested.get("cpu", 0) == 0 and "old" not in n1.pods
    assert sched.cluster.node_of("old") is None
    if recreated_on:
        assert sched.cluster.node_of("new") == "n2"
    qp = sched.queue.pop(timeout=0)
    assert qp is not None and qp.pod.uid == "big"
    # The cycle's decision, without a bind (no API server here).
    result = schedule_one(sched.frameworks["policyd"], qp.pod, sched.cluster)
    assert result.node in ("n1", "n2"), result.message


def test_a_policyd_pod_recreated_while_assumed_drops_the_assumption(
        sched: Scheduler) -> None:
    pod_inf, pods, node_inf, nodes = _informers(sched)
    nodes.items = [_node("n1", "n1-uid")]
    pods.items = [_pod("web-0", "old", "5", "800m", scheduler="policyd")]
    node_inf._list()
    pod_inf._list()
    qp = sched.queue.pop(timeout=0)
    assert qp is not None
    with sched.lock:  # the cycle's decision and assumption, without the bind
        sched.cluster.assume(qp.pod, "n1")
        sched.assumed[qp.pod.uid] = "n1"
    pods.items = [_pod("web-0", "new", "9", "800m", scheduler="policyd")]
    pod_inf._list()
    assert "old" not in sched.assumed and sched.cluster.node_of("old") is None
    assert "new" in sched.queue and "old" not in sched.queue
    n1 = sched.cluster.get("n1")
    assert n1 is not None and n1.requested.get("cpu", 0) == 0


def test_a_node_recreated_while_the_watch_was_down_is_a_new_node(sched: Scheduler) -> None:
    pod_inf, _pods, node_inf, nodes = _informers(sched)
    nodes.items = [_node("n1", "a", cpu="1")]
    node_inf._list()
    pod_inf._list()
    recreated = _node("n1", "b", cpu="2")
    recreated["metadata"]["labels"]["zone"] = "z2"
    nodes.items = [recreated]
    node_inf._list()
    info = sched.cluster.get("n1")
    assert info is not None and info.node.uid == "b"
    assert info.node.allocatable["cpu"] == 2000 and info.node.labels["zone"] == "z2"
    # The old incarnation's late DELETED changes nothing.
    node_inf._apply({"type": "DELETED", "object": _node("n1", "a")})
    assert sched.cluster.get("n1") is not None


def test_a_pod_recreated_on_the_same_node_counts_once(sched: Scheduler) -> None:
    pod_inf, pods, node_inf, nodes = _informers(sched)
    nodes.items = [_node("n1", "n1-uid")]
    pods.items = [_pod("web-0", "old", "5", "500m", node="n1")]
    node_inf._list()
    pod_inf._list()
    pods.items = [_pod("web-0", "new", "9", "500m", node="n1")]
    pod_inf._list()
    n1 = sched.cluster.get("n1")
    assert n1 is not None and n1.requested["cpu"] == 500 and list(n1.pods) == ["new"]


def test_the_watch_replacing_a_pod_without_its_deleted_frees_the_node(
        sched: Scheduler) -> None:
    # A consistent watch sends DELETED first; should it not, ADDED of the new uid
    # still takes the old one away.
    pod_inf, pods, node_inf, nodes = _informers(sched)
    nodes.items = [_node("n1", "n1-uid")]
    pods.items = [_pod("web-0", "old", "5", "500m", node="n1")]
    node_inf._list()
    pod_inf._list()
    pod_inf._apply({"type": "ADDED", "object": _pod("web-0", "new", "9", "500m")})
    n1 = sched.cluster.get("n1")
    assert n1 is not None and n1.requested.get("cpu", 0) == 0
    assert sched.cluster.node_of("old") is None
    assert [p.uid for p in sched.cluster.pending_pods()] == ["new"]
