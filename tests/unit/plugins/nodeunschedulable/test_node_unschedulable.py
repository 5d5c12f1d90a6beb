"""NodeUnschedulable, with the cases of upstream's node_unschedulable_test.go."""

from __future__ import annotations

import pytest

from policyd.framework import Code, CycleState, PluginError, Status
from policyd.model.node_info import NodeInfo
from policyd.plugins import names
from policyd.plugins.nodeunschedulable.node_unschedulable import ERR_REASON_UNSCHEDULABLE, new
from tests.builders import PodBuilder, make_node, make_pod
from tests.plugin_harness import filter_statuses

REJECT = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_UNSCHEDULABLE,))


@pytest.mark.parametrize(
    ("name", "pod", "unschedulable", "want"),
    [
        ("does not schedule pod to unschedulable node", make_pod(), True, REJECT),
        ("schedules pod to normal node", make_pod(), False, None),
        ("pod with toleration fits an unschedulable node",
         make_pod().toleration("node.kubernetes.io/unschedulable", effect="NoSchedule"),
         True, None),
        # Beyond upstream's table: what ToleratesTaint implies for the cordon taint.
        ("toleration of every key with Exists fits", make_pod().toleration(operator="Exists"),
         True, None),
        ("toleration with empty effect fits",
         make_pod().toleration("node.kubernetes.io/unschedulable", operator="Exists"),
         True, None),
        ("toleration of another effect does not fit",
         make_pod().toleration("node.kubernetes.io/unschedulable", effect="NoExecute"),
         True, REJECT),
        ("toleration with a value does not match the empty taint value",
         make_pod().toleration("node.kubernetes.io/unschedulable", "x", "NoSchedule"),
         True, REJECT),
    ],
)
def test_filter(name: str, pod: PodBuilder, unschedulable: bool, want: Status | None) -> None:
    plugin = new()
    node = NodeInfo(make_node("n1").unschedulable(unschedulable).obj())
    p = pod.obj()
    assert plugin.filter(CycleState(), p, node) == want
    assert filter_statuses(plugin, p, node) == [want]


def test_factory() -> None:
    assert new(None).name == names.NODE_UNSCHEDULABLE
    with pytest.raises(PluginError):
        new({"x": 1})
