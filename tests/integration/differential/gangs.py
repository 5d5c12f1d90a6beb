"""Gang cases (`tests.gen.gangs`) run by kube-scheduler and by `policyd run` at once,
each on its own copy of the case, and compared.

Both copies of every case of a batch are on the API server together (their nodes
created first, then one barrier so both schedulers count the same nodes); each copy's
steps run in order in a thread of their own: a step's pods are created one by one,
a group's PodGroup only once the copy's scheduler has seen all its members (a pod
pinned to the barrier node, bound, proves its pod watch delivered them), and the next
step waits until this one has settled. Settled is read from conditions, never from
time: every pod of the step bound or PodScheduled=False with a message, and a group's
PodGroupScheduled condition written. (kube-scheduler tries a held gang again and
again, thousands of times a second; every retry meets the same nodes, so what it
writes stays the same.)

Compared, per case:
- per group, the PodGroupScheduled condition: status, reason and message;
- per pod, bound or not by both; when not, the PodScheduled=False message (the
  FailedScheduling text) exactly;
- the nodes, through policyd's engine, not by name: each copy's placements are
  replayed in order on its own nodes with the reference path's scores (the members of
  a held group that fitted in the trial are placed on the engine's own choice for the
  rest of the step, then taken back). A bound pod's node must be feasible and have the
  highest total there; a pod told it fits nowhere must fit nowhere in the replay; a
  member the trial placed must fit somewhere.

Ties: both schedulers pick among the highest totals at random, so equal cases may
bind a group's pods on different (equally good) nodes; that is not a difference, and
the replay above is how nodes are judged. A tie between nodes in different states
(e.g. 2 of 4 CPUs used and 4 of 8: both score 50) can change what later pods of the
same case meet: which members fit, the counts in a FailedScheduling message, even
whether a gang reaches its quorum. A difference at or after a step where either
copy's replay met such an asymmetric tie is recorded as tie-dependent (counted and
shown, not a failure); one before any such tie is a failure.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from policyd.config.plugins import default_framework
from policyd.engine.cycle import schedule_one
from policyd.model.cluster import ClusterState
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod, node_from_dict, pod_from_dict
from tests.gen.clusters import HOSTNAME
from tests.gen.differential import CASE_LABEL
from tests.gen.gangs import BASIC, GROUP_KINDS, WORKLOAD_API, GangCase, Step
from tests.integration.differential.runner import BARRIER_NAMESPACE, Runner, unbound

# kube-scheduler v1.36.3's message to a member that fitted in a gang short of its
# quorum (tests/e2e/test_dev_feature_gates.py asserts it live).
GANG_WAITING = ("pod group is unschedulable, waiting for minCount pods from a gang to be "
                "scheduled, one or more plugins asked to wait and no plugin rejected pod")
CONDITION = "PodGroupScheduled"
# How long the messages of a placed group's members left out must stay the same (see
# GangRunner._settle): more than their retry's first backoff (1 s).
STEADY_S = 1.5
# Each sync point pins one pod to the batch's barrier node.
BARRIER_PODS = 1000

Condition = tuple[str, str, str]  # status, reason, message


@dataclass
class PodSeen:
    node: str | None
    message: str  # PodScheduled=False's message; "" when bound
    raw: dict[str, Any]


@dataclass
class CopyResult:
    """What one scheduler did with one copy of a case: each step's pods and group as
    read the moment that step settled (`pods`, `groups`), the nodes of the pods bound
    at the end (`final`: a bound pod stays where it is), and the copy's nodes."""

    pods: dict[str, PodSeen] = field(default_factory=dict)
    groups: dict[str, Condition | None] = field(default_factory=dict)
    final: dict[str, str | None] = field(default_factory=dict)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    # Steps that did not settle in time (then nothing after them ran).
    stuck: list[str] = field(default_factory=list)


@dataclass
class Finding:
    step: int
    text: str


