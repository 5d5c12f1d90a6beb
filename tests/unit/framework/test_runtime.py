"""The runner with small stand-in plugins (plain objects, as unit tests use)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import pytest

from policyd.engine.cycle import schedule_one
from policyd.framework.cycle_state import CycleState
from policyd.framework.fit_error import Diagnosis
from policyd.framework.interfaces import default_normalize_score, extension_points
from policyd.framework.runtime import Framework, WeightedScorePlugin
from policyd.framework.status import Code, Status
from policyd.model.cluster import ClusterState
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.model.table import BoolArray, IntArray, NodeTable
from tests.builders import make_node, make_pod


class RejectNodes:
    def __init__(self, name: str, reject: set[str], reason: str,
                 code: Code = Code.UNSCHEDULABLE) -> None:
        self.name = name
        self.reject = reject
        self.reason = reason
        self.code = code
        self.calls = 0

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        self.calls += 1
        if node.name in self.reject:
            return Status(self.code, (self.reason,))
        return None


class Crash:
    name = "Crash"

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        raise ZeroDivisionError("boom")


class Narrow:
    def __init__(self, name: str, nodes: set[str] | None, skip: bool = False) -> None:
        self.name = name
        self.nodes = nodes
        self.skip = skip

    def pre_filter(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
                   ) -> tuple[set[str] | None, Status | None]:
        return self.nodes, (Status.skip() if self.skip else None)

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        return Status.unschedulable(f"{self.name} ran")


class FixedScore:
    def __init__(self, name: str, scores: dict[str, int], normalize: bool = False) -> None:
        self.name = name
        self.scores = scores
        if normalize:
            self.normalize_score = self._normalize

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        return self.scores[node.name]

    def _normalize(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo],
                   scores: list[int]) -> Status | None:
        default_normalize_score(100, False, scores)
        return None


def cluster(*names: str) -> ClusterState:
    return ClusterState([make_node(n).obj() for n in names])


def test_first_rejecting_plugin_wins_and_later_plugins_do_not_see_the_node() -> None:
    a = RejectNodes("A", {"n1"}, "reason a")
    b = RejectNodes("B", {"n1", "n2"}, "reason b")
    fw = Framework("p", filter=[a, b])
    r = schedule_one(fw, make_pod().obj(), cluster("n1", "n2", "n3"), reference=True)
    assert r.node == "n3"
    assert r.diagnosis.node_to_status["n1"].plugin == "A"
    assert r.diagnosis.node_to_status["n2"].reasons == ("reason b",)
    assert b.calls == 2  # n1 was already rejected by A


def test_unschedulable_message_counts_first_reasons() -> None:
    a = RejectNodes("A", {"n1"}, "reason a")
    b = RejectNodes("B", {"n1", "n2"}, "reason b")
    r = schedule_one(Framework("p", filter=[a, b]), make_pod().obj(), cluster("n1", "n2"))
    assert r.node is None and r.unschedulable
    assert r.message == "0/2 nodes are available: 1 reason a, 1 reason b."


def test_plugin_exception_becomes_error_status_naming_the_plugin() -> None:
    r = schedule_one(Framework("p", filter=[Crash()]), make_pod().obj(), cluster("n1"))
    assert r.node is None and r.error is not None
    assert r.error.code is Code.ERROR
    assert "Crash" in r.message and "boom" in r.message


def test_prefilter_skip_means_filter_does_not_run() -> None:
    fw = Framework("p", pre_filter=[Narrow("N", None, skip=True)], filter=[Narrow("N", None)])
    assert schedule_one(fw, make_pod().obj(), cluster("n1")).node == "n1"


def test_prefilter_narrowing_reports_absent_nodes() -> None:
    n = Narrow("NodeAffinity", {"n1"})
    fw = Framework("p", pre_filter=[n], filter=[RejectNodes("R", {"n1"}, "Too many pods")])
    r = schedule_one(fw, make_pod().obj(), cluster("n1", "n2", "n3"))
    assert r.message == ("0/3 nodes are available: 1 Too many pods, "
                         "2 node(s) didn't satisfy plugin(s) [NodeAffinity].")


def test_prefilter_disjoint_sets_reject_the_pod() -> None:
    fw = Framework("p", pre_filter=[Narrow("A", {"n1"}), Narrow("B", {"n2"})])
    r = schedule_one(fw, make_pod().obj(), cluster("n1", "n2"))
    assert r.message == ("0/2 nodes are available: node(s) didn't satisfy plugin(s) [A B] "
                         "simultaneously.")
    fw = Framework("p", pre_filter=[Narrow("A", set())])
    r = schedule_one(fw, make_pod().obj(), cluster("n1", "n2"))
    assert r.message == "0/2 nodes are available: node(s) didn't satisfy plugin A."


class PreReject:
    """A PreFilter that rejects the pod with `code`, counting its calls."""

    def __init__(self, name: str, code: Code, reason: str) -> None:
        self.name = name
        self.code = code
        self.reason = reason
        self.calls = 0

    def pre_filter(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
                   ) -> tuple[set[str] | None, Status | None]:
        self.calls += 1
        return None, Status(self.code, (self.reason,))


def test_prefilter_keeps_running_after_a_plain_unschedulable_and_the_last_one_answers() -> None:
    first = PreReject("First", Code.UNSCHEDULABLE, "first says no")
    last = PreReject("Last", Code.UNSCHEDULABLE, "last says no")
    fw = Framework("p", pre_filter=[first, Narrow("Narrower", {"n1"}), last])
    state = CycleState(cluster("n1", "n2").node_infos())
    names, status, plugins = fw.run_pre_filter(state, make_pod().obj())
    assert (first.calls, last.calls) == (1, 1)  # preemption needs every plugin's state
    assert status is not None and status.plugin == "Last"
    assert status.reasons == ("last says no",) and names is None
    assert plugins == {"Narrower", "Last"}


def test_prefilter_unresolvable_after_unschedulable_ends_prefilter_with_its_answer() -> None:
    after = PreReject("After", Code.UNSCHEDULABLE, "never asked")
    fw = Framework("p", pre_filter=[PreReject("Soft", Code.UNSCHEDULABLE, "soft"),
                                    PreReject("Hard", Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                              "hard"), after])
    r = schedule_one(fw, make_pod().obj(), cluster("n1", "n2"))
    assert r.message == "0/2 nodes are available: hard."
    assert after.calls == 0


def test_prefilter_disjoint_sets_are_unresolvable_and_named_in_sorted_order() -> None:
    fw = Framework("p", pre_filter=[Narrow("Zeta", {"n1"}), Narrow("Alpha", {"n2"})])
    state = CycleState(cluster("n1", "n2").node_infos())
    _, status, plugins = fw.run_pre_filter(state, make_pod().obj())
    assert status is not None and status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ("node(s) didn't satisfy plugin(s) [Alpha Zeta] simultaneously",)
    assert plugins == {"Alpha", "Zeta"}


def test_weighted_sum_picks_highest_total() -> None:
    s1 = FixedScore("S1", {"n1": 10, "n2": 50, "n3": 100}, normalize=True)
    s2 = FixedScore("S2", {"n1": 100, "n2": 0, "n3": 0})
    fw = Framework("p", score=[WeightedScorePlugin(s1, 1), WeightedScorePlugin(s2, 2)])
    r = schedule_one(fw, make_pod().obj(), cluster("n1", "n2", "n3"), explain=True)
    assert r.scores is not None
    assert r.scores.totals == [10 + 200, 50, 100]
    assert r.node == "n1"


def test_score_out_of_range_is_an_error() -> None:
    fw = Framework("p", score=[WeightedScorePlugin(FixedScore("Big", {"n1": 101, "n2": 0}), 1)])
    r = schedule_one(fw, make_pod().obj(), cluster("n1", "n2"))
    assert r.error is not None
    assert r.message == ("plugin 'Big' returns an invalid score 101, it should in the range "
                         "of [0, 100] after normalizing")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ties_are_broken_at_random_but_reproducibly(seed: int) -> None:
    names = [f"n{i}" for i in range(10)]
    picks = set()
    for _ in range(2):
        fw = Framework("p", score=[WeightedScorePlugin(FixedScore("S", dict.fromkeys(names, 5)),
                                                       1)], seed=seed)
        c = cluster(*names)
        picks.add(tuple(schedule_one(fw, make_pod().obj(), c).node for _ in range(20)))
    assert len(picks) == 1  # same seed, same choices
    (choices,) = picks
    assert len(set(choices)) > 1  # but spread over the tied nodes


def test_explain_keeps_every_plugin_verdict() -> None:
    a = RejectNodes("A", {"n1"}, "reason a")
    b = RejectNodes("B", {"n1"}, "reason b")
    r = schedule_one(Framework("p", filter=[a, b]), make_pod().obj(), cluster("n1", "n2"),
                     explain=True)
    assert r.filter_details["n1"]["A"] == Status.unschedulable("reason a")
    assert r.filter_details["n1"]["B"] == Status.unschedulable("reason b")
    assert r.filter_details["n2"] == {"A": None, "B": None}


def test_default_normalize_score() -> None:
    scores = [0, 5, 10]
    default_normalize_score(100, False, scores)
    assert scores == [0, 50, 100]
    scores = [0, 5, 10]
    default_normalize_score(100, True, scores)
    assert scores == [100, 50, 0]
    scores = [0, 0]
    default_normalize_score(100, True, scores)
    assert scores == [100, 100]


class MaskedReject(RejectNodes):
    """RejectNodes with a columnar form, counting the calls of each form."""

    def __init__(self, name: str, reject: set[str], reason: str,
                 fallback: bool = False) -> None:
        super().__init__(name, reject, reason)
        self.fallback = fallback
        self.mask_calls = 0
        self.asked: list[str] = []

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        self.asked.append(node.name)
        return super().filter(state, pod, node)

    def filter_mask(self, state: CycleState, pod: Pod, table: NodeTable,
                    idx: IntArray) -> BoolArray | None:
        self.mask_calls += 1
        if self.fallback:
            return None
        return np.array([table.names[i] not in self.reject for i in idx.tolist()], np.bool_)


def test_plugins_are_bound_once_by_their_forms() -> None:
    plain = RejectNodes("Plain", set(), "x")
    masked = MaskedReject("Masked", set(), "x")
    s1 = FixedScore("S1", {}, normalize=True)
    fw = Framework("p", filter=[plain, masked],
                   score=[WeightedScorePlugin(s1, 3), WeightedScorePlugin(FixedScore("S2", {}), 1)])
    assert [(f.name, f.mask is not None) for f in fw.filters] == [
        ("Plain", False), ("Masked", True)]
    assert [(s.name, s.weight, s.normalize is not None, s.vector) for s in fw.scores] == [
        ("S1", 3, True, None), ("S2", 1, False, None)]
    assert extension_points(masked) == {"filter"}
    assert extension_points(Narrow("N", None)) == {"preFilter", "filter"}


def test_a_plugin_without_the_point_s_method_is_refused_when_the_framework_is_built() -> None:
    with pytest.raises(TypeError, match="not a Filter plugin"):
        Framework("p", filter=[FixedScore("S", {})])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="not a Score plugin"):
        Framework("p", score=[WeightedScorePlugin(Crash(), 1)])  # type: ignore[arg-type]


@pytest.mark.parametrize("fallback", [False, True])
def test_no_fit_reasons_come_from_filter_on_the_nodes_each_mask_rejects(fallback: bool) -> None:
    a = MaskedReject("A", {"n1"}, "reason a", fallback=fallback)
    b = MaskedReject("B", {"n1", "n2", "n3"}, "reason b", fallback=fallback)
    r = schedule_one(Framework("p", filter=[a, b]), make_pod().obj(), cluster("n1", "n2", "n3"))
    assert r.message == "0/3 nodes are available: 1 reason a, 2 reason b."
    assert r.diagnosis.node_to_status["n2"] == Status.unschedulable("reason b").with_plugin("B")
    assert r.diagnosis.unschedulable_plugins == {"A", "B"}
    assert a.mask_calls == b.mask_calls == 2  # the decision pass, then the diagnosis
    if fallback:  # no mask: filter on every node still in play, as the reference path
        assert a.asked == ["n1", "n2", "n3"] * 2 and b.asked == ["n2", "n3"] * 2
    else:  # filter only where the mask rejected
        assert a.asked == ["n1"] and b.asked == ["n2", "n3"]


def test_the_reference_path_never_calls_the_columnar_form() -> None:
    a = MaskedReject("A", {"n1"}, "reason a")
    r = schedule_one(Framework("p", filter=[a]), make_pod().obj(), cluster("n1", "n2"),
                     reference=True)
    assert r.node == "n2" and a.mask_calls == 0


class _PreBind:
    """A PreBind plugin whose pre-flight answers `answer` (raises it, if an exception)."""

    def __init__(self, name: str, answer: Status | Exception | None,
                 calls: list[str]) -> None:
        self.name = name
        self.answer = answer
        self.calls = calls

    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str
                            ) -> Status | None:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str, handle: object
                 ) -> Status | None:
        self.calls.append(self.name)
        return None


class _PreBindWithoutPreFlight:
    name = "Old"

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str, handle: object
                 ) -> Status | None:
        return None


@pytest.mark.parametrize(("answers", "code", "message"), [
    ((Status.skip(), Status.skip()), Code.SKIP, ""),
    ((Status.skip(), None), Code.SUCCESS, ""),
    ((None, Status.error("boom")), Code.ERROR, 'running PreBindPreFlight "B": boom'),
    ((Status.unschedulable("no"), None), Code.ERROR,
     'PreBindPreFlight A returned "Unschedulable", which is unsupported. It is supposed '
     "to return Success, Skip, or Error status"),
    ((KeyError("x"), None), Code.ERROR, "running PreBindPreFlight \"A\": KeyError: 'x'"),
])
def test_pre_bind_pre_flights_as_upstream(answers: tuple[Status | Exception | None, ...],
                                          code: Code, message: str) -> None:
    calls: list[str] = []
    plugins = [_PreBind(n, a, calls) for n, a in zip("AB", answers, strict=True)]
    fw = Framework("p", pre_bind=plugins)
    state = CycleState()
    pod = make_pod("p").obj()
    status = fw.run_pre_bind_pre_flight(state, pod, "n1")
    assert (status.code if status is not None else Code.SUCCESS) is code
    if message:
        assert status is not None and status.message == message


def test_pre_bind_runs_only_the_plugins_whose_pre_flight_did_not_skip() -> None:
    calls: list[str] = []
    fw = Framework("p", pre_bind=[_PreBind("A", Status.skip(), calls),
                                  _PreBind("B", None, calls)])
    state = CycleState()
    pod = make_pod("p").obj()
    assert fw.run_pre_bind_pre_flight(state, pod, "n1") is None
    assert fw.run_pre_bind(state, pod, "n1", object()) is None  # type: ignore[arg-type]
    assert calls == ["B"]


def test_a_pre_bind_plugin_without_a_pre_flight_is_taken_to_have_work() -> None:
    fw = Framework("p", pre_bind=[_PreBindWithoutPreFlight()])
    assert fw.run_pre_bind_pre_flight(CycleState(), make_pod("p").obj(), "n1") is None


# PreFilterExtensions
class _Counting:
    """A PreFilter plugin with AddPod/RemovePod that counts pods in its state."""

    name = "Counting"

    def __init__(self, fail: bool = False, skip: bool = False) -> None:
        self.fail = fail
        self.skip = skip
        self.calls: list[tuple[str, str, str]] = []

    def pre_filter(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
                   ) -> tuple[set[str] | None, Status | None]:
        if self.skip:
            return None, Status.skip()
        state.write("Counting/n", 0)
        return None, None

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node: NodeInfo
                ) -> Status | None:
        self.calls.append(("add", pod_to_add.name, node.name))
        state.write("Counting/n", state.read("Counting/n") + 1)
        return Status.error("boom") if self.fail else None

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, node: NodeInfo
                   ) -> Status | None:
        self.calls.append(("remove", pod_to_remove.name, node.name))
        raise RuntimeError("broken")


class _ReadsNothing:
    name = "ReadsNothing"
    pre_filter_reads_other_pods = False

    def pre_filter(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
                   ) -> tuple[set[str] | None, Status | None]:
        return None, None


class _SaysNothing:
    name = "SaysNothing"

    def pre_filter(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
                   ) -> tuple[set[str] | None, Status | None]:
        return None, None


def test_pre_filter_extensions_run_unless_skipped_and_errors_name_the_plugin() -> None:
    counting = _Counting(fail=True)
    fw = Framework("p", pre_filter=[_ReadsNothing(), counting])
    assert fw.pre_filter_extensions == (cast(Any, counting),)  # duck-typed, as plugins are
    assert fw.pre_filter_state_follows_pods
    assert not Framework("p", pre_filter=[counting, _SaysNothing()]
                         ).pre_filter_state_follows_pods
    node = NodeInfo(make_node("n1").obj())
    pod, other = make_pod("p").obj(), make_pod("o").obj()
    state = CycleState()
    fw.run_pre_filter(state, pod)
    added = fw.run_pre_filter_extension_add_pod(state, pod, other, node)
    assert added == Status(Code.ERROR, ('running AddPod on PreFilter plugin "Counting": '
                                        'boom',), "Counting")
    removed = fw.run_pre_filter_extension_remove_pod(state, pod, other, node)
    assert removed is not None and removed.message == (
        'running RemovePod on PreFilter plugin "Counting": RuntimeError: broken')
    assert counting.calls == [("add", "o", "n1"), ("remove", "o", "n1")]
    skipping = _Counting(skip=True)
    fw = Framework("p", pre_filter=[skipping])
    state = CycleState()
    fw.run_pre_filter(state, pod)
    assert fw.run_pre_filter_extension_add_pod(state, pod, other, node) is None
    assert skipping.calls == []  # its PreFilter said Skip: no AddPod/RemovePod


class _Rejecting:
    def __init__(self, name: str, status: Status | None) -> None:
        self.name = name
        self.status = status

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        return self.status


@pytest.mark.parametrize("statuses", [
    [None, None],
    [None, Status.unschedulable("a")],
    [Status.unresolvable("b"), Status.unschedulable("a")],
    [Status(Code.SUCCESS), Status.error("c")],
])
def test_run_filters_on_node_is_run_filters_on_one_node(statuses: list[Status | None]
                                                        ) -> None:
    fw = Framework("p", filter=[_Rejecting(f"F{i}", s) for i, s in enumerate(statuses)])
    node = NodeInfo(make_node("n1").obj())
    pod = make_pod("p").obj()
    diagnosis = Diagnosis()
    feasible, error = fw.run_filters(CycleState(), pod, [node], diagnosis)
    expected = error if error is not None else (
        None if feasible else diagnosis.node_to_status["n1"])
    assert fw.run_filters_on_node(CycleState(), pod, node) == expected
