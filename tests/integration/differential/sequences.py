"""Sequence cases: pods queued together, tried one after another by kube-scheduler and
by policyd, compared pod by pod.

A single-pod case shows nothing of the queue: in what order pods are tried
(PrioritySort), and what a placement leaves to the next decision (assume). So a batch of
`SequenceCase`s is put on the API server with its queued pods for a schedulerName no
scheduler serves yet, and only then a second kube-scheduler is started for that name:
it lists every pod before its first cycle (it waits for its informers' handlers), so
they are all in its queue at once. Its log (`queue_log`) tells the order it tried them
and what each first try decided, scores included.

policyd gets the same cluster, read back before that kube-scheduler started. Per case,
its queue order (`simulate.queue_order`, the daemon's PrioritySort) must be
kube-scheduler's order of first tries up to the order among pods of equal priority
(below). Then policyd decides each pod in kube-scheduler's order, compared as a
single-pod case is (`runner.compare`: verdict, message, kube-scheduler's node
feasible, the number of feasible nodes, every plugin's score, both paths), and assumes
it on kube-scheduler's node: the next pod of both schedulers sees the same cluster,
also when a tie let them choose different nodes.

Then (`SequenceRunner.start_daemon`) the same pods are queued again for a `policyd run`
daemon started once they exist: its order of first tries must be the same up to ties,
and each of its first tries the engine's decision on the cluster its earlier tries
left. That compares the daemon's own queue, assume and cache, on the same contended
queues.

Only first tries are compared. A pod that failed can be retried once another pod is
bound (a spread or affinity constraint may then hold), and policyd's offline pass has
no second try to compare it with; its first try saw exactly the placements before it
in the queue. Retries never come before every pod's first try: the pods are all in
activeQ when scheduling starts, and a pod that failed waits in backoff (30 s here)
until activeQ is empty. The runner checks that this held.

Equal priorities are not compared: policyd orders them by creation time,
kube-scheduler by the time they entered its queue (an intended difference, see the
docs/compatibility.md), and for pods listed at start-up that is the order its informer delivered
them in, which v1.36.3 keeps to neither names nor creation: two runs of one case tried
its five pods of priority 0, created (and named) s01 s03 s05 s06 s07, as
s07 s01 s03 s05 s06 and as s06 s07 s01 s03 s05.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policyd.config.plugins import default_framework
from policyd.daemon.run import Daemon
from policyd.daemon.scheduling_state import LOGGER
from policyd.devcluster import ControlPlane
from policyd.engine.cycle import ScheduleResult, schedule_one
from policyd.engine.simulate import queue_order
from policyd.framework.runtime import Framework
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod, pod_from_dict
from tests.gen.differential import (
    PRIORITY_CLASSES,
    SEQUENCE,
    SEQUENCE_SCHEDULER_NAME,
    UNDER_TEST_LABEL,
    SequenceCase,
)
from tests.integration.differential.queue_log import Attempt, read_attempts
from tests.integration.differential.runner import (
    SCORED,
    ColumnarScores,
    KubeDecision,
    Runner,
    Tally,
    compare,
    compare_scores,
    kube_scheduler_config,
    pod_key,
    start_kube_scheduler,
    unbound,
)

# Longer than a batch's first pass takes, so no pod is retried before every pod was
# tried once while activeQ still holds pods (see the module docstring).
BACKOFF_SECONDS = 30
# How long kube-scheduler gets to try every pod of a batch once, after it is ready.
FIRST_PASS_TIMEOUT = 30.0

# The schedulerName of the `policyd run` daemon started for each batch's third pass.
DAEMON_SCHEDULER_NAME = "policyd-differential-queue-run"

# Sequence counts (Tally.sequences).
SEQUENCES = "sequences"
QUEUED = "queued pods"
ORDERS = "orders compared"
PRIORITY_FIRST = "sequences where priority reorders the queue"
ORDER_SENSITIVE = "sequences whose order decides who fits"
DAEMON_ORDERS = "orders compared in policyd run"


def sequence_scheduler_config() -> dict[str, Any]:
    """The comparison's profile (`kube_scheduler_config`) for the sequence pods'
    schedulerName, with a backoff no retry outruns."""
    config = kube_scheduler_config(SEQUENCE_SCHEDULER_NAME)
    config["podInitialBackoffSeconds"] = config["podMaxBackoffSeconds"] = BACKOFF_SECONDS
    return config


@dataclass
class SequenceStep:
    """One queued pod: kube-scheduler's first try against policyd's (`runner.Judged`)."""

    pod: str  # namespace/name
    kube: KubeDecision
    policyd: ScheduleResult | None = None
    problems: list[str] = field(default_factory=list)
    mix: str = ""
    compared: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class SequenceOutcome:
    case: SequenceCase
    kube_order: list[str] = field(default_factory=list)  # first tries, in their order
    policyd_order: list[str] = field(default_factory=list)
    steps: list[SequenceStep] = field(default_factory=list)  # in policyd's order
    problems: list[str] = field(default_factory=list)
    daemon_order: list[str] = field(default_factory=list)  # policyd run's first tries
    priority_first: bool = False  # policyd's queue order is not the order of names
    order_sensitive: bool = False  # in the order of names, other pods would fit

    @property
    def ok(self) -> bool:
        return not self.problems and all(s.ok for s in self.steps)

    def describe(self) -> str:
        c = self.case
        lines = [f"sequence case {c.index} (prefix {c.prefix}, {', '.join(c.notes)}):"]
        lines += [f"  - {problem}" for problem in self.problems]
        for s in self.steps:
            p = s.policyd
            mark = "  " if s.ok else "* "
            queued = (f" (priority {p.pod.priority}, created {p.pod.creation_timestamp:.0f})"
                      if p else "")
            lines.append(f"  {mark}{s.pod}{queued}: kube-scheduler node={s.kube.node} "
                         f"{s.kube.message}; policyd node={p.node if p else None} "
                         f"{p.message if p else ''}")
            lines += [f"      - {problem}" for problem in s.problems]
        return "\n".join(lines)

    def count(self, tally: Tally) -> None:
        seq = tally.sequences
        for name in (SEQUENCES, QUEUED, ORDERS, PRIORITY_FIRST, ORDER_SENSITIVE,
                     DAEMON_ORDERS):
            seq.setdefault(name, 0)
        seq[SEQUENCES] += 1
        seq[QUEUED] += len(self.case.queue)
        seq[ORDERS] += len(self.kube_order) == len(self.case.queue)
        seq[PRIORITY_FIRST] += self.priority_first
        seq[ORDER_SENSITIVE] += self.order_sensitive
        seq[DAEMON_ORDERS] += len(self.daemon_order) == len(self.case.queue)
        for step in self.steps:
            tally.add_decision(step)


class SequenceRunner:
    """Runs batches of sequence cases, each batch through a kube-scheduler of its own
    started after the batch's pods exist, on the API server of `runner`."""

    def __init__(self, runner: Runner, control_plane: ControlPlane, workdir: Path,
                 *, seed: int, start_daemon: Callable[[str], Daemon] | None = None) -> None:
        self.runner = runner
        # Starts a `policyd run` daemon (verbosity 2, a backoff as long as
        # BACKOFF_SECONDS) for a schedulerName, synced; None: no daemon pass.
        self.start_daemon = start_daemon
        self.control_plane = control_plane
        self.seed = seed
        self.config_path = workdir / "kube-scheduler-queue.json"
        for name, value in PRIORITY_CLASSES.items():
            runner.ensure("/apis/scheduling.k8s.io/v1/priorityclasses", {
                "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": name}, "value": value, "preemptionPolicy": "Never"})

    def run_batch(self, cases: Sequence[SequenceCase]) -> list[SequenceOutcome]:
        r = self.runner
        namespaces = [ns for c in cases for ns in c.namespaces]
        try:
            r.put_scenes(cases)
            r.create_pods([p for c in cases for p in c.queue])
            # Read before kube-scheduler starts: exactly what it lists. Twice: the
            # second is scheduled in the order of names, to see whether order matters.
            cluster, queued = r.read_back(SEQUENCE)
            by_name, _ = r.read_back(SEQUENCE)
            attempts = self._kube_first_pass({pod_key(p) for c in cases for p in c.queue})
            outcomes = self._compare(cases, cluster, queued, attempts)
            self._order_sensitivity(outcomes, by_name)
            if self.start_daemon is not None:
                self._daemon_pass(cases, outcomes)
            return outcomes
        finally:
            r.cleanup(cases, namespaces)

    def _kube_first_pass(self, keys: set[str]) -> list[Attempt]:
        """Every try a new kube-scheduler made until each pod of `keys` had a decided
        first try (or FIRST_PASS_TIMEOUT passed), in order."""
        scheduler = start_kube_scheduler(self.control_plane, sequence_scheduler_config(),
                                         self.config_path)
        try:
            deadline = time.monotonic() + FIRST_PASS_TIMEOUT
            while True:
                attempts = read_attempts(scheduler.log_path.read_text(errors="replace"))
                decided = {a.pod for a in attempts if a.number == 1 and a.decided}
                if keys <= decided or time.monotonic() > deadline:
                    return attempts
                time.sleep(0.1)
        finally:
            scheduler.stop()

    def _compare(self, cases: Sequence[SequenceCase], cluster: ClusterState,
                 queued: dict[tuple[str, str], dict[str, Any]], attempts: list[Attempt]
                 ) -> list[SequenceOutcome]:
        outcomes = {c.prefix: SequenceOutcome(c) for c in cases}
        case_of = {pod_key(p): outcomes[c.prefix] for c in cases for p in c.queue}
        first = {a.pod: a for a in attempts if a.number == 1}
        retried = next((i for i, a in enumerate(attempts) if a.number > 1), len(attempts))
        for i, a in enumerate(attempts):
            if a.number > 1 or a.pod not in case_of:
                continue
            case_of[a.pod].kube_order.append(a.pod)
            if i > retried:
                case_of[a.pod].problems.append(
                    f"kube-scheduler retried {attempts[retried].pod} before its first try "
                    f"of {a.pod}: its first pass was not one")
        pods = {f"{k[0]}/{k[1]}": pod_from_dict(unbound(p)) for k, p in queued.items()}
        fw = default_framework(seed=self.seed)
        columnar = ColumnarScores(fw)
        for o in outcomes.values():
            keys = [pod_key(p) for p in o.case.queue]
            missing = [k for k in keys if k not in pods]
            if missing:
                o.problems.append(f"queued pods missing when read back: {missing}")
                continue
            mine = queue_order(fw, [pods[k] for k in keys])
            o.policyd_order = [f"{p.namespace}/{p.name}" for p in mine]
            o.priority_first = o.policyd_order != keys
            if not _same_up_to_ties(o.kube_order, o.policyd_order, pods):
                o.problems.append(f"queue order differs: kube-scheduler tried "
                                  f"{_names(o.kube_order)}, policyd {_names(o.policyd_order)}")
            # kube-scheduler's order, which ties may have made differ from policyd's:
            # both must decide every pod on the same cluster.
            for key in o.kube_order + [k for k in o.policyd_order if k not in first]:
                step = self._step(fw, columnar, pods[key], cluster, first.get(key))
                o.steps.append(step)
                if step.kube.node is not None:
                    # kube-scheduler's choice, not policyd's: after a tie both must go on
                    # from the same cluster.
                    cluster.assume(pods[key], step.kube.node)
        return list(outcomes.values())

    def _step(self, fw: Framework, columnar: ColumnarScores, pod: Pod, cluster: ClusterState,
              attempt: Attempt | None) -> SequenceStep:
        """One pod's turn: policyd decides on the cluster as the earlier turns left it."""
        key = f"{pod.namespace}/{pod.name}"
        kube = KubeDecision()
        if attempt is not None:
            kube.node = attempt.node
            if attempt.message is not None:
                kube.reason, kube.message = "Unschedulable", attempt.message
        step = SequenceStep(key, kube, schedule_one(fw, pod, cluster))
        compare(step)
        result = step.policyd
        assert result is not None
        if not step.ok or kube.node is None or attempt is None:
            return step
        if attempt.feasible != len(result.feasible):
            step.problems.append(f"kube-scheduler found {attempt.feasible} feasible nodes, "
                                 f"policyd {len(result.feasible)}: {result.feasible}")
        if step.mix == SCORED:
            compare_scores(step, fw, pod, cluster, columnar,
                           attempt.scores if attempt.scores.totals else None)
        return step

    def _order_sensitivity(self, outcomes: Sequence[SequenceOutcome],
                           cluster: ClusterState) -> None:
        """Mark the sequences where policyd, trying the same pods in the order of names
        (priorities ignored), would have placed a different set of them: there the
        queue order decided who fits, so comparing it proved something."""
        fw = default_framework(seed=self.seed)
        for o in outcomes:
            placed = {s.pod for s in o.steps if s.policyd is not None and s.policyd.node}
            by_name = set()
            for step in sorted(o.steps, key=lambda s: s.pod):
                if step.policyd is None:
                    continue
                result = schedule_one(fw, step.policyd.pod, cluster)
                if result.node is not None:
                    cluster.assume(step.policyd.pod, result.node)
                    by_name.add(step.pod)
            o.order_sensitive = placed != by_name


    def _daemon_pass(self, cases: Sequence[SequenceCase],
                     outcomes: Sequence[SequenceOutcome]) -> None:
        """The same pods again, queued together for a `policyd run` daemon started once
        they exist: its order of first tries (from its -v 2 log lines) must be policyd's
        queue order up to ties, and each first try the engine's decision on the cluster
        the daemon's earlier tries left (the engine was compared with kube-scheduler
        above; this compares the daemon's queue, assume and cache against it)."""
        r = self.runner
        queue = [p for c in cases for p in c.queue]
        r.each(r.delete_pod, queue)
        copies = [{**p, "spec": {**p["spec"], "schedulerName": DAEMON_SCHEDULER_NAME}}
                  for p in queue]
        deadline = time.monotonic() + r.timeout
        while r.client.request("GET", "/api/v1/pods", query={
                "labelSelector": f"{UNDER_TEST_LABEL}={SEQUENCE}"})["items"]:
            if time.monotonic() > deadline:
                raise TimeoutError("the sequence pods were not deleted in time")
            time.sleep(0.05)
        r.create_pods(copies)
        cluster, queued = r.read_back(SEQUENCE)
        pods = {f"{k[0]}/{k[1]}": pod_from_dict(unbound(p)) for k, p in queued.items()}
        decisions = self._daemon_first_tries(set(pods))
        fw = default_framework(seed=self.seed)
        for o in outcomes:
            keys = [pod_key(p) for p in o.case.queue]
            if any(k not in pods for k in keys):
                continue  # reported by _compare
            o.daemon_order = [k for k in decisions if k in keys]
            mine = [p.key for p in queue_order(fw, [pods[k] for k in keys])]
            if not _same_up_to_ties(o.daemon_order, mine, pods):
                o.problems.append(f"policyd run's queue order differs: it tried "
                                  f"{_names(o.daemon_order)}, policyd {_names(mine)}")
            for key in o.daemon_order + [k for k in mine if k not in decisions]:
                result = schedule_one(fw, pods[key], cluster)
                node, message = decisions.get(key, (None, None))
                problem = _daemon_problem(node, message, result)
                if problem:
                    o.problems.append(f"{key}: policyd run {problem}")
                if node is not None:
                    cluster.assume(pods[key], node)

    def _daemon_first_tries(self, keys: set[str]) -> dict[str, tuple[str | None, str]]:
        """pod -> (node, "") or (None, message) of each pod's first try by a new
        `policyd run`, in the order of the tries."""
        assert self.start_daemon is not None
        tries = _DecisionLog()
        logger = logging.getLogger(LOGGER)
        level = logger.level
        logger.setLevel(logging.INFO)
        logger.addHandler(tries)
        try:
            daemon = self.start_daemon(DAEMON_SCHEDULER_NAME)
            try:
                deadline = time.monotonic() + FIRST_PASS_TIMEOUT
                while not keys <= tries.first.keys() and time.monotonic() < deadline:
                    time.sleep(0.05)
            finally:
                daemon.shutdown()
        finally:
            logger.removeHandler(tries)
            logger.setLevel(level)
        return dict(tries.first)


