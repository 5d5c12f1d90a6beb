from policyd.model.cluster import ClusterState
from tests.builders import make_node, make_pod


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
