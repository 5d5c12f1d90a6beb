"""DefaultPreemption (PostFilter): when no node fits, find the node where evicting the
fewest and least important lower-priority pods makes the pod fit (kube-scheduler v1.36,
pkg/scheduler/framework/plugins/defaultpreemption and framework/preemption).

The plugin decides; whoever runs the cycle acts on its `PostFilterResult`:
- Success: evict `victims` (the DisruptionTarget condition, then delete; a victim
  already being deleted needs no call), set the pod's status.nominatedNodeName to
  `nominated_node`, clear the nomination of every pod in `clear_nominations`;
- Unschedulable with a result whose `nominated_node` is "": no candidate; clear the
  pod's own nomination if it has one;
- Unschedulable without a result: the pod may not preempt (preemptionPolicy Never, or
  its last preemption's victims are still terminating); leave its nomination alone.

Why each node won or lost is kept in the cycle state (`preemption_report`), for
explain; `PreemptionReport.lines` says it in words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policyd.framework.cycle_state import CycleState
from policyd.framework.fit_error import Diagnosis, fit_error_message
from policyd.framework.interfaces import PostFilterResult
from policyd.framework.runtime import Framework
from policyd.framework.status import Code, Status
from policyd.model.records import Pod
from policyd.plugins.defaultpreemption import NAME
from policyd.plugins.defaultpreemption.args import DefaultPreemptionArgs, parse_args
from policyd.plugins.defaultpreemption.evaluator import (
    NOT_HELPFUL,
    Candidate,
    Evaluator,
    Trial,
    ineligibility,
    nodes_preemption_might_help,
    pick_one_node,
)

# Upstream's default profile gives DefaultPreemption no weight (it does not score).
DEFAULT_WEIGHT: int | None = None

# Upstream prefixes every message of the plugin with this.
MESSAGE_PREFIX = "preemption: "

REPORT_KEY = f"{NAME}/report"

_SUCCESS = Status(Code.SUCCESS)


@dataclass(slots=True)
class PreemptionReport:
    """What one PostFilter call found, for explain: "what preemption would do"."""

    # Why the pod may not preempt at all ("" when it may).
    ineligible: str = ""
    # How many nodes preemption might help (their filters' failure is Unschedulable),
    # where the dry runs started among them, and how many candidates were enough.
    potential_nodes: int = 0
    offset: int = 0
    num_candidates: int = 0
    # Every dry run in order: its victims and PDB violations, or why it gave none.
    trials: list[Trial] = field(default_factory=list)
    # The chosen candidate, and for each other candidate the criterion it lost on.
    chosen: Candidate | None = None
    lost: dict[str, str] = field(default_factory=dict)


    def lines(self) -> list[str]:
        """The report in words, one line per fact, for explain's text output."""
        if self.ineligible:
            return [f"the pod may not preempt: {self.ineligible}"]
        if not self.potential_nodes:
            return ["no node rejected the pod for a reason evicting pods can undo"]
        out = []
        if self.chosen is not None:
            out.append(f"would evict {len(self.chosen.victims)} pod(s) on "
                       f"{self.chosen.node} and nominate the pod there")
        else:
            out.append("evicting lower-priority pods makes room on no node")
        for trial in self.trials:
            c = trial.candidate
            if c is None:
                reason = trial.status.message if trial.status is not None else ""
                out.append(f"  {trial.node}: no candidate: {reason}")
                continue
            verdict = ("chosen" if self.chosen is not None and c.node == self.chosen.node
                       else f"lost on {self.lost.get(c.node, 'not kept')}")
            victims = ", ".join(f"{p.key} (priority {p.priority})" for p in c.victims)
            out.append(f"  {c.node}: {verdict}; victims {victims}; "
                       f"{c.num_pdb_violations} PodDisruptionBudget violation(s)")
        out.append(f"  {len(self.trials)} of {self.potential_nodes} node(s) tried from "
                   f"offset {self.offset}, {self.num_candidates} candidate(s) wanted")
        return out


def preemption_report(state: CycleState) -> PreemptionReport | None:
    """The report DefaultPreemption left in `state`, None when it did not run."""
    report = state.get(REPORT_KEY)
    return report if isinstance(report, PreemptionReport) else None


class DefaultPreemption:
    name = NAME

    def post_filter_notes(self, state: CycleState) -> list[str]:
        """What preemption did or would do in this cycle, for explain."""
        report = preemption_report(state)
        return report.lines() if report is not None else []

    def __init__(self, args: DefaultPreemptionArgs) -> None:
        self.args = args

    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis
                    ) -> tuple[PostFilterResult | None, Status]:
        cluster, fw = state.cluster, state.framework
        if cluster is None or not isinstance(fw, Framework):
            return None, Status.error(f"{NAME} needs the cycle's cluster and framework")
        report = PreemptionReport()
        state.write(REPORT_KEY, report)
        reason = ineligibility(pod, cluster, diagnosis)
        if reason:
            report.ineligible = reason
            return None, Status.unschedulable(MESSAGE_PREFIX + reason)

        all_nodes = state.all_nodes or cluster.node_infos()
        potential = nodes_preemption_might_help(diagnosis, all_nodes)
        # The nominator, which may be ahead of the API (a nomination of ours whose
        # status patch has not come back yet).
        nominated = cluster.nominations()
        candidates: list[Candidate] = []
        statuses: dict[str, Status] = {}
        if potential:
            report.potential_nodes = len(potential)
            # GetOffsetAndNumCandidates: a random start among the potential nodes.
            report.offset = fw.rng.randrange(len(potential))
            report.num_candidates = self.args.num_candidates(len(potential))
            evaluator = Evaluator(fw, pod, cluster, cluster.disruption_budgets.budgets(),
                                  nominated)
            candidates, statuses, report.trials = evaluator.dry_run(
                potential, report.offset, report.num_candidates)

        if not candidates:
            errors = [s.message for s in statuses.values() if s.code is Code.ERROR]
            if errors:
                return None, Status(Code.ERROR, (MESSAGE_PREFIX + _aggregate(errors),))
            # A FitError over the dry runs' statuses; every other node (those the
            # filters ruled out for good) is one preemption cannot help.
            message = fit_error_message(len(all_nodes), Diagnosis(
                node_to_status=statuses, absent_nodes_status=Status.unresolvable(NOT_HELPFUL)))
            return PostFilterResult(nominated_node=""), Status.unschedulable(
                MESSAGE_PREFIX + message)

        best, report.lost = pick_one_node(candidates)
        report.chosen = best
        # getLowerPriorityNominatedPods: they may no longer fit once the pod takes the
        # space, so their nomination goes and they are tried again elsewhere.
        clear = tuple(p for p in nominated.get(best.node, ()) if p.priority < pod.priority)
        return PostFilterResult(best.node, best.victims, clear), _SUCCESS


def _aggregate(messages: list[str]) -> str:
    """utilerrors.NewAggregate(errs).Error(): one message as is, several in brackets,
    each distinct message once."""
    distinct = list(dict.fromkeys(messages))
    return distinct[0] if len(distinct) == 1 else f"[{', '.join(distinct)}]"


def new(args: Mapping[str, Any] | None = None) -> DefaultPreemption:
    """Build DefaultPreemption from DefaultPreemptionArgs; raises PluginError."""
    return DefaultPreemption(parse_args(args))
