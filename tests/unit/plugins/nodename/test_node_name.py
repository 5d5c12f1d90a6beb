"""NodeName, with the cases of upstream's node_name_test.go."""

from __future__ import annotations

import pytest

from policyd.framework import Code, CycleState, PluginError, Status
from policyd.model.node_info import NodeInfo
from policyd.plugins import names
from policyd.plugins.nodename.node_name import ERR_REASON, new
from tests.builders import make_node, make_pod
from tests.plugin_harness import filter_statuses

REJECT = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON,))


@pytest.mark.parametrize(
    ("name", "pod_node", "node", "want"),
    [
        ("no host specified", "", "foo", None),
        ("host matches", "foo", "foo", None),
        ("host doesn't match", "bar", "foo", REJECT),
    ],
)
def test_filter(name: str, pod_node: str, node: str, want: Status | None) -> None:
    builder = make_pod()
    if pod_node:
        builder = builder.node(pod_node)
    pod = builder.obj()
    info = NodeInfo(make_node(node).obj())
    plugin = new()
    assert plugin.filter(CycleState(), pod, info) == want
    assert filter_statuses(plugin, pod, info) == [want]


def test_no_pre_filter_in_1_36() -> None:
    # kube-scheduler 1.36's NodeName is a Filter only.
    assert not hasattr(new(), "pre_filter")


def test_factory() -> None:
    assert new(None).name == names.NODE_NAME
    with pytest.raises(PluginError):
        new({"x": 1})
