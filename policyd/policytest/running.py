"""Run a loaded Suite's test cases: per-policy expectations through the compiled
plugin's own methods, whole-scheduler ones through the engine's `schedule_one` with the
suite's framework (the default profile, or its spec.profile); each
case becomes a CaseResult with the failures it found."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

from policyd.engine.cycle import schedule_one
from policyd.engine.pod_group import group_answer
from policyd.features import DEFAULTS, FeatureGates
from policyd.framework.cycle_state import CycleState
from policyd.framework.interfaces import (
    FilterPlugin,
    NormalizeScorePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
)
from policyd.framework.runtime import Framework
from policyd.model.cluster import ClusterState
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.policy.compiler import CompiledPolicy
from policyd.policytest.loading import Suite, group_case_key
from policyd.policytest.schema import CaseSpec, PolicyExpectation


@dataclass(slots=True)
class CaseResult:
    suite: str  # file::PolicyTest name
    name: str
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    file: str = ""
    line: int = 0

    @property
    def passed(self) -> bool:
        return not self.failures


@runtime_checkable
class FilteringPlugin(PreFilterPlugin, FilterPlugin, Protocol):
    """A plugin with PreFilter and Filter: a policy with filter rules, or a built-in."""


@runtime_checkable
class ScoringPlugin(PreScorePlugin, ScorePlugin, NormalizeScorePlugin, Protocol):
    """A plugin with PreScore, Score and NormalizeScore: a policy with score rules."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why a plugin rejected the pod on one node: its reasons, and when its PreFilter
    rejected the pod (on every node at once), that plugin's name."""

    reasons: tuple[str, ...]
    pre_filter: str = ""

    def how(self) -> str:
        """The rejection for a failure message: its reasons, and where it came from
        when the node's Filter never ran."""
        said = "; ".join(self.reasons)
        if not self.pre_filter:
            return said
        return f"PreFilter of {self.pre_filter} rejected the pod on every node: {said}"


def run_suite(suite: Suite) -> list[CaseResult]:
    out = []
    for i, case in enumerate(suite.tests):
        line = suite.doc.position(("spec", "tests", i))[0]
        result = CaseResult(suite.name, case["name"], file=suite.doc.file, line=line)
        start = time.perf_counter()
        try:
            _run_case(suite, case, result)
        except Exception as exc:  # a crash in a plugin is a failure, with its cause
            result.failures.append(f"internal error: {type(exc).__name__}: {exc}")
        result.seconds = time.perf_counter() - start
        out.append(result)
    return out


def _cluster(suite: Suite, pod: Pod, features: FeatureGates = DEFAULTS) -> ClusterState:
    """The suite's cluster for one case: every bound pod but the one under test;
    `features`: the gates of the profile the case runs."""
    return replace(suite.cluster, pods=[p for p in suite.cluster.pods
                                        if p.uid != pod.uid]).cluster(features)


def _run_case(suite: Suite, case: CaseSpec, result: CaseResult) -> None:
    if "podGroup" in case:
        _check_group(suite, case, result.failures)
        return
    pod = suite.pods[case["pod"]]
    for pname, exp in (case.get("policies") or {}).items():
        policy = suite.rule_forms[pname]
        cluster = _cluster(suite, pod)
        infos = cluster.node_infos()
        state = CycleState(infos, cluster)
        _check_policy(policy, pod, infos, state, exp, result.failures)
    if "scheduledTo" in case or "unschedulable" in case:
        _check_schedule(suite, pod, case, result.failures)


def filter_verdicts(plugin: FilteringPlugin, state: CycleState, pod: Pod,
                    infos: Sequence[NodeInfo]) -> dict[str, Rejection | None]:
    """Each node's verdict (None: it passes), as a cycle with only `plugin` gives it:
    PreFilter, then Filter per node. A PreFilter Skip means Filter does not run and
    every node passes; any other answer but success rejects the pod on every node
    with the PreFilter's reasons (Filter does not run either)."""
    _, status = plugin.pre_filter(state, pod, infos)
    if status is not None and status.is_skip:
        return {info.name: None for info in infos}
    if status is not None and not status.is_success:
        rejected = Rejection(status.reasons, status.plugin or plugin.name)
        return {info.name: rejected for info in infos}
    verdicts: dict[str, Rejection | None] = {}
    for info in infos:
        st = plugin.filter(state, pod, info)
        verdicts[info.name] = None if st is None or st.is_success else Rejection(st.reasons)
    return verdicts


