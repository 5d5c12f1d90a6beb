from collections.abc import Callable

import pytest

from policyd.model.cluster import ClusterState
from policyd.model.resources import REQUESTS_CACHE_PREFIX
from tests.builders import PodBuilder, make_node, make_pod


def test_bound_pods_count_and_finished_pods_do_not() -> None:
    running = make_pod("a").req(cpu="1").node("n1").phase("Running").obj()
    done = make_pod("b").req(cpu="2").node("n1").phase("Succeeded").obj()
    pending = make_pod("c").req(cpu="1").obj()
    state = ClusterState([make_node("n1").obj()], [running, done, pending])
    info = state.get("n1")
    assert info is not None
    assert info.requested["cpu"] == 1000
    assert list(info.pods) == [running.uid]
    assert state.pending_pods() == [pending]


def test_assume_counts_at_once_and_forget_undoes_it() -> None:
    state = ClusterState([make_node("n1").obj()])
    pod = make_pod("p").req(cpu="500m").host_port(80).obj()
    state.upsert_pod(pod)
    state.assume(pod, "n1")
    info = state.get("n1")
    assert info is not None
    assert info.requested["cpu"] == 500 and len(info.used_ports) == 1
    assert state.pending_pods() == []
    state.forget(pod)
    assert info.requested["cpu"] == 0 and not info.used_ports
    assert state.pending_pods() == [pod]


def test_pods_on_unknown_nodes_count_once_the_node_appears() -> None:
    pod = make_pod("p").req(cpu="1").node("late").obj()
    state = ClusterState([], [pod])
    info = state.upsert_node(make_node("late").obj())
    assert info.requested["cpu"] == 1000
    state.remove_pod(pod.uid)
    assert info.requested["cpu"] == 0


def test_nonzero_requests_for_containers_without_requests() -> None:
    state = ClusterState([make_node("n1").obj()], [make_pod("p").node("n1").obj()])
    info = state.get("n1")
    assert info is not None
    assert info.non_zero_requested == {"cpu": 100, "memory": 200 * 1024 * 1024}
    assert info.requested.get("cpu", 0) == 0


def test_a_pod_replaced_under_its_name_counts_only_with_its_new_uid() -> None:
    # A StatefulSet pod deleted and re-created: the old uid goes, the new one comes.
    state = ClusterState([make_node("n1").obj(), make_node("n2").obj()])
    old = make_pod("web-0").uid("old").req(cpu="500m").node("n1").obj()
    state.upsert_pod(old)
    state.remove_pod("old")
    new_pending = make_pod("web-0").uid("new").req(cpu="500m").obj()
    state.upsert_pod(new_pending)
    n1 = state.get("n1")
    assert n1 is not None and n1.requested.get("cpu", 0) == 0 and not n1.pods
    assert state.pending_pods() == [new_pending]
    # Bound elsewhere later: counted on n2 only.
    state.upsert_pod(make_pod("web-0").uid("new").req(cpu="500m").node("n2").obj())
    n2 = state.get("n2")
    assert n2 is not None and n2.requested["cpu"] == 500 and list(n2.pods) == ["new"]
    assert n1.requested.get("cpu", 0) == 0 and state.pending_pods() == []


def test_two_uids_under_one_name_are_two_pods() -> None:
    # Until the old uid is deleted, both count: the state never merges them by name.
    state = ClusterState([make_node("n1").obj()])
    state.upsert_pod(make_pod("web-0").uid("a").req(cpu="1").node("n1").obj())
    state.upsert_pod(make_pod("web-0").uid("b").req(cpu="1").node("n1").obj())
    info = state.get("n1")
    assert info is not None and info.requested["cpu"] == 2000
    state.remove_pod("a")
    assert info.requested["cpu"] == 1000 and list(info.pods) == ["b"]


def test_a_late_delete_of_a_replaced_node_keeps_the_new_one() -> None:
    state = ClusterState([make_node("n1").uid("n1-a").obj()])
    state.remove_node("n1", "n1-a")
    state.upsert_node(make_node("n1").uid("n1-b").obj())
    state.remove_node("n1", "n1-a")  # stale: that incarnation is gone already
    info = state.get("n1")
    assert info is not None and info.node.uid == "n1-b"
    state.remove_node("n1", "n1-b")
    assert state.get("n1") is None


def test_a_recreated_node_keeps_the_pods_bound_to_its_name() -> None:
    state = ClusterState([make_node("n1").uid("n1-a").obj()])
    state.upsert_pod(make_pod("p").uid("p").req(cpu="1").node("n1").obj())
    state.remove_node("n1", "n1-a")
    assert state.get("n1") is None
    state.upsert_node(make_node("n1").uid("n1-b").obj())
    info = state.get("n1")
    assert info is not None and info.requested["cpu"] == 1000
    # Deleting the pod while its node is gone frees it for good.
    state.remove_node("n1")
    state.remove_pod("p")
    state.upsert_node(make_node("n1").uid("n1-c").obj())
    info = state.get("n1")
    assert info is not None and info.requested.get("cpu", 0) == 0


def _counted(state: ClusterState, node: str) -> tuple[object, ...]:
    info = state.get(node)
    assert info is not None
    return (dict(info.requested), dict(info.non_zero_requested), dict(info.used_ports),
            sorted(info.pods), state.pods_with_affinity)


