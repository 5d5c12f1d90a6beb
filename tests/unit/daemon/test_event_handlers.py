"""The scheduler's informer handlers and failure path, driven synchronously.

No request is sent: the paths exercised here (decoding, queueing, assumptions,
unschedulable cycles) only enqueue events; the event writer thread is never started.
Binding is covered end to end in tests/e2e.
"""

from __future__ import annotations

import threading

from policyd.daemon.coordinator import Scheduler
from policyd.daemon.queue import ACTIVE, UNSCHEDULABLE
from tests.builders import make_node, make_pod


def _pod(name: str, **kw: str) -> dict[str, object]:
    b = make_pod(name).uid(f"uid-{name}").scheduler("policyd")
    if "cpu" in kw:
        b = b.req(cpu=kw["cpu"])
    if "node" in kw:
        b = b.node(kw["node"])
    return b.raw()


def test_only_this_schedulers_pending_pods_are_queued(sched: Scheduler) -> None:
    sched.on_pod_add(_pod("mine"))
    sched.on_pod_add(make_pod("theirs").uid("uid-theirs").scheduler("other").raw())
    sched.on_pod_add(_pod("bound", node="n1"))
    sched.on_pod_add(make_pod("done").uid("uid-done").scheduler("policyd").phase(
        "Succeeded").raw())
    assert "uid-mine" in sched.queue
    for uid in ("uid-theirs", "uid-bound", "uid-done"):
        assert uid not in sched.queue


def test_a_malformed_pod_is_skipped_not_fatal(sched: Scheduler) -> None:
    bad = _pod("bad")
    bad["spec"]["containers"][0]["resources"] = {  # type: ignore[index]
        "requests": {"cpu": "lots"}}
    sched.on_pod_add(bad)
    sched.on_pod_update(bad, bad)
    assert "uid-bad" not in sched.queue
    sched.on_pod_add(_pod("good"))
    assert "uid-good" in sched.queue


def test_unschedulable_pod_waits_and_a_new_node_brings_it_back(sched: Scheduler) -> None:
    sched.on_node_add(make_node("small").capacity(cpu="1", memory="1Gi", pods="10").raw())
    sched.on_pod_add(_pod("big", cpu="2"))
    qp = sched.queue.pop(timeout=0)
    assert qp is not None
    result = sched.schedule(qp)
    assert result is not None and result.node is None
    assert result.message == "0/1 nodes are available: 1 Insufficient cpu."
    assert sched.queue.where("uid-big") == UNSCHEDULABLE
    # A heartbeat-only update does not move it; a new node does.
    node = make_node("small").capacity(cpu="1", memory="1Gi", pods="10").raw()
    sched.on_node_update(node, {**node, "status": {**node["status"], "conditions": []}})
    assert sched.queue.where("uid-big") == UNSCHEDULABLE
    sched.on_node_add(make_node("large").capacity(cpu="8", memory="8Gi", pods="10").raw())
    assert sched.queue.where("uid-big") in (ACTIVE, "backoff")


def test_an_assumed_pod_keeps_counting_until_the_api_shows_it_bound(
        sched: Scheduler) -> None:
    sched.on_node_add(make_node("n1").raw())
    raw = _pod("p", cpu="1")
    sched.on_pod_add(raw)
    qp = sched.queue.pop(timeout=0)
    assert qp is not None
    pod = qp.pod
    with sched.lock:  # what a successful cycle does before binding
        sched.cluster.assume(pod, "n1")
        sched.assumed[pod.uid] = "n1"
        sched.queue.done(pod.uid)
    # A status update without nodeName (the bind is still in flight) changes nothing.
    sched.on_pod_update(raw, raw)
    assert sched.cluster.node_of("uid-p") == "n1"
    assert "uid-p" not in sched.queue
    # The API shows it bound: the assumption becomes the real placement.
    bound = _pod("p", cpu="1", node="n1")
    sched.on_pod_update(raw, bound)
    assert "uid-p" not in sched.assumed
    assert sched.cluster.node_of("uid-p") == "n1"
    info = sched.cluster.get("n1")
    assert info is not None and info.requested["cpu"] == 1000


def test_deleting_a_bound_pod_frees_room_for_waiting_pods(sched: Scheduler) -> None:
    sched.on_node_add(make_node("n1").capacity(cpu="2", memory="4Gi", pods="10").raw())
    sched.on_pod_add(_pod("resident", cpu="2", node="n1"))
    sched.on_pod_add(_pod("waiting", cpu="1"))
    qp = sched.queue.pop(timeout=0)
    assert qp is not None and qp.pod.name == "waiting"
    sched.schedule(qp)
    assert sched.queue.where("uid-waiting") == UNSCHEDULABLE
    sched.on_pod_delete(_pod("resident", cpu="2", node="n1"))
    assert sched.queue.where("uid-waiting") in (ACTIVE, "backoff")
    assert sched.cluster.node_of("uid-resident") is None


def test_workloads_and_namespaces_feed_the_cluster_state(sched: Scheduler) -> None:
    svc = {"kind": "Service", "metadata": {"name": "web", "namespace": "shop"},
           "spec": {"selector": {"app": "web"}}}
    sched.on_workload("Service", svc)
    first = sched.cluster.workloads["Service"]
    assert first == [svc]
    changed = {**svc, "spec": {"selector": {"app": "web2"}}}
    sched.on_workload_update("Service", svc, changed)
    assert sched.cluster.workloads["Service"] == [changed]
    assert sched.cluster.workloads["Service"] is not first  # replaced, not edited
    sched.on_workload("Service", changed, deleted=True)
    assert sched.cluster.workloads["Service"] == []
    sched.on_namespace({"metadata": {"name": "shop", "labels": {"team": "a"}}})
    assert sched.cluster.namespace_labels["shop"] == {"team": "a"}
    sched.on_namespace({"metadata": {"name": "shop"}}, deleted=True)
    assert "shop" not in sched.cluster.namespace_labels


def test_a_pod_deleted_as_its_failure_is_recorded_leaves_no_throttle_entry(
        sched: Scheduler) -> None:
    """The delete arrives on the informer's thread between the failed pod's requeue and
    its throttle entry: it must wait for both, so the entry it forgets exists."""
    sched.on_node_add(make_node("small").capacity(cpu="1", memory="1Gi", pods="10").raw())
    raw = _pod("big", cpu="2")
    sched.on_pod_add(raw)
    qp = sched.queue.pop(timeout=0)
    assert qp is not None
    requeue = sched.queue.requeue
    deleter = threading.Thread(target=sched.on_pod_delete, args=(raw,))

    def requeue_then_delete(*args: object, **kw: object) -> str | None:
        where = requeue(*args, **kw)  # type: ignore[arg-type]
        deleter.start()
        deleter.join(0.2)  # it cannot finish before the failure is fully recorded
        return where

    sched.queue.requeue = requeue_then_delete  # type: ignore[method-assign]
    sched.schedule(qp)
    deleter.join(5)
    assert not deleter.is_alive()
    assert "uid-big" not in sched.queue
    assert sched.throttle.last_message("uid-big") is None
