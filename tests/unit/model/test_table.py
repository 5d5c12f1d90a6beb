"""The NodeTable must mirror ClusterState after every kind of change."""

from __future__ import annotations

import numpy as np

from policyd.model.cluster import ClusterState
from tests.builders import make_node, make_pod


def column(state: ClusterState, resource: str) -> list[int]:
    table = state.table()
    j = table.resource_column(resource)
    assert j is not None
    return [int(v) for v in table.requested[j]]


def test_assume_forget_and_pod_removal_update_one_row() -> None:
    state = ClusterState([make_node("a").obj(), make_node("b").obj()])
    pod = make_pod("p").req(cpu="1").obj()
    state.upsert_pod(pod)
    assert column(state, "cpu") == [0, 0]
    state.assume(pod, "b")
    assert column(state, "cpu") == [0, 1000]
    assert state.table().pod_count.tolist() == [0, 1]
    state.forget(pod)
    assert column(state, "cpu") == [0, 0]


def test_node_updates_refresh_labels_taints_and_allocatable() -> None:
    state = ClusterState([make_node("a").label("zone", "x").obj(), make_node("b").obj()])
    codes, vocab = state.table().label_codes("zone")
    assert codes.tolist() == [0, -1] and vocab == {"x": 0}
    state.upsert_node(make_node("b").label("zone", "y").taint("t").unschedulable().obj())
    table = state.table()
    codes, vocab = table.label_codes("zone")
    assert codes.tolist() == [0, 1]
    assert table.unschedulable.tolist() == [False, True]
    assert table.taint_sets[int(table.taint_set_id[1])][0].key == "t"


def test_a_heartbeat_keeps_the_label_and_image_columns() -> None:
    # A kubelet re-posts its node every 10 s with nothing but heartbeat times changed:
    # the columns built from labels and images must survive it; a real change must not.
    node = make_node("a").label("zone", "x").image(100, "app:1")
    state = ClusterState([node.obj(), make_node("b").obj()])
    table = state.table()
    codes, _ = table.label_codes("zone")
    sizes = table.image_sizes("app:1")
    version = table.version
    state.upsert_node(node.obj())  # a new record with equal content
    table = state.table()
    assert table.label_codes("zone")[0] is codes
    assert table.image_sizes("app:1") is sizes
    assert table.version == version
    state.upsert_node(node.label("zone", "y").obj())
    table = state.table()
    assert table.label_codes("zone")[1] == {"y": 0}
    assert table.image_sizes("app:1") is sizes
    assert table.version == version + 1
    state.upsert_node(make_node("a").label("zone", "y").image(300, "app:1").obj())
    assert state.table().image_sizes("app:1").tolist() == [300, -1]


def test_new_nodes_and_new_resources_rebuild() -> None:
    state = ClusterState([make_node("a").obj()])
    assert state.table().names == ["a"]
    state.upsert_node(make_node("gpu").resource("nvidia.com/gpu", "2").obj())
    table = state.table()
    assert table.names == ["a", "gpu"]
    j = table.resource_column("nvidia.com/gpu")
    assert j is not None and table.allocatable[j].tolist() == [0, 2]
    state.remove_node("a")
    assert state.table().names == ["gpu"]


def test_label_groups_share_verdicts() -> None:
    nodes = [make_node(f"n{i}").label("zone", "abc"[i % 3]).obj() for i in range(6)]
    table = ClusterState(nodes).table()
    group, members = table.label_groups(("zone",))
    assert len(members) == 3
    zones = np.array([nodes[m].labels["zone"] for m in members])
    assert [str(z) for z in zones[group]] == [n.labels["zone"] for n in nodes]


def test_the_change_log_reports_what_changed_and_when_it_lost_track() -> None:
    state = ClusterState([make_node("a").obj(), make_node("b").obj()])
    start = state.epoch
    state.assume(make_pod("p").obj(), "a")
    assert state.changes_since(start) == {"a"}
    assert state.changes_since(state.epoch) == set()
    assert state.changes_since(-5) is None