@dataclass
class GangOutcome:
    case: GangCase  # kube-scheduler's copy
    twin: GangCase  # policyd's copy
    kube: CopyResult
    daemon: CopyResult
    problems: list[str] = field(default_factory=list)
    tie_dependent: list[str] = field(default_factory=list)
    # Groups whose PodGroupScheduled=True kube-scheduler overwrote with False
    # (`regressed`).
    regressed: list[str] = field(default_factory=list)
    # Per group kind: (scheduled, held) by kube-scheduler, for the tally.
    groups: list[tuple[str, Condition | None]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def describe(self) -> str:
        lines = [f"case {self.case.index} (prefix {self.case.prefix} / {self.twin.prefix}, "
                 f"{', '.join(self.case.notes)}):"]
        lines += [f"  - {p}" for p in self.problems]
        lines += [f"  - (tie-dependent) {p}" for p in self.tie_dependent]
        lines += [f"  - (kube-scheduler's condition regressed) {g}" for g in self.regressed]
        for who, seen in (("kube-scheduler", self.kube), ("policyd run", self.daemon)):
            lines.append(f"  {who}: " + "; ".join(
                f"{g}={c}" for g, c in seen.groups.items()))
            lines += [f"    {name}: {p.node or p.message}" for name, p in seen.pods.items()]
        return "\n".join(lines)


@dataclass
class GangTally:
    cases: int = 0
    # (kind, outcome) -> groups; outcome: scheduled, held (a gang short of its quorum),
    # none fit (a basic group none of whose pods fits), or undecided.
    groups: dict[tuple[str, str], int] = field(default_factory=dict)
    bound: int = 0
    messages: int = 0  # unbound pods whose messages were compared
    waiting: int = 0  # of them, members held for a quorum (GANG_WAITING)
    tie_dependent: int = 0
    regressed: int = 0

    def add(self, o: GangOutcome) -> None:
        self.cases += 1
        self.regressed += len(o.regressed)
        for kind, cond in o.groups:
            key = (kind, _outcome_name(kind, cond))
            self.groups[key] = self.groups.get(key, 0) + 1
        for p in o.kube.pods.values():
            self.bound += p.node is not None
            self.messages += p.node is None
            self.waiting += p.message == GANG_WAITING
        self.tie_dependent += bool(o.tie_dependent)

    def count(self, outcome: str) -> int:
        return sum(n for (_, o), n in self.groups.items() if o == outcome)

    def summary(self) -> str:
        kinds = "; ".join(
            f"{kind}: " + ", ".join(f"{n} {o}" for (k, o), n in sorted(self.groups.items())
                                    if k == kind)
            for kind in GROUP_KINDS if any(k == kind for k, _ in self.groups))
        return (f"groups by kube-scheduler's outcome ({kinds}); {self.bound} pods bound, "
                f"{self.messages} messages compared ({self.waiting} held for a quorum); "
                f"{self.tie_dependent} cases with a tie-dependent difference; "
                f"{self.regressed} PodGroupScheduled=True overwritten with False by "
                "kube-scheduler")


SCHEDULED, HELD, NONE_FIT, UNDECIDED = "scheduled", "held", "none fit", "undecided"


def _outcome_name(kind: str, cond: Condition | None) -> str:
    if cond is None:
        return UNDECIDED
    if cond[0] == "True":
        return SCHEDULED
    if cond[1] != "Unschedulable":
        return cond[1]
    return NONE_FIT if kind == BASIC else HELD


class GangRunner:
    """Runs batches of (kube-scheduler's copy, policyd's copy) pairs on `runner`'s API
    server, whose barrier syncs `runner`'s two schedulers."""

    def __init__(self, runner: Runner, *, timeout: float = 30.0) -> None:
        self.r = runner
        self.timeout = timeout
        self.seed = runner.seed

    def run_batch(self, pairs: Sequence[tuple[GangCase, GangCase]]) -> list[GangOutcome]:
        r = self.r
        copies = [c for pair in pairs for c in pair]
        try:
            r.put_scenes(copies)
            barrier = r.barrier(pairs[0][0].prefix, capacity=BARRIER_PODS)
            with ThreadPoolExecutor(max_workers=len(copies)) as pool:
                results = list(pool.map(lambda c: self._run_copy(c, barrier), copies))
            outcomes = []
            for i, (case, twin) in enumerate(pairs):
                o = GangOutcome(case, twin, results[2 * i], results[2 * i + 1])
                judge(o, self.seed)
                outcomes.append(o)
            return outcomes
        finally:
            self.cleanup(copies)

    def cleanup(self, copies: Sequence[GangCase]) -> None:
        """Pods first (a held gang's retries stop), then the PodGroups (their
        protection finalizer goes once no pod names them), then `Runner.cleanup`'s
        nodes and barrier pods."""
        namespaces = [c.namespace for c in copies]
        self.r.cleanup(copies, namespaces)
        self.r.each(lambda ns: self.r.client.request(
            "DELETE", f"/apis/{WORKLOAD_API}/namespaces/{ns}/podgroups"), namespaces)

    # -- one copy -------------------------------------------------------------------

    def _run_copy(self, case: GangCase, barrier: str) -> CopyResult:
        seen = CopyResult()
        pods_path = f"/api/v1/namespaces/{case.namespace}/pods"
        for s, step in enumerate(case.steps):
            for pod in step.pods:  # one by one: creation order is queue order
                self.r.post(pods_path, pod)
            if step.group is not None:
                self._sync(case, barrier, s)
                self.r.post(f"/apis/{WORKLOAD_API}/namespaces/{case.namespace}/podgroups",
                            step.group)
            late = self._settle(case, step, seen)
            if late:
                seen.stuck.append(f"step {s} did not settle within {self.timeout:.0f}s: "
                                  + ", ".join(late))
                break
        self._read(case, seen)
        return seen

    def _sync(self, case: GangCase, barrier: str, step: int) -> None:
        """Return once `case`'s scheduler has seen every pod created so far."""
        name = f"{case.prefix}-s{step}"
        self.r.create_pods([{
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": BARRIER_NAMESPACE},
            "spec": {"schedulerName": case.scheduler, "nodeSelector": {HOSTNAME: barrier},
                     "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "registry/app:1"}]}}])
        path = f"/api/v1/namespaces/{BARRIER_NAMESPACE}/pods/{name}"
        deadline = time.monotonic() + self.timeout
        while not self.r.client.request("GET", path)["spec"].get("nodeName"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{case.scheduler} did not bind the sync pod {name}")
            time.sleep(0.02)

    def _settle(self, case: GangCase, step: Step, seen: CopyResult) -> list[str]:
        """Wait until every pod of `step` is bound or told why not and its group has
        its condition, and record them in `seen` as they are then; returns what had
        not settled, if the timeout passed first.

        Recorded now, not at the end: a held gang's members are told again at every
        retry, which kube-scheduler makes in a loop and policyd only on an event
        that may help, so after later steps took room their messages would be those
        of different attempts.

        Members left out of a group that was placed are tried once more after it (both
        schedulers: see docs/gangs.md), and that retry, which meets the siblings
        placed, is what they are told last: such a step settles once their messages
        have stayed the same for STEADY_S (longer than a first backoff)."""
        deadline = time.monotonic() + self.timeout
        names = {p["metadata"]["name"] for p in step.pods}
        delay = 0.05
        told: dict[str, str] = {}
        since = time.monotonic()
        while True:
            listed = [p for p in self.r.client.request(
                "GET", f"/api/v1/namespaces/{case.namespace}/pods")["items"]
                if p["metadata"]["name"] in names]
            cond = (self._condition(case, step.group_name) if step.group is not None
                    else None)
            late = sorted(p["metadata"]["name"] for p in listed if not _decided(p))
            if step.group is not None and cond is None:
                late.append(f"PodGroup {step.group_name} has no {CONDITION}")
            now_told = {p["metadata"]["name"]: _pod_seen(p).message for p in listed
                        if not p["spec"].get("nodeName")}
            if now_told != told:
                told, since = now_told, time.monotonic()
            if (not late and cond is not None and cond[0] == "True" and told
                    and time.monotonic() - since < STEADY_S):
                late.append(f"the members left out of {step.group_name} are told again")
            if not late or time.monotonic() > deadline:
                for p in listed:
                    seen.pods[p["metadata"]["name"]] = _pod_seen(p)
                if step.group_name is not None:
                    seen.groups[step.group_name] = cond
                return late
            time.sleep(delay)
            delay = min(delay * 1.5, 0.3)

    def _condition(self, case: GangCase, group: str | None) -> Condition | None:
        obj = self.r.client.request(
            "GET", f"/apis/{WORKLOAD_API}/namespaces/{case.namespace}/podgroups/{group}")
        return _group_condition(obj)

    def _read(self, case: GangCase, seen: CopyResult) -> None:
        """The end: where each pod is bound, and the copy's nodes."""
        c = self.r.client
        for p in c.request("GET", f"/api/v1/namespaces/{case.namespace}/pods")["items"]:
            seen.final[p["metadata"]["name"]] = p["spec"].get("nodeName") or None
        seen.nodes = c.request("GET", "/api/v1/nodes", query={
            "labelSelector": f"{CASE_LABEL}={case.prefix}"})["items"]


def _pod_seen(p: dict[str, Any]) -> PodSeen:
    cond = _pod_scheduled(p)
    node = p["spec"].get("nodeName") or None
    return PodSeen(node, "" if node or cond is None else cond.get("message", ""), p)


def _pod_scheduled(pod: dict[str, Any]) -> dict[str, Any] | None:
    for cond in pod.get("status", {}).get("conditions", []):
        if cond.get("type") == "PodScheduled":
            return dict(cond)
    return None


def _decided(pod: dict[str, Any]) -> bool:
    if pod["spec"].get("nodeName"):
        return True
    cond = _pod_scheduled(pod)
    return (cond is not None and cond.get("status") == "False"
            and cond.get("reason") == "Unschedulable" and bool(cond.get("message")))


def _group_condition(obj: dict[str, Any]) -> Condition | None:
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == CONDITION:
            return cond.get("status", ""), cond.get("reason", ""), cond.get("message", "")
    return None


# -- judging -------------------------------------------------------------------------

def judge(o: GangOutcome, seed: int) -> None:
    """Fill `o.problems` and `o.tie_dependent` (see the module's docstring)."""
    for who, seen in (("kube-scheduler", o.kube), ("policyd run", o.daemon)):
        o.problems += [f"{who}: {s}" for s in seen.stuck]
    o.groups = [(s.kind, o.kube.groups.get(s.group_name)) for s in o.case.steps
                if s.group_name is not None]
    found: list[Finding] = []
    for s, step in enumerate(o.case.steps):
        if step.group_name is not None:
            k, d = o.kube.groups.get(step.group_name), o.daemon.groups.get(step.group_name)
            if k != d and regressed(k, d, [o.kube.pods.get(p["metadata"]["name"])
                                           for p in step.pods]):
                o.regressed.append(f"{step.group_name}: {k}, policyd run {d}")
            elif k != d:
                found.append(Finding(s, f"PodGroup {step.group_name}: {CONDITION} "
                                        f"kube-scheduler {k}, policyd run {d}"))
        for raw in step.pods:
            name = raw["metadata"]["name"]
            k_pod, d_pod = o.kube.pods.get(name), o.daemon.pods.get(name)
            if k_pod is None or d_pod is None:
                continue  # a stuck copy, reported above
            if (k_pod.node is None) != (d_pod.node is None):
                found.append(Finding(s, f"{name}: kube-scheduler "
                                        f"{k_pod.node or repr(k_pod.message)}, policyd run "
                                        f"{d_pod.node or repr(d_pod.message)}"))
            elif (o.kube.final.get(name) is None) != (o.daemon.final.get(name) is None):
                found.append(Finding(s, f"{name} at the end: kube-scheduler "
                                        f"{o.kube.final.get(name)}, policyd run "
                                        f"{o.daemon.final.get(name)}"))
            elif k_pod.node is None and k_pod.message != d_pod.message:
                found.append(Finding(s, f"{name}: FailedScheduling differs:\n      "
                                        f"kube-scheduler: {k_pod.message}\n      "
                                        f"policyd run:    {d_pod.message}"))
    ties: list[int] = []
    for who, case, seen in (("kube-scheduler", o.case, o.kube),
                            ("policyd run", o.twin, o.daemon)):
        own, tied = replay(case, seen, seed)
        found += [Finding(f.step, f"{who}: {f.text}") for f in own]
        ties += tied
    first_tie = min(ties, default=len(o.case.steps))
    for f in found:
        (o.tie_dependent if f.step >= first_tie else o.problems).append(
            f"step {f.step}: {f.text}")


def regressed(kube: Condition | None, daemon: Condition | None,
              members: Sequence[PodSeen | None]) -> bool:
    """kube-scheduler's known race, not a difference: a scheduled group (some member
    bound, policyd says Scheduled) that kube-scheduler says is Unschedulable.

    Its unplaced members are retried at once (an event while in flight sends them to
    the backoff queue, which is popped while the active queue is empty), each failed
    retry of the group writes PodGroupScheduled=False, and updatePodGroupCondition's
    guard against turning True back to False reads the PodGroup from its informer,
    which may not have the True yet: the merge patch from that stale status replaces
    the conditions. Seen in about one case in ten."""
    return (kube is not None and daemon is not None and kube[:2] == ("False", "Unschedulable")
            and daemon[:2] == ("True", "Scheduled")
            and any(m is not None and m.node is not None for m in members))


def replay(case: GangCase, seen: CopyResult, seed: int) -> tuple[list[Finding], list[int]]:
    """One copy's placements replayed in order through policyd's engine (reference
    path) on the copy's own nodes: what disagrees with the engine, and the steps where
    the highest total was shared by nodes in different states."""
    fw = default_framework(seed=seed)
    cluster = ClusterState([node_from_dict({"apiVersion": "v1", "kind": "Node", **n})
                            for n in seen.nodes], [])
    found: list[Finding] = []
    ties: list[int] = []
    for s, step in enumerate(case.steps):
        cond = seen.groups.get(step.group_name) if step.group_name is not None else None
        trial: list[Pod] = []
        for raw in step.pods:
            name = raw["metadata"]["name"]
            p = seen.pods.get(name)
            if p is None:
                return found, ties  # not created: the copy got stuck before
            pod = pod_from_dict(unbound(p.raw))
            result = schedule_one(fw, pod, cluster, reference=True)
            best = _best(result.scores.nodes, result.scores.totals) \
                if result.scores is not None else [
                    ni for ni in cluster.node_infos() if ni.name in result.feasible]
            if len({_state(ni) for ni in best}) > 1:
                ties.append(s)
            names = [ni.name for ni in best]
            if p.node is not None:
                if p.node not in result.feasible:
                    found.append(Finding(s, f"{name} bound to {p.node}, which the engine "
                                            f"finds infeasible: {result.message}"))
                elif p.node not in names:
                    found.append(Finding(s, f"{name} bound to {p.node}; the engine's "
                                            f"highest totals are on {names}"))
                cluster.assume(pod, p.node)
            elif cond is not None and cond[0] == "False" and p.message == GANG_WAITING:
                # Fitted in the trial of a held gang: the later members met it there.
                if result.node is None:
                    found.append(Finding(s, f"{name} fitted in the gang's trial; the "
                                            f"engine finds no node: {result.message}"))
                else:
                    cluster.assume(pod, result.node)
                    trial.append(pod)
            elif result.node is not None:
                found.append(Finding(s, f"{name} was told it fits nowhere; the engine "
                                        f"finds {sorted(result.feasible)}"))
        for pod in trial:
            cluster.forget(pod)
    return found, ties


def _best(nodes: Sequence[NodeInfo], totals: Sequence[int]) -> list[NodeInfo]:
    top = max(totals)
    return [n for n, t in zip(nodes, totals, strict=True) if t == top]


def _state(ni: NodeInfo) -> tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]:
    """What makes two nodes different for the pods after: allocatable and requested."""
    return tuple(sorted(ni.node.allocatable.items())), tuple(sorted(ni.requested.items()))