def _resized(builder: PodBuilder) -> PodBuilder:
    name = builder.obj().containers[0].name
    return builder.set("status.containerStatuses", [{
        "name": name, "allocatedResources": {"cpu": "2"},
        "resources": {"requests": {"cpu": "2"}}}])


_AFFINITY = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
    "labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}}

# Updates of a pod bound to n1, from a pod assumed there (requests 1 cpu, port 80):
# each must leave the node exactly as removing the old record and adding the new does.
_UPDATES: dict[str, Callable[[PodBuilder], PodBuilder]] = {
    "confirmed as it was": lambda b: b,
    "running now": lambda b: b.phase("Running"),
    "requests changed": lambda b: b.containers({"cpu": "2"}),
    "a container more": lambda b: b.container("extra").req(memory="1Gi"),
    "an init container more": lambda b: b.init_container(cpu="3"),
    "a sidecar more": lambda b: b.init_container(sidecar=True, cpu="3"),
    "another port": lambda b: b.host_port(81),
    "overhead": lambda b: b.overhead(cpu="100m"),
    "pod-level requests": lambda b: b.pod_requests(cpu="4"),
    "resized in place": _resized,
    "resize infeasible": lambda b: _resized(b).set("status.conditions", [{
        "type": "PodResizePending", "status": "True", "reason": "Infeasible"}]),
    "anti-affinity added": lambda b: b.affinity(_AFFINITY),
    "finished": lambda b: b.phase("Succeeded"),
    "bound elsewhere": lambda b: b.node("n2"),
}


@pytest.mark.parametrize("update", list(_UPDATES), ids=list(_UPDATES))
def test_an_update_of_a_bound_pod_counts_as_remove_and_add(update: str) -> None:
    def base() -> PodBuilder:
        return make_pod("p").uid("p").req(cpu="1").host_port(80)

    results = []
    for slow in (False, True):
        state = ClusterState([make_node("n1").obj(), make_node("n2").obj()])
        pending = base().obj()
        state.upsert_pod(pending)
        state.assume(pending, "n1")
        new = _UPDATES[update](base().node("n1")).obj()
        if slow:
            state.remove_pod("p")
        state.upsert_pod(new)
        info = state.get("n1")
        assert info is not None
        if not new.finished and new.node_name == "n1":
            assert info.pods["p"] is new  # the new record is the one plugins read
        results.append((_counted(state, "n1"), _counted(state, "n2"),
                        state.node_of("p"), state.pending_pods()))
    assert results[0] == results[1]


def test_confirming_an_assumed_pod_swaps_its_record_and_keeps_its_sums() -> None:
    state = ClusterState([make_node("n1").obj()])
    pending = make_pod("p").uid("p").req(cpu="1").obj()
    state.upsert_pod(pending)
    state.assume(pending, "n1")
    info = state.get("n1")
    assert info is not None
    generation, epoch = info.generation, state.epoch
    bound = make_pod("p").uid("p").req(cpu="1").node("n1").obj()
    state.upsert_pod(bound)
    # Swapped, not re-added: the sums computed for the assumed record came along...
    assert any(key.startswith(REQUESTS_CACHE_PREFIX) for key in bound.cache)
    assert info.pods == {"p": bound} and info.requested["cpu"] == 1000
    # ...and views keyed on the node still see that it changed.
    assert info.generation > generation
    assert state.changes_since(epoch) == {"n1"}


def test_what_if_removes_and_places_pods_and_restores_them_exactly() -> None:
    from tests.builders import make_node as _node
    from tests.builders import make_pod as _pod

    bound = _pod("bound").uid("b").node("n1").req(cpu="1").obj()
    assumed = _pod("assumed").uid("a").req(cpu="1").obj()
    pending = _pod("pending").uid("p").req(cpu="2").obj()
    cluster = ClusterState([_node("n1").obj(), _node("n2").obj()], [bound, pending])
    cluster.assume(assumed, "n1")
    n1, n2 = cluster.get("n1"), cluster.get("n2")
    assert n1 is not None and n2 is not None
    def sums() -> tuple[dict[str, int], dict[str, int], list[str]]:
        return ({k: v for k, v in n1.requested.items() if v},
                {k: v for k, v in n2.requested.items() if v},
                [p.uid for p in cluster.pending_pods()])

    before = sums()
    with cluster.what_if(remove=[bound, assumed], place=[(pending, "n2")]) as view:
        assert view.node_of("b") is None and view.node_of("a") is None
        assert view.node_of("p") == "n2" and view.pending_pods() == []
        assert n1.requested.get("cpu", 0) == 0 and n2.requested["cpu"] == 2000
    assert sums() == before and before[2] == ["p"]
    assert cluster.node_of("a") == "n1" and cluster.node_of("b") == "n1"
    assert cluster.node_of("p") is None


def test_what_if_restores_even_when_the_block_raises() -> None:
    from tests.builders import make_node as _node
    from tests.builders import make_pod as _pod

    bound = _pod("bound").uid("b").node("n1").obj()
    cluster = ClusterState([_node("n1").obj()], [bound])
    try:
        with cluster.what_if(remove=[bound]):
            raise KeyError("x")
    except KeyError:
        pass
    assert cluster.node_of("b") == "n1"
