"""PostFilter: upstream's RunPostFilterPlugins composition, and the message it adds to
the FailedScheduling text on both evaluation paths."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from policyd.engine.cycle import schedule_one
from policyd.framework.cycle_state import CycleState
from policyd.framework.fit_error import Diagnosis
from policyd.framework.interfaces import PostFilterResult, extension_points
from policyd.framework.runtime import Framework
from policyd.framework.status import Code, Status
from policyd.model.cluster import ClusterState
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from tests.builders import make_node, make_pod
from tests.unit.framework.test_runtime import RejectNodes


class Says:
    """A PostFilter plugin returning a fixed status (and a result naming itself)."""

    def __init__(self, name: str, status: Status, nominate: bool = False) -> None:
        self.name = name
        self.status = status
        self.nominate = nominate
        self.seen: list[Diagnosis] = []

    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis
                    ) -> tuple[PostFilterResult | None, Status]:
        self.seen.append(diagnosis)
        return (PostFilterResult(self.name) if self.nominate else None), self.status


class Refuse:
    name = "Refuse"

    def pre_filter(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
                   ) -> tuple[set[str] | None, Status | None]:
        return None, Status.unresolvable("pod refused")


def run(*post: Says, pre: object | None = None, reference: bool = False):  # type: ignore[no-untyped-def]
    fw = Framework("p", pre_filter=[pre] if pre is not None else [],  # type: ignore[list-item]
                   filter=[RejectNodes("Full", {"n1", "n2"}, "Too many pods")],
                   post_filter=post)
    cluster = ClusterState([make_node("n1").obj(), make_node("n2").obj()])
    return schedule_one(fw, make_pod("p").obj(), cluster, reference=reference)


def test_a_post_filter_plugin_is_at_its_extension_point() -> None:
    assert "postFilter" in extension_points(Says("A", Status.unschedulable("x")))


@pytest.mark.parametrize("reference", [False, True])
def test_rejections_accumulate_in_order_after_the_filters_reasons(reference: bool) -> None:
    r = run(Says("DynamicResources", Status.unschedulable("no new claims to deallocate")),
            Says("DefaultPreemption", Status.unschedulable(
                "preemption: 0/2 nodes are available: 2 No preemption victims found for "
                "incoming pod.")), reference=reference)
    assert r.message == (
        "0/2 nodes are available: 2 Too many pods. no new claims to deallocate, "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for "
        "incoming pod.")
    assert r.node is None and r.post_filter is None


def test_without_post_filter_plugins_the_message_ends_at_the_filters() -> None:
    assert run().message == "0/2 nodes are available: 2 Too many pods."


def test_a_success_stops_and_its_result_is_kept() -> None:
    later = Says("Later", Status.unschedulable("never asked"))
    r = run(Says("First", Status.unschedulable("first")),
            Says("Preempt", Status(Code.SUCCESS), nominate=True), later)
    assert r.post_filter == PostFilterResult("Preempt")
    assert later.seen == []
    # A success's message is empty: the earlier rejection is not shown (upstream).
    assert r.message == "0/2 nodes are available: 2 Too many pods."


def test_unresolvable_stops_and_an_error_is_said() -> None:
    later = Says("Later", Status.unschedulable("never asked"))
    r = run(Says("Stop", Status.unresolvable("cannot help")), later)
    assert later.seen == [] and r.message.endswith("Too many pods. cannot help")
    r = run(Says("Broken", Status.error("it broke")))
    assert r.message == "0/2 nodes are available: 2 Too many pods. it broke"


def test_post_filter_sees_the_diagnosis_and_runs_after_a_pre_filter_rejection() -> None:
    plugin = Says("P", Status.unschedulable("preemption: not eligible"))
    r = run(plugin, pre=Refuse())
    assert r.message == "0/2 nodes are available: pod refused. preemption: not eligible"
    assert plugin.seen[0].pre_filter_message == "pod refused"
    plugin = Says("P", Status.unschedulable("x"))
    run(plugin)
    assert set(plugin.seen[0].node_to_status) == {"n1", "n2"}


def test_a_crashing_post_filter_is_an_error_naming_it() -> None:
    class Crash:
        name = "Crash"

        def post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis
                        ) -> tuple[PostFilterResult | None, Status]:
            raise RuntimeError("boom")

    r = run(Crash())  # type: ignore[arg-type]
    assert "running PostFilter plugin 'Crash': RuntimeError: boom" in r.message