class _DecisionLog(logging.Handler):
    """The first decision a daemon logged for each pod, in order: its scheduling loop
    logs each one at -v 2 with the pod and either the node or the reason."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.first: dict[str, tuple[str | None, str]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        pod = getattr(record, "pod", None)
        if isinstance(pod, str) and pod not in self.first:
            node = getattr(record, "node", None)
            self.first[pod] = (node, "") if node else (None, str(getattr(record, "reason", "")))


def _daemon_problem(node: str | None, message: str | None, engine: ScheduleResult
                    ) -> str | None:
    if message is None:
        return "tried it not at all in time"
    if (node is None) != (engine.node is None):
        return f"decided node={node} {message}; the engine node={engine.node} {engine.message}"
    if node is None and message != engine.message:
        return f"says {message}; the engine {engine.message}"
    if node is not None and node not in engine.feasible:
        return f"chose {node}, infeasible for the engine ({engine.feasible})"
    return None


def _names(keys: Sequence[str]) -> str:
    return " ".join(k.rsplit("/", 1)[1] for k in keys)


def _same_up_to_ties(kube: Sequence[str], mine: Sequence[str], pods: dict[str, Pod]
                     ) -> bool:
    """Whether two orders of the same pods differ at most among pods of equal priority
    (whose order is not comparable, see the module docstring)."""
    return sorted(kube) == sorted(mine) and (
        [pods[k].priority for k in kube] == [pods[k].priority for k in mine])
