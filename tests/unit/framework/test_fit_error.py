from policyd.framework.fit_error import (
    Diagnosis,
    fit_error_message,
    reason_counts,
    truncate_event_message,
)
from policyd.framework.status import Status


def test_reasons_are_counted_and_sorted_as_strings() -> None:
    d = Diagnosis()
    d.node_to_status["n1"] = Status.unschedulable("Insufficient cpu")
    d.node_to_status["n2"] = Status.unresolvable("node(s) had untolerated taint(s)")
    d.node_to_status["n3"] = Status.unresolvable("node(s) were unschedulable")
    assert fit_error_message(3, d) == (
        "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s), "
        "1 node(s) were unschedulable.")


def test_counts_sort_as_plain_strings_so_10_comes_before_2() -> None:
    d = Diagnosis()
    for i in range(10):
        d.node_to_status[f"a{i}"] = Status.unschedulable("Insufficient memory")
    for i in range(2):
        d.node_to_status[f"b{i}"] = Status.unschedulable("Insufficient cpu")
    assert fit_error_message(12, d) == (
        "0/12 nodes are available: 10 Insufficient memory, 2 Insufficient cpu.")


def test_one_node_can_add_several_reasons() -> None:
    d = Diagnosis()
    d.node_to_status["n1"] = Status.unschedulable("Insufficient cpu", "Insufficient memory")
    assert fit_error_message(1, d) == (
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.")


def test_prefilter_message_replaces_the_node_list() -> None:
    d = Diagnosis(pre_filter_message="pod has unbound immediate PersistentVolumeClaims")
    d.node_to_status["n1"] = Status.unschedulable("Insufficient cpu")
    assert fit_error_message(5, d) == (
        "0/5 nodes are available: pod has unbound immediate PersistentVolumeClaims.")


def test_absent_nodes_count_with_the_prefilter_narrowing_reason() -> None:
    d = Diagnosis(absent_nodes_status=Status.unresolvable(
        "node(s) didn't satisfy plugin(s) [NodeAffinity]"))
    d.node_to_status["n1"] = Status.unschedulable("Too many pods")
    assert fit_error_message(46, d) == (
        "0/46 nodes are available: 1 Too many pods, "
        "45 node(s) didn't satisfy plugin(s) [NodeAffinity].")


def test_no_nodes_is_upstreams_err_no_nodes_available() -> None:
    assert fit_error_message(0, Diagnosis()) == "no nodes available to schedule pods"


def test_event_message_is_truncated_to_1024() -> None:
    assert truncate_event_message("x" * 10) == "x" * 10
    long = truncate_event_message("y" * 5000)
    assert len(long) == 1024 and long.endswith("...")


def test_a_status_shared_by_many_nodes_counts_once_per_node() -> None:
    # Plugins hand the same status object to every node failing alike; an equal one
    # made apart counts the same, and the reasons keep their first-seen order.
    shared = Status.unschedulable("Insufficient cpu", "Too many pods")
    d = Diagnosis()
    for i in range(7):
        d.node_to_status[f"s{i}"] = shared
    d.node_to_status["x"] = Status.unschedulable("Insufficient cpu")
    d.node_to_status["y"] = Status.unresolvable("node(s) were unschedulable")
    d.node_to_status["z"] = shared
    assert reason_counts(d.node_to_status) == {
        "Insufficient cpu": 9, "Too many pods": 8, "node(s) were unschedulable": 1}
    assert list(reason_counts(d.node_to_status)) == [
        "Insufficient cpu", "Too many pods", "node(s) were unschedulable"]
    assert fit_error_message(10, d) == (
        "0/10 nodes are available: 1 node(s) were unschedulable, 8 Too many pods, "
        "9 Insufficient cpu.")