def check_nodes(name: str, verdicts: dict[str, Rejection | None],
                exp: PolicyExpectation, failures: list[str]) -> None:
    """The `pass` and `fail` expectations of plugin `name` against `verdicts` (a node
    missing from them passed: a policy without filters)."""
    for n in exp.get("pass") or []:
        got = verdicts.get(n)
        if got is not None:
            failures.append(f"{name}: expected node {n} to pass, but it failed: "
                            f"{got.how()}")
    for n, want in (exp.get("fail") or {}).items():
        wanted = (want,) if isinstance(want, str) else tuple(want)
        got = verdicts.get(n)
        if got is None:
            failures.append(f"{name}: expected node {n} to fail with {'; '.join(wanted)!r}, "
                            "but it passed")
        elif got.reasons != wanted:
            where = f" (PreFilter of {got.pre_filter} rejected the pod on every node)" \
                if got.pre_filter else ""
            failures.append(f"{name}: node {n} failed with {'; '.join(got.reasons)!r}"
                            f"{where}, expected {'; '.join(wanted)!r}")


def _check_policy(policy: CompiledPolicy, pod: Pod, infos: list[NodeInfo],
                  state: CycleState, exp: PolicyExpectation, failures: list[str]) -> None:
    name = policy.name
    applies = policy.applies(pod)
    if "applies" in exp and exp["applies"] != applies:
        failures.append(f"{name}: expected the policy {'' if exp['applies'] else 'not '}"
                        f"to apply to the pod, but it {'does' if applies else 'does not'}")
        return
    verdicts: dict[str, Rejection | None] = {}
    if isinstance(policy, FilteringPlugin):
        verdicts = filter_verdicts(policy, state, pod, infos)
    passing = [i for i in infos if verdicts.get(i.name) is None]
    check_nodes(name, verdicts, exp, failures)
    if "scores" in exp:
        if not isinstance(policy, ScoringPlugin):
            failures.append(f"{name}: expected scores, but the policy has no score rules")
            return
        status = policy.pre_score(state, pod, passing)
        if status is not None:
            failures.append(f"{name}: expected scores, but PreScore returned "
                            f"{status.code}")
            return
        scores = [policy.score(state, pod, n) for n in passing]
        policy.normalize_score(state, pod, passing, scores)
        got_scores = {n.name: s for n, s in zip(passing, scores, strict=True)}
        for n, want_score in exp["scores"].items():
            if n not in got_scores:
                failures.append(f"{name}: expected node {n} to score {want_score}, but it "
                                "did not pass the policy's filters")
            elif got_scores[n] != want_score:
                failures.append(f"{name}: node {n} scored {got_scores[n]}, expected "
                                f"{want_score} (all: {got_scores})")


def _check_schedule(suite: Suite, pod: Pod, case: CaseSpec, failures: list[str]) -> None:
    fw = suite.framework()
    node, message = schedule(fw, pod, _cluster(suite, pod, fw.features))
    if "scheduledTo" in case:
        want = case["scheduledTo"]
        wanted = [want] if isinstance(want, str) else list(want)
        if node not in wanted:
            got = f"was scheduled to {node}" if node else f"was unschedulable: {message}"
            failures.append(f"expected the pod on {' or '.join(wanted)}, but it {got}")
    if "unschedulable" in case:
        want_u = case["unschedulable"]
        if want_u is False:
            if node is None:
                failures.append(f"expected the pod to be schedulable, but: {message}")
        elif node is not None:
            failures.append(f"expected the pod to be unschedulable, but it was scheduled "
                            f"to {node}")
        elif isinstance(want_u, str) and want_u != message:
            failures.append(f"unschedulable with {message!r}, expected {want_u!r}")


def _check_group(suite: Suite, case: CaseSpec, failures: list[str]) -> None:
    """A pod group case: the group's pending pods of the suite tried together, as the
    profile's pod group cycle tries them."""
    key = group_case_key(case["podGroup"])
    fw = suite.framework()
    cluster = suite.cluster.cluster(fw.features)
    members = {p.uid: p for p in suite.pods.values()
               if not p.node_name and p.namespace == key.namespace
               and p.scheduling_group == key.name}
    if not members:
        failures.append(f"no pending pod of pod group {key} in spec.pods")
        return
    for pod in members.values():
        cluster.upsert_pod(pod)
    summary = group_answer(fw, cluster, next(iter(members.values())))
    if summary is None:
        failures.append("the profile runs no pod group cycle (its GenericWorkload feature "
                        "gate is off: set featureGates in the test's spec.profile)")
        return
    if "placed" in case and case["placed"] != summary.placed:
        failures.append(f"expected the group {'placed' if case['placed'] else 'held'}, "
                        f"but: {summary.describe()}")
    if "nodes" in case and sorted(case["nodes"]) != summary.nodes:
        failures.append(f"expected the group on nodes {sorted(case['nodes'])}, but it got "
                        f"{summary.nodes}: {summary.describe()}")
    if "fits" in case and case["fits"] != len(summary.fitted):
        failures.append(f"expected {case['fits']} of its pods to fit, but "
                        f"{len(summary.fitted)} did: {summary.describe()}")


def schedule(fw: Framework, pod: Pod, cluster: ClusterState) -> tuple[str | None, str]:
    """(chosen node or None, FitError message) of one cycle of `fw`."""
    result = schedule_one(fw, pod, cluster)
    if result.error is not None:
        return None, f"scheduling error: {result.message}"
    return result.node, result.message
