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
