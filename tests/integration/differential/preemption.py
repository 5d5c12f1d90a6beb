"""Preemption cases (`tests.gen.preemption`): kube-scheduler's default profile preempts,
and policyd must have chosen the same nominated node, the same victims and the same
FailedScheduling message, step after step.

A batch's cases go on the API server together (PriorityClasses first, for the priority
admission plugin; budgets with the status the disruption controller would write, read
back as stored). Then step by step, each case's preemptor of that step at once:

1. a barrier, then the cluster read back: what kube-scheduler will see, earlier steps'
   nominated preemptors (pending, status.nominatedNodeName) and terminating victims
   included, the budgets and PriorityClasses added;
2. the preemptors created; kube-scheduler's decision awaited: bound, or PodScheduled
   False, and when it nominated the pod, its victims deleted (they stay terminating:
   `tests.gen.preemption.VICTIM_FINALIZER`);
3. each preemptor's first try read from kube-scheduler's log (`queue_log`: its message;
   later tries of a nominated pod say "not eligible due to a terminating pod on the
   nominated node") and its nomination and victims from the API server: the pods of the
   case that came to be terminating in this step, each with the DisruptionTarget
   condition (a pod an earlier step's preemption left terminating can be a victim
   again, for both schedulers, but shows no new deletion: policyd's victims are
   compared without the pods terminating before the step);
4. policyd's cycle on the cluster of 1 (the engine, as the daemon runs it): `compare`'s
   verdict and message, then the same nominated node and the same victims; and once
   the victims are gone (the cluster copy without them, the pod nominated), the pod
   must fit its nominated node: what upstream's next try does;
5. preemptors that are neither bound nor nominated are deleted, so that a retry of
   theirs never changes the cluster behind the next step.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policyd.config.plugins import default_framework
from policyd.engine.cycle import ScheduleResult, schedule_one
from policyd.framework.runtime import Framework
from policyd.model.cluster import ClusterState
from policyd.model.disruption import POD_DISRUPTION_BUDGET, PRIORITY_CLASS
from policyd.model.records import pod_from_dict
from tests.gen.preemption import PreemptionCase, step_label
from tests.integration.differential.queue_log import Attempt, first_attempts, read_attempts
from tests.integration.differential.runner import (
    SCORED,
    ColumnarScores,
    KubeDecision,
    Runner,
    Tally,
    compare,
    compare_scores,
    pod_key,
    unbound,
)

# Tally.preemption's counts.
CASES = "preemption cases"
PREEMPTORS = "preemptors"
NOMINATED = "nominated by both"
VICTIMS = "victims compared"
WITH_BUDGET = "with a budget"
NEVER = "preemptionPolicy Never"
AFTER_NOMINATION = "steps after a nomination in their case"
NO_CANDIDATE = "no victims anywhere"
BOUND = "bound without preemption"
COUNTS = (CASES, PREEMPTORS, NOMINATED, VICTIMS, WITH_BUDGET, NEVER, AFTER_NOMINATION,
          NO_CANDIDATE, BOUND)

# After kube-scheduler nominated a pod, how long its victims' deletions get to show up
# (upstream deletes them asynchronously, after the nomination's status patch).
VICTIMS_SETTLE = 1.0
# How long kube-scheduler's log gets to show a decided first try (klog's flush).
LOG_WAIT = 5.0


@dataclass
class PreemptionStep:
    """One preemptor: kube-scheduler's first try against policyd's (`runner.Judged`),
    and both nominations and victim sets."""

    pod: str
    kube: KubeDecision
    policyd: ScheduleResult | None = None
    problems: list[str] = field(default_factory=list)
    mix: str = ""
    compared: str = ""
    kube_nominated: str | None = None
    kube_victims: set[str] = field(default_factory=set)

    @property
    def ok(self) -> bool:
        return not self.problems

    def policyd_nominated(self) -> str | None:
        pf = self.policyd.post_filter if self.policyd is not None else None
        return pf.nominated_node or None if pf is not None else None

    def policyd_victims(self) -> set[str]:
        pf = self.policyd.post_filter if self.policyd is not None else None
        return {v.key for v in pf.victims} if pf is not None else set()


@dataclass
class PreemptionOutcome:
    case: PreemptionCase
    steps: list[PreemptionStep] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and all(s.ok for s in self.steps)

    def describe(self) -> str:
        c = self.case
        lines = [f"preemption case {c.index} (prefix {c.prefix}, {', '.join(c.notes)}):"]
        lines += [f"  - {problem}" for problem in self.problems]
        for s in self.steps:
            p = s.policyd
            mark = "  " if s.ok else "* "
            lines.append(
                f"  {mark}{s.pod} (priority {p.pod.priority if p else '?'}): kube-scheduler "
                f"node={s.kube.node} nominated={s.kube_nominated} "
                f"victims={sorted(s.kube_victims)} {s.kube.message}")
            if p is not None:
                lines.append(f"      policyd node={p.node} nominated={s.policyd_nominated()} "
                             f"victims={sorted(s.policyd_victims())} {p.message}")
            lines += [f"      - {problem}" for problem in s.problems]
        return "\n".join(lines)

    def count(self, tally: Tally) -> None:
        counts = tally.preemption
        for name in COUNTS:
            counts.setdefault(name, 0)
        counts[CASES] += 1
        counts[WITH_BUDGET] += bool(self.case.budgets)
        nominated_before = False
        for step in self.steps:
            tally.add_decision(step)
            counts[PREEMPTORS] += 1
            counts[AFTER_NOMINATION] += nominated_before
            p = step.policyd
            if p is None:
                continue
            counts[NEVER] += p.pod.raw["spec"].get("preemptionPolicy") == "Never"
            both = step.kube_nominated is not None and step.policyd_nominated() is not None
            counts[NOMINATED] += both
            counts[VICTIMS] += len(step.kube_victims) if both else 0
            counts[BOUND] += p.node is not None and step.kube.node is not None
            counts[NO_CANDIDATE] += (p.post_filter is not None
                                     and not p.post_filter.nominated_node)
            nominated_before = nominated_before or step.kube_nominated is not None


class PreemptionRunner:
    """Runs batches of preemption cases on the API server of `runner`, whose
    kube-scheduler (the comparison's profile, DefaultPreemption in it) logs to
    `log_path`."""

    def __init__(self, runner: Runner, log_path: Path) -> None:
        self.runner = runner
        self.log_path = log_path

    def run_batch(self, cases: Sequence[PreemptionCase]) -> list[PreemptionOutcome]:
        r = self.runner
        namespaces = [ns for c in cases for ns in c.namespaces]
        outcomes = [PreemptionOutcome(c) for c in cases]
        try:
            classes = {pc["metadata"]["name"]: pc for c in cases for pc in c.priority_classes}
            r.each(lambda pc: r.ensure("/apis/scheduling.k8s.io/v1/priorityclasses", pc),
                   classes.values())
            r.put_scenes(cases)
            r.each(self._put_budget, [b for c in cases for b in c.budgets])
            budgets = self._read_budgets(outcomes)
            fw = default_framework(seed=r.seed)
            columnar = ColumnarScores(fw)
            for k in range(max(len(c.steps) for c in cases)):
                todo = [o for o in outcomes if k < len(o.case.steps)]
                r.barrier(f"{cases[0].prefix}-s{k}")
                cluster, _ = r.read_back(step_label(k))
                for budget in budgets:
                    cluster.disruption_budgets.upsert(POD_DISRUPTION_BUDGET, budget)
                for pc in classes.values():
                    cluster.disruption_budgets.upsert(PRIORITY_CLASS, pc)
                terminating = self._terminating(namespaces)
                offset = self.log_path.stat().st_size
                stored = {}
                for o in todo:  # one by one: the POST's answer is the pod as stored
                    pod = r.post(f"/api/v1/namespaces/{o.case.steps[k]['metadata']['namespace']}"
                                 "/pods", o.case.steps[k])
                    stored[pod_key(pod)] = pod
                decisions = self._wait(set(stored))
                attempts = self._first_tries(set(stored), offset)
                now_terminating = self._terminating(namespaces)
                for o in todo:
                    key = pod_key(o.case.steps[k])
                    # Victims are the case's own pods (its one namespace) that came to
                    # be terminating in this step.
                    victims = {v for v in now_terminating - terminating
                               if v.split("/", 1)[0] in o.case.namespaces}
                    step = self._judge(key, stored[key], decisions[key], attempts.get(key),
                                       victims, terminating, cluster, fw, columnar)
                    o.steps.append(step)
                    check_disruption_targets(r, step)
                r.each(r.delete_pod, [d.pod for d in decisions.values()
                                      if d.pod and d.node is None
                                      and not d.pod.get("status", {}).get("nominatedNodeName")])
            return outcomes
        finally:
            r.each(r.release, [p for c in cases for p in c.pods])
            r.each(self._delete_budget, [b for c in cases for b in c.budgets])
            r.cleanup(cases, namespaces)

    # -- budgets ---------------------------------------------------------------------------

    def _put_budget(self, budget: dict[str, Any]) -> None:
        """Create the budget, then write its status as the disruption controller would
        (none runs here): the status subresource ignores a status sent on create."""
        r = self.runner
        meta = budget["metadata"]
        path = f"/apis/policy/v1/namespaces/{meta['namespace']}/poddisruptionbudgets"
        r.post(path, {k: v for k, v in budget.items() if k != "status"})
        r.client.request("PATCH", f"{path}/{meta['name']}/status",
                         body={"status": budget["status"]},
                         content_type="application/merge-patch+json")

    def _delete_budget(self, budget: dict[str, Any]) -> None:
        meta = budget["metadata"]
        self.runner.client.request(
            "DELETE", f"/apis/policy/v1/namespaces/{meta['namespace']}/poddisruptionbudgets/"
            f"{meta['name']}")

    def _read_budgets(self, outcomes: Sequence[PreemptionOutcome]) -> list[dict[str, Any]]:
        """Every budget as stored (list items get their apiVersion and kind); a case whose
        budget does not show the status written is told so."""
        items: list[dict[str, Any]] = self.runner.client.request(
            "GET", "/apis/policy/v1/poddisruptionbudgets")["items"]
        for item in items:
            item["apiVersion"], item["kind"] = "policy/v1", POD_DISRUPTION_BUDGET
        stored = {(b["metadata"]["namespace"], b["metadata"]["name"]): b for b in items}
        for o in outcomes:
            for b in o.case.budgets:
                got = stored.get((b["metadata"]["namespace"], b["metadata"]["name"]))
                allowed = (got or {}).get("status", {}).get("disruptionsAllowed")
                if allowed != b["status"]["disruptionsAllowed"]:
                    o.problems.append(f"budget {b['metadata']['name']} reads back "
                                      f"disruptionsAllowed={allowed}, not "
                                      f"{b['status']['disruptionsAllowed']}")
        return items

    # -- kube-scheduler's side -------------------------------------------------------------

    def _terminating(self, namespaces: Sequence[str]) -> set[str]:
        """The pods of `namespaces` being deleted (preemption's victims, held)."""
        wanted = set(namespaces)
        pods = self.runner.client.request("GET", "/api/v1/pods")["items"]
        return {pod_key(p) for p in pods if p["metadata"]["namespace"] in wanted
                and p["metadata"].get("deletionTimestamp")}

    def _wait(self, keys: set[str]) -> dict[str, KubeDecision]:
        """kube-scheduler's decision on each preemptor: bound, or PodScheduled False
        (and, when nominated, VICTIMS_SETTLE more for its victims' deletions)."""
        r = self.runner
        decisions = {k: KubeDecision() for k in keys}
        deadline = time.monotonic() + r.timeout
        nominated_at: float | None = None
        while True:
            pods = r.client.request("GET", "/api/v1/pods")["items"]
            for pod in pods:
                d = decisions.get(pod_key(pod))
                if d is None:
                    continue
                d.pod = pod
                d.node = pod["spec"].get("nodeName") or None
                for cond in pod.get("status", {}).get("conditions", []):
                    if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                        d.reason = cond.get("reason", "")
                        d.message = cond.get("message", "")
                if pod.get("status", {}).get("nominatedNodeName") and nominated_at is None:
                    nominated_at = time.monotonic()
            settled = nominated_at is None or time.monotonic() - nominated_at > VICTIMS_SETTLE
            if (all(d.decided for d in decisions.values()) and settled) \
                    or time.monotonic() > deadline:
                return decisions
            time.sleep(0.1)

    def _first_tries(self, keys: set[str], offset: int) -> dict[str, Attempt]:
        """Each preemptor's first try as kube-scheduler logged it after `offset`."""
        deadline = time.monotonic() + LOG_WAIT
        while True:
            with self.log_path.open("rb") as f:
                f.seek(offset)
                text = f.read().decode(errors="replace")
            first = first_attempts(read_attempts(text[: text.rfind("\n") + 1]))
            if all(k in first and first[k].decided for k in keys) \
                    or time.monotonic() > deadline:
                return first
            time.sleep(0.1)

    # -- the comparison --------------------------------------------------------------------

    def _judge(self, key: str, stored: dict[str, Any], d: KubeDecision,
               attempt: Attempt | None, victims: set[str], terminating: set[str],
               cluster: ClusterState, fw: Framework, columnar: ColumnarScores
               ) -> PreemptionStep:
        kube = KubeDecision(node=d.node, reason=d.reason, pod=d.pod)
        # The first try's message: a nominated pod's later tries say something else.
        kube.message = attempt.message if attempt is not None and attempt.message else d.message
        step = PreemptionStep(key, kube)
        step.kube_nominated = d.pod.get("status", {}).get("nominatedNodeName") or None
        step.kube_victims = victims
        if attempt is None or not attempt.decided:
            step.problems.append("kube-scheduler's first try is not in its log")
        pod = pod_from_dict(unbound(stored))
        step.policyd = schedule_one(fw, pod, cluster)
        compare(step)
        if not step.ok:
            return step
        if step.mix == SCORED and attempt is not None:
            compare_scores(step, fw, pod, cluster, columnar,
                           attempt.scores if attempt.scores.totals else None)
        mine = step.policyd_nominated()
        if step.kube_nominated != mine:
            step.problems.append(f"nominated node differs: kube-scheduler "
                                 f"{step.kube_nominated}, policyd {mine}")
        # A victim already terminating (an earlier step's) is a victim again for both,
        # but only new deletions show on the API server.
        mine_new = step.policyd_victims() - terminating
        if step.kube_victims != mine_new:
            step.problems.append(f"victims differ: kube-scheduler {sorted(step.kube_victims)}, "
                                 f"policyd {sorted(step.policyd_victims())} "
                                 f"({sorted(mine_new)} not yet terminating)")
        if mine is not None and step.ok:
            self._check_fits_after(step, cluster, fw)
        return step

    def _check_fits_after(self, step: PreemptionStep, cluster: ClusterState, fw: Framework
                          ) -> None:
        """Once its victims are gone, the nominated pod's next try goes to its
        nominated node (upstream tries that node first)."""
        result = step.policyd
        assert result is not None and result.post_filter is not None
        node = result.post_filter.nominated_node
        raw = unbound(step.kube.pod)
        raw["status"] = {**raw["status"], "nominatedNodeName": node}
        nominated = pod_from_dict(raw)
        with cluster.what_if(remove=result.post_filter.victims):
            cluster.nominate(nominated, node)
            try:
                again = schedule_one(fw, nominated, cluster)
            finally:
                cluster.clear_nomination(nominated.uid)
        if again.node != node:
            step.problems.append(f"with its victims gone, policyd's next try places it on "
                                 f"{again.node}, not on its nominated {node}: {again.message}")


def check_disruption_targets(runner: Runner, step: PreemptionStep) -> None:
    """Every victim kube-scheduler chose in `step` carries the DisruptionTarget
    condition (reason PreemptionByScheduler), as upstream patches it before deleting."""
    for key in sorted(step.kube_victims):
        namespace, name = key.split("/", 1)
        pod = runner.client.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        conditions = {c.get("type"): c for c in pod.get("status", {}).get("conditions", [])}
        target = conditions.get("DisruptionTarget", {})
        if target.get("reason") != "PreemptionByScheduler":
            step.problems.append(f"victim {key} lacks DisruptionTarget "
                                 f"(PreemptionByScheduler): {target}")
