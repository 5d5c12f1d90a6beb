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
