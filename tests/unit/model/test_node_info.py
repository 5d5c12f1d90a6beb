"""NodeInfo.clone: a copy to add and remove pods on, the original unchanged."""

from __future__ import annotations

from policyd.model.node_info import NodeInfo
from tests.builders import make_node, make_pod


def test_a_clone_changes_alone() -> None:
    info = NodeInfo(make_node("n1").obj())
    a = make_pod("a").req(cpu="1").host_port(80).obj()
    b = make_pod("b").req(cpu="2").obj()
    info.add_pod(a)
    info.add_pod(b)
    before = (dict(info.pods), dict(info.requested), dict(info.used_ports), info.generation)
    copy = info.clone()
    assert copy.node is info.node
    assert (copy.pods, copy.requested, copy.used_ports) == before[:3]
    copy.remove_pod(a)
    assert "a" not in {p.name for p in copy.pods.values()} and not copy.used_ports
    assert copy.requested["cpu"] == 2000
    assert (dict(info.pods), dict(info.requested), dict(info.used_ports),
            info.generation) == before


def test_a_clone_keeps_every_slot_and_counts_by_the_same_gates() -> None:
    """A preemption dry run on a cluster whose gates differ from v1.36's defaults
    counts the victims it removes by those gates (a resizing pod's pod-level status)."""
    from policyd.features import with_settings
    from policyd.model.records import pod_from_dict

    gates = with_settings([("InPlacePodLevelResourcesVerticalScaling", False)])
    info = NodeInfo(make_node("n1").obj(), gates)
    raw = make_pod("resizing").node("n1").raw()
    raw["spec"]["resources"] = {"requests": {"cpu": "2"}}
    raw["status"] = {"phase": "Running", "resources": {"requests": {"cpu": "1"}},
                     "allocatedResources": {"cpu": "3"}}
    resizing = pod_from_dict(raw)
    info.add_pod(resizing)
    copy = info.clone()
    assert {s: getattr(copy, s) for s in NodeInfo.__slots__} == \
        {s: getattr(info, s) for s in NodeInfo.__slots__}
    assert copy.features is gates and copy.requested["cpu"] == 2000
    copy.remove_pod(resizing)
    assert copy.requested["cpu"] == 0 and info.requested["cpu"] == 2000
