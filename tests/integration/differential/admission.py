"""Admission cases (`tests.gen.admission`) on the API server: kube-scheduler places the
pod as the webhook admits it, policyd's engine decides the original pod with the
policies, and the nodes each finds feasible are compared.

For each batch: the scenes go on the API server (`Runner.put_scenes`, a barrier); each
original pod is created with dryRun, which returns it as the API server would store it
(defaults, admission plugins: what the webhook sees) without creating it; its
projection (`project_pod`) over the case's compiled policies gives the admitted pod
(`admit`, for the comparison's kube-scheduler), which is created for real. Once
kube-scheduler has decided, the cluster is read back and policyd decides.

kube-scheduler's feasible set: none when it found the pod Unschedulable; the nodes it
scored (its log, `score_log`) when it bound it after scoring; else (one feasible node:
it binds without scoring) the node it bound.

What is compared, per case (`judge`):
- with every projection visible (or none), kube-scheduler's set must be policyd's for
  the original pod with the policies; with one invisible, policyd's must be a subset;
- the same between kube-scheduler and policyd deciding the admitted pod with the
  policies (what policyd itself schedules once the webhook runs), for every case;
- an Unschedulable pod must be unschedulable for policyd, whose message counts the
  same nodes ("0/N nodes are available");
- policyd's default profile must find exactly kube-scheduler's set for the admitted
  pod (a difference there is the engine's, not the projection's: said apart).

Except the first item for a pod with a DoNotSchedule topology spread constraint that
honors node affinity (nodeAffinityPolicy Honor, the default) when the projection adds
requirements: such a constraint counts the pods and domains of the nodes the pod's
required node affinity admits, so the admitted pod is spread over fewer domains than
the original, and either can be stricter (minDomains, an empty domain the policy
rejects). Those cases are counted (`AdmissionTally.spread`), and how many of them the
original pod's comparison would fail (`spread_differs`), not failed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from policyd.admission.mutation import admit
from policyd.admission.projection import RuleProjection, project_pod
from policyd.config.plugins import default_framework
from policyd.engine.cycle import ScheduleResult, schedule_one
from policyd.framework.runtime import Framework
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod, pod_from_dict
from policyd.policy.compiler import CompiledPolicy, compile_policy
from tests.gen.admission import AdmissionCase
from tests.gen.differential import SCHEDULER_NAME
from tests.integration.differential.runner import (
    KubeDecision,
    Runner,
    parse_fit_error,
    pod_key,
    unbound,
)
from tests.integration.differential.score_log import KubeScores

# What the projections of a case's rules say (`kind_of`).
VISIBLE = "all visible"  # at least one rule applies; every one is projected
INVISIBLE = "some invisible"  # at least one rule applies that no constraint expresses
NO_RULES = "no rule applies"


def kind_of(projections: Sequence[RuleProjection]) -> str:
    if not projections:
        return NO_RULES
    return INVISIBLE if any(p.invisible for p in projections) else VISIBLE


def spread_honors_affinity(pod: Mapping[str, Any]) -> bool:
    """Whether a DoNotSchedule topology spread constraint of `pod` counts only the
    nodes its required node affinity admits (nodeAffinityPolicy Honor, the default)."""
    return any(c.get("whenUnsatisfiable") == "DoNotSchedule"
               and c.get("nodeAffinityPolicy", "Honor") == "Honor"
               for c in pod.get("spec", {}).get("topologySpreadConstraints") or ())


def kube_feasible(decision: KubeDecision, scores: KubeScores | None) -> set[str]:
    """kube-scheduler's feasible nodes for a decided pod, from its decision and the
    scores it logged for the pod (None when it logged none)."""
    if decision.node is None:
        return set()
    if scores is None:
        return {decision.node}
    return set(scores.totals) | set(scores.plugins)


def _nodes(nodes: set[str] | Sequence[str]) -> str:
    return "{" + ", ".join(sorted(nodes)) + "}"


@dataclass
class AdmissionOutcome:
    """One case's two sides: kube-scheduler's decision on the admitted pod, policyd's
    on the original (`original`) and on the admitted pod (`admitted`) with the
    policies, and its default profile (no policies) on both pods."""

    case: AdmissionCase
    kube: KubeDecision
    projections: list[RuleProjection] = field(default_factory=list)
    kube_nodes: set[str] = field(default_factory=set)
    scored: bool = False  # kube_nodes came from kube-scheduler's score log
    original: ScheduleResult | None = None
    admitted: ScheduleResult | None = None
    default_original: set[str] = field(default_factory=set)
    default_admitted: set[str] = field(default_factory=set)
    # The original pod's comparison failed where a spread constraint excuses it.
    spread_differs: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return kind_of(self.projections)

    @property
    def spread(self) -> bool:
        """The projection adds requirements to a pod whose spreading honors them."""
        return (spread_honors_affinity(self.case.case.pod)
                and any(p.requirements for p in self.projections))

    @property
    def removed(self) -> set[str]:
        """The nodes the original pod fits without policies that kube-scheduler found
        infeasible for the admitted pod: what the projection took away."""
        return self.default_original - self.kube_nodes

    @property
    def ok(self) -> bool:
        return not self.problems

    def describe(self) -> str:
        c = self.case
        lines = [f"case {c.index} (prefix {c.prefix}, {', '.join(c.case.notes)}; "
                 f"{self.kind}{', spread honoring node affinity' if self.spread else ''}):"]
        lines += [f"  - {problem}" for problem in self.problems]
        lines.append("  projections: " + ("; ".join(
            f"{p.name}: {p.invisible or list(p.requirements)}" for p in self.projections)
            or "none"))
        lines.append(f"  kube-scheduler (admitted pod): node={self.kube.node} "
                     f"feasible={_nodes(self.kube_nodes)} {self.kube.message}")
        for name, r in (("original", self.original), ("admitted", self.admitted)):
            if r is not None:
                lines.append(f"  policyd ({name} pod, policies): node={r.node} "
                             f"feasible={_nodes(r.feasible)} {r.message}")
        return "\n".join(lines)


def judge(o: AdmissionOutcome) -> None:
    """Record in `o.problems` every way `o` breaks the claims the module lists."""
    k = o.kube
    if not k.decided:
        o.problems.append("kube-scheduler decided nothing in time")
        return
    if k.reason and k.reason != "Unschedulable":
        o.problems.append(f"kube-scheduler failed: {k.reason}: {k.message}")
        return
    for name, r in (("original", o.original), ("admitted", o.admitted)):
        if r is None or r.error is not None:
            o.problems.append(f"policyd failed on the {name} pod: "
                              f"{r.message if r is not None else 'not decided'}")
    if o.problems:
        return
    assert o.original is not None and o.admitted is not None
    if o.default_admitted != o.kube_nodes:
        o.problems.append(
            "policyd's default profile differs from kube-scheduler on the admitted pod "
            f"(an engine difference, not the projection's): kube-scheduler "
            f"{_nodes(o.kube_nodes)}, policyd {_nodes(o.default_admitted)}")
    strict = o.kind == INVISIBLE
    _compare_sets(o, "the admitted pod", set(o.admitted.feasible), strict)
    if o.spread:
        o.spread_differs = _differs(set(o.original.feasible), o.kube_nodes, strict)
    else:
        _compare_sets(o, "the original pod", set(o.original.feasible), strict)
    if k.node is None:
        _compare_counts(o, o.admitted if o.spread else o.original)


def _differs(mine: set[str], kube: set[str], strict: bool) -> bool:
    return not mine <= kube if strict else mine != kube


def _compare_sets(o: AdmissionOutcome, what: str, mine: set[str], strict: bool) -> None:
    if _differs(mine, o.kube_nodes, strict):
        relation = "a subset of" if strict else "equal to"
        o.problems.append(
            f"policyd's feasible nodes for {what} with the policies, {_nodes(mine)}, are "
            f"not {relation} kube-scheduler's for the admitted pod, {_nodes(o.kube_nodes)}"
            f" (only policyd: {_nodes(mine - o.kube_nodes)}; only kube-scheduler: "
            f"{_nodes(o.kube_nodes - mine)})")


def _compare_counts(o: AdmissionOutcome, mine: ScheduleResult) -> None:
    """kube-scheduler found the pod Unschedulable: so must policyd, counting the same
    nodes in its message."""
    if mine.node is not None or mine.feasible:
        return  # _compare_sets said so
    theirs, ours = parse_fit_error(o.kube.message), parse_fit_error(mine.message)
    if theirs is None or ours is None or theirs[0] != ours[0]:
        o.problems.append("the FailedScheduling messages count different nodes:\n"
                          f"      kube-scheduler: {o.kube.message}\n"
                          f"      policyd:        {mine.message}")


@dataclass
class AdmissionTally:
    """What a run covered: cases by what their projections say, those where
    kube-scheduler bound the pod, scored it, or found it Unschedulable, those whose
    projection removed nodes, and the spread cases the module describes."""

    kinds: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        (VISIBLE, INVISIBLE, NO_RULES), 0))
    bound: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        (VISIBLE, INVISIBLE, NO_RULES), 0))
    scored: int = 0
    unschedulable: int = 0
    removed: int = 0
    strictly_fewer: int = 0  # invisible cases where policyd admitted fewer nodes
    spread: int = 0
    spread_differs: int = 0
    cases: int = 0

    def add(self, o: AdmissionOutcome) -> None:
        self.cases += 1
        self.kinds[o.kind] += 1
        self.bound[o.kind] += o.kube.node is not None
        self.scored += o.scored
        self.unschedulable += o.kube.decided and o.kube.node is None
        self.removed += bool(o.removed)
        if o.original is not None and o.kind == INVISIBLE:
            self.strictly_fewer += len(o.original.feasible) < len(o.kube_nodes)
        self.spread += o.spread
        self.spread_differs += o.spread_differs

    def summary(self) -> str:
        return "; ".join([
            ", ".join(f"{n} {what} ({self.bound[what]} bound)"
                      for what, n in self.kinds.items()),
            f"{self.scored} scored by kube-scheduler, {self.unschedulable} unschedulable",
            f"the projection removed nodes in {self.removed}",
            f"policyd admitted fewer nodes than kube-scheduler in {self.strictly_fewer} "
            "with an invisible rule",
            f"{self.spread} with spreading that honors the projected affinity "
            f"({self.spread_differs} where the original pod's sets differ)"])


class AdmissionRunner:
    """Runs batches of admission cases on the API server of `runner`, with its
    kube-scheduler (which must log scores: `start_kube_scheduler`)."""

    def __init__(self, runner: Runner) -> None:
        if runner.score_log is None:
            raise ValueError("an admission comparison needs kube-scheduler's score log: "
                             "without it a pod bound among several nodes looks like one "
                             "with a single feasible node")
        self.runner = runner

    def run_batch(self, cases: Sequence[AdmissionCase]) -> list[AdmissionOutcome]:
        """Each case's pod admitted for kube-scheduler and decided by policyd, judged
        (the module's docstring says in which order and why)."""
        r = self.runner
        scenes = [c.case for c in cases]
        namespaces = [ns for s in scenes for ns in s.namespaces]
        try:
            r.put_scenes(scenes)
            r.barrier(cases[0].prefix)
            stored = list(r.pool.map(self._dry_run, [s.pod for s in scenes]))
            policies = [[compile_policy(doc) for doc in c.policies] for c in cases]
            outcomes = []
            admitted = []
            for c, pod, compiled in zip(cases, stored, policies, strict=True):
                projections = project_pod(pod_from_dict(unbound(pod)), compiled)
                admitted.append(admit(c.case.pod, projections, scheduler_name=SCHEDULER_NAME,
                                      override_scheduler=True).pod)
                outcomes.append(AdmissionOutcome(c, KubeDecision(), projections))
            r.create_pods(admitted)
            decisions = r.wait({_key(p) for p in admitted})
            cluster, test_pods = r.read_back()
            plain = default_framework(seed=r.seed)
            for o, original, compiled in zip(outcomes, stored, policies, strict=True):
                o.kube = decisions[_key(o.case.case.pod)]
                read = test_pods.get(_key(o.case.case.pod))
                if read is None:
                    o.problems.append("pod under test missing when read back")
                    continue
                self._decide(o, compiled, pod_from_dict(unbound(original)),
                             pod_from_dict(unbound(read)), cluster, plain)
            self._kube_sets(outcomes)
            for o in outcomes:
                if not o.problems:
                    judge(o)
            return outcomes
        finally:
            r.cleanup(scenes, namespaces)

    def _dry_run(self, pod: dict[str, Any]) -> dict[str, Any]:
        """`pod` as the API server would store it, not created (dryRun=All)."""
        return self.runner.client.request(
            "POST", f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods",
            body=pod, query={"dryRun": "All"})

    def _decide(self, o: AdmissionOutcome, policies: list[CompiledPolicy], original: Pod,
                admitted: Pod, cluster: ClusterState, plain: Framework) -> None:
        """policyd's decisions: both pods with the case's policies and without."""
        fw = default_framework(policies, seed=self.runner.seed)
        o.original = schedule_one(fw, original, cluster)
        o.admitted = schedule_one(fw, admitted, cluster)
        o.default_original = set(schedule_one(plain, original, cluster).feasible)
        o.default_admitted = set(schedule_one(plain, admitted, cluster).feasible)

    def _kube_sets(self, outcomes: Sequence[AdmissionOutcome]) -> None:
        """Each bound pod's feasible set for kube-scheduler, waiting for the score
        lines of those policyd's default profile finds two or more nodes for (a pod
        with one feasible node has none: waiting for it would only cost time)."""
        expected = {pod_key(o.case.case.pod) for o in outcomes
                    if o.kube.node is not None and len(o.default_admitted) > 1}
        logged = self.runner.kube_scores(expected)
        for o in outcomes:
            scores = logged.get(pod_key(o.case.case.pod))
            o.kube_nodes = kube_feasible(o.kube, scores)
            o.scored = o.kube.node is not None and scores is not None


def _key(pod: Mapping[str, Any]) -> tuple[str, str]:
    return pod["metadata"]["namespace"], pod["metadata"]["name"]
