"""NodePorts, with the cases of upstream's node_ports_test.go."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policyd.framework import Code, CycleState, PluginError, Status
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.plugins import names
from policyd.plugins.nodeports.node_ports import ERR_REASON, new
from tests.builders import make_node, make_pod
from tests.plugin_harness import filter_statuses

REJECT = Status(Code.UNSCHEDULABLE, (ERR_REASON,))


def pod_with_ports(*specs: str, name: str = "pod") -> Pod:
    """Ports as upstream's test writes them: "PROTOCOL/HOST_IP/HOST_PORT"."""
    b = make_pod(name)
    for spec in specs:
        protocol, host_ip, port = spec.split("/")
        b = b.host_port(int(port), protocol=protocol, host_ip=host_ip)
    return b.obj()


def node_with(*pods: Pod) -> NodeInfo:
    info = NodeInfo(make_node("m1").obj())
    for p in pods:
        info.add_pod(p)
    return info


@pytest.mark.parametrize(
    ("name", "pod", "existing", "want"),
    [
        ("other port", ["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/9090"], None),
        ("same udp port", ["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], REJECT),
        ("same tcp port", ["TCP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], REJECT),
        ("different host ip", ["TCP/127.0.0.1/8080"], ["TCP/127.0.0.2/8080"], None),
        ("different protocol", ["UDP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], None),
        ("second udp port conflict", ["UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"],
         ["UDP/127.0.0.1/8080"], REJECT),
        ("first tcp port conflict", ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"],
         ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"], REJECT),
        ("first tcp port conflict due to 0.0.0.0 hostIP", ["TCP/0.0.0.0/8001"],
         ["TCP/127.0.0.1/8001"], REJECT),
        ("TCP hostPort conflict due to 0.0.0.0 hostIP",
         ["TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"], ["TCP/127.0.0.1/8001"], REJECT),
        ("second tcp port conflict to 0.0.0.0 hostIP", ["TCP/127.0.0.1/8001"],
         ["TCP/0.0.0.0/8001"], REJECT),
        ("second different protocol", ["UDP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], None),
        ("UDP hostPort conflict due to 0.0.0.0 hostIP", ["UDP/127.0.0.1/8001"],
         ["TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"], REJECT),
        # Beyond upstream's table.
        ("empty host IP is the wildcard", ["TCP//8001"], ["TCP/127.0.0.1/8001"], REJECT),
        ("empty protocol is TCP", ["/127.0.0.1/8001"], ["TCP/127.0.0.1/8001"], REJECT),
        ("SCTP is its own protocol", ["SCTP/0.0.0.0/8001"], ["TCP/0.0.0.0/8001"], None),
        ("'::' is not a wildcard (as upstream)", ["TCP/::/8001"], ["TCP/127.0.0.1/8001"],
         None),
        ("node without ports", ["TCP/0.0.0.0/80"], [], None),
    ],
)
def test_filter(name: str, pod: list[str], existing: list[str], want: Status | None) -> None:
    p = pod_with_ports(*pod)
    info = node_with(pod_with_ports(*existing, name="existing")) if existing else node_with()
    plugin = new()
    state = CycleState([info])
    assert plugin.pre_filter(state, p, [info]) == (None, None)
    assert plugin.filter(state, p, info) == want
    assert filter_statuses(plugin, p, info) == [want]


def test_pre_filter_skips_pod_without_host_ports() -> None:
    pod = make_pod().set("spec.containers", [
        {"name": "c", "image": "x", "ports": [{"containerPort": 80}]}]).obj()
    names_, status = new().pre_filter(CycleState(), pod, [])
    assert names_ is None
    assert status is not None and status.code is Code.SKIP


def test_filter_without_pre_filter() -> None:
    # Upstream errors; policyd computes the ports itself.
    p = pod_with_ports("TCP/0.0.0.0/80")
    info = node_with(pod_with_ports("TCP/10.0.0.1/80", name="existing"))
    assert new().filter(CycleState(), p, info) == REJECT


def _sidecar_pod(name: str, port: int, restart: str | None) -> Pod:
    init: dict[str, Any] = {"name": "init", "image": "x",
                            "ports": [{"containerPort": port, "hostPort": port}]}
    if restart:
        init["restartPolicy"] = restart
    return make_pod(name).set("spec.initContainers", [init]).obj()


def test_sidecar_ports_count_plain_init_ports_do_not() -> None:
    # GetHostPorts: restartable init containers (sidecars) hold their ports for the
    # pod's lifetime; plain init containers have exited before the pod runs.
    plugin = new()
    sidecar = _sidecar_pod("sidecar", 9000, "Always")
    plain = _sidecar_pod("plain", 9000, None)
    info = node_with(pod_with_ports("TCP/0.0.0.0/9000", name="existing"))
    state = CycleState([info])
    assert plugin.pre_filter(state, sidecar, [info]) == (None, None)
    assert plugin.filter(state, sidecar, info) == REJECT
    _, status = plugin.pre_filter(CycleState(), plain, [info])
    assert status is not None and status.code is Code.SKIP
    # An existing pod's sidecar port is in use on its node.
    info2 = node_with(sidecar)
    p = pod_with_ports("TCP/0.0.0.0/9000")
    assert plugin.filter(CycleState(), p, info2) == REJECT


def test_removed_pod_frees_its_port() -> None:
    existing = pod_with_ports("TCP/0.0.0.0/80", name="existing")
    info = node_with(existing)
    p = pod_with_ports("TCP/0.0.0.0/80")
    assert new().filter(CycleState(), p, info) == REJECT
    info.remove_pod(existing)
    assert new().filter(CycleState(), p, info) is None


_port = st.tuples(st.sampled_from(["TCP", "UDP"]),
                  st.sampled_from(["0.0.0.0", "127.0.0.1", "10.0.0.1"]),
                  st.sampled_from([80, 443, 8080]))


@settings(max_examples=200, deadline=None)
@given(wanted=st.lists(_port, min_size=1, max_size=3),
       nodes=st.lists(st.lists(_port, max_size=3), min_size=1, max_size=6))
def test_mask_matches_filter_on_generated_ports(wanted: list[tuple[str, str, int]],
                                   nodes: list[list[tuple[str, str, int]]]) -> None:
    pod = pod_with_ports(*(f"{p}/{ip}/{n}" for p, ip, n in wanted))
    infos = []
    for i, used in enumerate(nodes):
        info = NodeInfo(make_node(f"n{i}").obj())
        for j, (proto, ip, port) in enumerate(used):
            info.add_pod(pod_with_ports(f"{proto}/{ip}/{port}", name=f"e{i}-{j}"))
        infos.append(info)
    filter_statuses(new(), pod, *infos)  # asserts that both forms agree


def test_factory() -> None:
    assert new(None).name == names.NODE_PORTS
    with pytest.raises(PluginError):
        new({"x": 1})
