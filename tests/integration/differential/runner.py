"""Put generated cases on the API server, let kube-scheduler and policyd each place the
pod under test, and report every difference.

A batch of cases lives on the API server at the same time (each case isolated as
`tests.gen.differential` describes), so one round of API calls and one barrier (see
`Runner.barrier`) serve many cases. kube-scheduler sees the whole batch, so policyd is
given the whole batch too: nodes and pods are read back from the API server after
kube-scheduler has decided, exactly as stored (defaults and admission changes
included), and decoded with the same functions the daemon uses.
"""

from __future__ import annotations

import copy
import json
import random
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from policyd.config.plugins import default_framework
from policyd.devcluster import ControlPlane, KubeScheduler
from policyd.engine.cycle import ScheduleResult, schedule_one
from policyd.framework.cycle_state import CycleState
from policyd.framework.runtime import Framework, ScoreResult
from policyd.framework.status import Status
from policyd.kube.client import ApiError, KubeClient
from policyd.model.cluster import ClusterState
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod, node_from_dict, pod_from_dict
from policyd.model.table import IntArray, NodeTable
from policyd.plugins.nodedeclaredfeatures.features import required_features
from tests.gen.clusters import HOSTNAME, RUNTIME_CLASS, RUNTIME_CLASS_OVERHEAD
from tests.gen.differential import (
    CASE_LABEL,
    HOLD_FINALIZER,
    SCHEDULER_NAME,
    UNDER_TEST_LABEL,
    Case,
    pinned_copy,
)
from tests.gen.volumes import VOLUME_KINDS
from tests.integration.differential.score_log import (
    SCORE_LOG_ARGS,
    KubeScores,
    read_score_lines,
)
from tests.integration.differential.volumes import (
    StorageLists,
    attach,
    cleanup_storage,
    ensure_driver,
    put_storage,
    read_storage,
    storage_barrier,
)

T = TypeVar("T")


class Scene(Protocol):
    """What a case puts on the API server before anything is scheduled (`Case`s and
    `SequenceCase`s both)."""

    # Read-only: a scene may compute them (`tests.gen.gangs.GangCase`).
    @property
    def prefix(self) -> str: ...
    @property
    def namespaces(self) -> dict[str, dict[str, str]]: ...
    @property
    def nodes(self) -> list[dict[str, Any]]: ...
    @property
    def pods(self) -> list[dict[str, Any]]: ...
    @property
    def workloads(self) -> list[dict[str, Any]]: ...

# Upstream's default plugins that policyd does not implement (or that need objects the
# cases never have): all disabled so the two profiles are the same. Names that are not
# enabled in v1.36 (alpha features) are ignored by kube-scheduler. The four volume
# plugins, DynamicResources, DefaultPreemption and NodeDeclaredFeatures (beta and on in
# v1.36, implemented since issue 27) stay enabled, as in policyd's default profile, so
# the FailedScheduling messages compared are the whole text, PostFilter's part included.
UPSTREAM_ONLY_PLUGINS = (
    "GangScheduling",
)
# A run of the default size fails with fewer cases whose pod needs a declared feature
# (a RestartAllContainers restart rule; about 80 of 400), or fewer FailedScheduling
# messages with NodeDeclaredFeatures' reason (8 to 21 in five seeds of 400 offline: the
# plugin is last, so most rejected nodes fail an earlier filter): it must be
# exercised, not only enabled.
NDF_REASON = "node(s) didn't match Pod's required features"
MIN_FEATURE_CASES = 40
MIN_FEATURE_REJECTIONS = 4
# VolumeBinding's PreBind waits this long for the PV controller to bind a pod's claims
# (upstream's default is 600 s): a binding that cannot complete fails the case within
# the runner's patience instead of hanging it.
BIND_TIMEOUT_SECONDS = 30


def kube_scheduler_config(scheduler_name: str = SCHEDULER_NAME) -> dict[str, Any]:
    """The KubeSchedulerConfiguration of the comparison: the default profile
    (DefaultPreemption included) minus the plugins policyd lacks, scoring every node
    (policyd always does), VolumeBinding waiting BIND_TIMEOUT_SECONDS for bindings."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"qps": 1000, "burst": 1000},
        # Unschedulable pods are deleted by the test; a short backoff only matters when
        # a case is retried.
        "podInitialBackoffSeconds": 1,
        "podMaxBackoffSeconds": 1,
        "profiles": [{
            "schedulerName": scheduler_name,
            "percentageOfNodesToScore": 100,
            "plugins": {"multiPoint": {"disabled": [
                {"name": n} for n in UPSTREAM_ONLY_PLUGINS]}},
            "pluginConfig": [{"name": "VolumeBinding", "args": {
                "bindTimeoutSeconds": BIND_TIMEOUT_SECONDS}}],
        }],
    }


def start_kube_scheduler(control_plane: ControlPlane, config: dict[str, Any], path: Path
                         ) -> KubeScheduler:
    """A kube-scheduler on `control_plane` running `config` (written to `path` as JSON),
    ready when it returns, logging the score and attempt lines that `score_log` and
    `queue_log` read (SCORE_LOG_ARGS). The caller stops it."""
    path.write_text(json.dumps(config, indent=2))
    return control_plane.start_kube_scheduler(path, extra_args=SCORE_LOG_ARGS)


_FIT_HEAD = re.compile(r"^0/(\d+) nodes are available:")
_FIT_ENTRY = re.compile(r"(\d+) (.+?)(?=, \d+ |\.$)")
# The filters' part ends at the first period followed by a space (PostFilter's part,
# e.g. `preemption: 0/N nodes are available: ...`, comes after it) or by the end.
_FILTERS_END = re.compile(r"\.(?: |$)")


def split_fit_error(message: str) -> tuple[str, str]:
    """A FailedScheduling message's filters' part (up to its period) and PostFilter's
    part after it ("" when there is none), as FitError.Error() joins them."""
    end = _FILTERS_END.search(message)
    if end is None:
        return message, ""
    return message[:end.start() + 1], message[end.end():]


def parse_fit_error(message: str) -> tuple[int, dict[str, int]] | None:
    """`0/N nodes are available: 2 A, 1 B.` -> (N, {A: 2, B: 1}), the filters' part
    only (PostFilter's part after it is left out); None if not that."""
    filters, _ = split_fit_error(message)
    head = _FIT_HEAD.match(filters)
    if head is None:
        return None
    rest = filters[head.end():].strip()
    return int(head.group(1)), {m.group(2): int(m.group(1)) for m in _FIT_ENTRY.finditer(rest)}


# The case mix (Outcome.mix): what kind of decision the pod under test got.
UNSCHEDULABLE = "unschedulable"
SINGLE_NODE = "single feasible node"
SCORED = "scored"  # bound, two or more feasible nodes
# How far the comparison went (Outcome.compared).
MESSAGE_COMPARED = "message-compared"  # unschedulable: FailedScheduling messages
VERDICT_ONLY = "verdict-only"  # bound: the nodes' verdicts, and the argmax when scored
SCORE_COMPARED = "score-compared"  # scored: every plugin's weighted score on every node

# The pseudo-plugin under which a node's total is compared along with the plugins'.
TOTAL = "(total)"


@dataclass
class KubeDecision:
    node: str | None = None
    message: str = ""  # the PodScheduled=False message
    reason: str = ""  # Unschedulable or SchedulerError; "" when bound or undecided
    pod: dict[str, Any] = field(default_factory=dict)  # as last read from the API server

    @property
    def decided(self) -> bool:
        return self.node is not None or bool(self.reason)


class Judged(Protocol):
    """One pod's two decisions, what `compare` records about them and how far it got
    (an `Outcome`, or one pod of a sequence)."""

    kube: KubeDecision
    policyd: ScheduleResult | None
    problems: list[str]
    mix: str
    compared: str


@dataclass
class Outcome:
    case: Case
    kube: KubeDecision
    policyd: ScheduleResult | None = None
    daemon: KubeDecision | None = None  # what `policyd run` decided, in daemon mode
    # (node, kube-scheduler's decision) for each pinned copy tried
    probes: list[tuple[str, KubeDecision]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    mix: str = ""  # UNSCHEDULABLE, SINGLE_NODE or SCORED once both have decided alike
    compared: str = ""  # MESSAGE_COMPARED, VERDICT_ONLY or SCORE_COMPARED

    @property
    def ok(self) -> bool:
        return not self.problems

    def describe(self) -> str:
        p = self.policyd
        lines = [f"case {self.case.index} (prefix {self.case.prefix}, "
                 f"{', '.join(self.case.notes)}):"]
        lines += [f"  - {problem}" for problem in self.problems]
        lines.append(f"  kube-scheduler: node={self.kube.node} {self.kube.reason} "
                     f"{self.kube.message}")
        if p is not None:
            lines.append(f"  policyd: node={p.node} feasible={p.feasible} {p.message}")
        if self.daemon is not None:
            lines.append(f"  policyd run: node={self.daemon.node} {self.daemon.reason} "
                         f"{self.daemon.message}")
        return "\n".join(lines)


# The share of scored cases whose scores must have been compared with kube-scheduler's
# log; a case whose lines kube-scheduler had not flushed within the runner's wait is
# still checked by argmax, hence not 1.
MIN_SCORE_COMPARED = 0.9
# How many cases a run of the default size (or larger) must have score-compared:
# docs/compatibility.md's claim rests on at least this many, not on a share of however
# few there were.
MIN_SCORE_COMPARED_CASES = 100


@dataclass
class Tally:
    """What a run covered: the case mix, how far each case was compared, the probes;
    for sequence cases (`sequences.SequenceOutcome.count`) the same per queued pod, and
    the sequences' own counts."""

    mix: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        (UNSCHEDULABLE, SINGLE_NODE, SCORED), 0))
    compared: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        (MESSAGE_COMPARED, VERDICT_ONLY, SCORE_COMPARED), 0))
    probes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("probes on rejected nodes", "probes on accepted nodes"), 0))
    daemon: int = 0
    sequences: dict[str, int] = field(default_factory=dict)
    # Preemption cases' own counts (`differential.preemption.PreemptionOutcome.count`).
    preemption: dict[str, int] = field(default_factory=dict)
    # Volume cases by what they exercise (`tests.gen.volumes.VOLUME_KINDS`; a case has
    # several), and how many volume cases there were.
    volume_kinds: dict[str, int] = field(default_factory=dict)
    volume_cases: int = 0
    cases: int = 0
    # Pods needing a declared feature, and those kube-scheduler's message rejected
    # nodes of for one (NodeDeclaredFeatures' reason).
    feature_cases: int = 0
    feature_rejections: int = 0
    # Bound pods caught in an in-place resize (`tests.gen.differential.RESIZING`), and
    # those resized at pod level (InPlacePodLevelResourcesVerticalScaling).
    resizing: int = 0
    resizing_pod_level: int = 0

    def add(self, o: Outcome) -> None:
        self.add_decision(o)
        self.cases += 1
        self.feature_cases += bool(required_features(pod_from_dict(o.case.pod)))
        self.feature_rejections += NDF_REASON in o.kube.message
        self.volume_cases += bool(o.case.storage)
        for existing in o.case.pods:
            status = existing.get("status", {})
            self.resizing += "conditions" in status
            self.resizing_pod_level += "resources" in status
        for kind in o.case.volume_kinds:
            self.volume_kinds[kind] = self.volume_kinds.get(kind, 0) + 1
        feasible = o.policyd.feasible if o.policyd is not None else []
        for node, _ in o.probes:
            self.probes["probes on accepted nodes" if node in feasible
                        else "probes on rejected nodes"] += 1
        self.daemon += o.daemon is not None

    def add_decision(self, o: Judged) -> None:
        if o.mix:
            self.mix[o.mix] += 1
            self.compared[o.compared] += 1

    def summary(self) -> str:
        parts = [", ".join(f"{n} {what}" for what, n in counts.items())
                 for counts in (self.sequences, self.preemption, self.mix, self.compared)
                 if counts]
        if self.feature_cases or self.feature_rejections:
            parts.append(f"{self.feature_cases} pods needing a declared feature, "
                         f"{self.feature_rejections} messages with {NDF_REASON!r}")
        if self.resizing:
            parts.append(f"{self.resizing} bound pods resizing in place "
                         f"({self.resizing_pod_level} at pod level)")
        if self.volume_cases:
            parts.append(f"{self.volume_cases} volume cases: " + ", ".join(
                f"{self.volume_kinds.get(what, 0)} {what}" for what in VOLUME_KINDS))
        # Volume cases are not probed, and the daemon places their twins instead of
        # copies (`Runner.run_batch`).
        if not self.sequences and self.cases > self.volume_cases and not self.preemption:
            parts.append(", ".join(f"{n} {what}" for what, n in self.probes.items())
                         + f", {self.daemon} decisions of policyd run")
        elif self.volume_cases:
            parts.append(f"{self.daemon} decisions of policyd run (on twins)")
        return "; ".join(parts)

    def too_few_feature_cases(self) -> str | None:
        """Why NodeDeclaredFeatures counts as not exercised by a run of the default
        size, or None."""
        if self.feature_cases < MIN_FEATURE_CASES \
                or self.feature_rejections < MIN_FEATURE_REJECTIONS:
            return (f"only {self.feature_cases} pods needed a declared feature (at least "
                    f"{MIN_FEATURE_CASES} must) and {self.feature_rejections} "
                    f"FailedScheduling messages had {NDF_REASON!r} (at least "
                    f"{MIN_FEATURE_REJECTIONS} must): does the generator still add "
                    "RestartAllContainers rules and declared features?")
        return None

    def too_few_score_compared(self, at_least: int = 0) -> str | None:
        """Why the score comparison counts as switched off, or None: fewer than
        MIN_SCORE_COMPARED of the scored decisions, or fewer than `at_least` in all."""
        done, scored = self.compared[SCORE_COMPARED], self.mix[SCORED]
        if done < MIN_SCORE_COMPARED * scored:
            return (f"only {done} of {scored} scored cases had their scores compared with "
                    f"kube-scheduler's log (at least {MIN_SCORE_COMPARED:.0%} must): are its "
                    "score lines still what tests/integration/differential/score_log.py "
                    "reads?")
        if done < at_least:
            return (f"only {done} cases had their scores compared with kube-scheduler's "
                    f"log (at least {at_least} must): fewer scored cases than the "
                    "generator is tuned for (tests/gen/differential.py, CASE_MIXES)")
        return None


class Runner:
    """Runs batches of cases against one API server with one kube-scheduler running."""

    def __init__(self, client: KubeClient, *, timeout: float = 20.0,
                 workers: int = 16, seed: int = 0, probes: int = 2,
                 score_log: Path | None = None, daemon_scheduler: str | None = None
                 ) -> None:
        self.client = client
        self.timeout = timeout
        self.pool = ThreadPoolExecutor(max_workers=workers)
        self.seed = seed
        self.probes = probes
        # The schedulerName of a running `policyd run` daemon to compare as well.
        self.daemon_scheduler = daemon_scheduler
        # kube-scheduler's log with per-plugin scores (see `score_log`), if any.
        self.score_log = score_log
        self._log_offset = score_log.stat().st_size if score_log is not None else 0
        self._scores: dict[str, KubeScores] = {}
        self.ensure_runtime_class()
        self._barriers: list[str] = []
        self.ensure("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": BARRIER_NAMESPACE}})

    def close(self) -> None:
        self.pool.shutdown(wait=True)

    # -- steps shared with sequences.py and intended.py ----------------------------------
    # Public so that a sequence batch and a hand-built scene are put on the API server,
    # synchronised with kube-scheduler, read back and cleaned up exactly as a batch of
    # single-pod cases is.

    def each(self, fn: Callable[[T], Any], items: Iterable[T]) -> None:
        """fn(item) for every item, concurrently on the runner's thread pool, in no
        particular order; returns when all are done, raising the first error."""
        list(self.pool.map(fn, list(items)))

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST `body` to `path` and return the object as stored; API errors (409 for
        an object that exists included) are raised as `ApiError`."""
        return self.client.request("POST", path, body=body)

    def ensure(self, path: str, body: dict[str, Any]) -> None:
        """POST `body` to `path` unless the object already exists (409): the runner's
        shared objects, and every object of a replay on the same API server, may."""
        try:
            self.post(path, body)
        except ApiError as err:
            if err.status != 409:
                raise

    def create_pods(self, pods: Sequence[dict[str, Any]]) -> None:
        """Create `pods` (raw Pod objects, namespace in their metadata) concurrently;
        a pod that exists already is an error."""
        self.each(lambda p: self.post(
            f"/api/v1/namespaces/{p['metadata']['namespace']}/pods", p), pods)

    def create_namespace(self, item: tuple[str, dict[str, str]]) -> None:
        """Create the namespace `item` = (name, labels) unless it exists (namespaces
        are never deleted: no namespace controller runs)."""
        self.ensure("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": item[0], "labels": item[1]}})

    def _create_workload(self, obj: dict[str, Any]) -> None:
        group = "/api/v1" if obj["apiVersion"] == "v1" else f"/apis/{obj['apiVersion']}"
        plural = {"Service": "services", "ReplicaSet": "replicasets"}[obj["kind"]]
        self.ensure(f"{group}/namespaces/{obj['metadata']['namespace']}/{plural}", obj)

    def barrier(self, prefix: str, *, capacity: int = 10) -> str:
        """Return once kube-scheduler (and the `policyd run` daemon, if compared) has
        seen everything created so far; TimeoutError after `timeout` seconds. `prefix`
        names the barrier node, which `cleanup` deletes.

        Its node and pod informers are separate watches, each delivered in order. So a
        node created after all the others, and a pod created after all the others that
        only fits that node: once kube-scheduler has bound that pod, both watches have
        delivered everything before them. The barrier node is part of the batch (both
        schedulers count it in "0/N nodes"); its pod lives in a namespace no case
        selects. Returns the node's name; `capacity` is its pod capacity (the gang cases
        pin a pod there at every sync point, `differential.gangs`)."""
        name = f"{prefix}-barrier"
        self.post("/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {HOSTNAME: name, CASE_LABEL: name}},
            "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": str(capacity)},
                       "capacity": {"cpu": "1", "memory": "1Gi", "pods": str(capacity)}}})
        self._barriers.append(name)
        schedulers = self._schedulers()
        pods: list[dict[str, Any]] = [
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"{name}-{i}", "namespace": BARRIER_NAMESPACE,
                          "labels": {UNDER_TEST_LABEL: "barrier"}},
             "spec": {"schedulerName": scheduler, "nodeSelector": {HOSTNAME: name},
                      "terminationGracePeriodSeconds": 0,
                      "containers": [{"name": "c", "image": "registry/app:1"}]}}
            for i, scheduler in enumerate(schedulers)]
        self.create_pods(pods)
        deadline = time.monotonic() + self.timeout
        for pod in pods:
            path = f"/api/v1/namespaces/{BARRIER_NAMESPACE}/pods/{pod['metadata']['name']}"
            while not self.client.request("GET", path)["spec"].get("nodeName"):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{pod['spec']['schedulerName']} did not bind the "
                                       f"barrier pod {pod['metadata']['name']}")
                time.sleep(0.02)
        return name

    def _schedulers(self) -> list[str]:
        """kube-scheduler's schedulerName, and the daemon's when it is compared."""
        if self.daemon_scheduler is None:
            return [SCHEDULER_NAME]
        return [SCHEDULER_NAME, self.daemon_scheduler]

    def _set_status(self, pod: dict[str, Any]) -> None:
        """Write the generated status (a finished phase, an in-place resize's resources
        and conditions) through pods/status, as the kubelet would: creation drops it."""
        meta = pod["metadata"]
        stored = self.client.request(
            "PATCH", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status",
            body={"status": pod["status"]}, content_type="application/merge-patch+json")
        # The API server drops pod-level status resources while its
        # InPlacePodLevelResourcesVerticalScaling gate is off: then nothing would test them.
        for key in ("resources", "allocatedResources"):
            if key in pod["status"] and key not in stored.get("status", {}):
                raise AssertionError(f"the API server dropped status.{key} of "
                                     f"{meta['namespace']}/{meta['name']}")

    def ensure_runtime_class(self) -> None:
        """The RuntimeClass whose overhead some cases' pods carry (idempotent)."""
        self.ensure("/apis/node.k8s.io/v1/runtimeclasses", {
            "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": RUNTIME_CLASS}, "handler": "runc",
            "overhead": {"podFixed": RUNTIME_CLASS_OVERHEAD}})

    def delete_pod(self, pod: dict[str, Any]) -> None:
        """Delete `pod` (only its namespace and name are read) at once, without a
        grace period; a pod already gone is fine. A pod holding HOLD_FINALIZER stays,
        terminating, until `cleanup` releases it."""
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        try:
            self.client.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}",
                                query={"gracePeriodSeconds": 0})
        except ApiError as err:
            if err.status != 404:
                raise

    def wait(self, keys: set[tuple[str, str]]) -> dict[tuple[str, str], KubeDecision]:
        """(namespace, name) -> kube-scheduler's decision, for each pod of `keys`
        (pods labelled UNDER_TEST_LABEL=true), polled until every one is bound or has
        PodScheduled=False, or `timeout` passed: an undecided pod's KubeDecision says
        so (`decided` False) rather than raising."""
        decisions = {k: KubeDecision() for k in keys}
        deadline = time.monotonic() + self.timeout
        delay = 0.05
        while True:
            listed = self.client.request(
                "GET", "/api/v1/pods", query={"labelSelector": f"{UNDER_TEST_LABEL}=true"})
            for pod in listed.get("items", []):
                key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
                if key not in decisions:
                    continue
                d = decisions[key]
                d.pod = pod
                d.node = pod["spec"].get("nodeName") or None
                for cond in pod.get("status", {}).get("conditions", []):
                    # A pod created with a scheduling gate (`differential.dra`) keeps
                    # its SchedulingGated condition until a scheduler decides.
                    if cond.get("type") == "PodScheduled" and cond.get("status") == "False" \
                            and cond.get("reason") != "SchedulingGated":
                        d.reason = cond.get("reason", "")
                        d.message = cond.get("message", "")
            if all(d.decided for d in decisions.values()) or time.monotonic() > deadline:
                return decisions
            time.sleep(delay)
            delay = min(delay * 1.5, 0.3)

    # -- a batch ------------------------------------------------------------------------

    def put_scenes(self, cases: Sequence[Scene]) -> None:
        """Create the cases' namespaces, nodes, workloads and existing pods (finished
        and terminating ones as such), not their pods under test; `cleanup` removes
        them again."""
        self.each(self.create_namespace,
                   [item for c in cases for item in c.namespaces.items()])
        self.each(lambda n: self.post("/api/v1/nodes", n),
                   [n for c in cases for n in c.nodes])
        self.each(self._create_workload, [w for c in cases for w in c.workloads])
        existing = [p for c in cases for p in c.pods]
        self.create_pods(existing)
        self.each(self._set_status, [p for p in existing if p.get("status")])
        self.each(self.delete_pod, [p for p in existing if _held(p)])

    def run_batch(self, cases: Sequence[Case]) -> list[Outcome]:
        """Both schedulers' decisions on each case's pod, compared.

        Volume cases (`tests.gen.volumes`) get their storage objects and a storage
        barrier too, and their storage is read back before the pods under test exist
        (`differential.volumes` says why). kube-scheduler's decision binds their
        claims, so a copy of the pod made afterwards would meet another cluster: they
        are not probed with pinned copies, and the `policyd run` daemon places their
        twins (`Case.twin`, `_twin_round`) at the same time instead of a copy later."""
        twins = [c.twin for c in cases if c.twin is not None]
        scenes = [*cases, *twins]
        namespaces = [ns for c in scenes for ns in c.namespaces]
        volume_cases = [c for c in scenes if c.storage]
        storage: StorageLists = {}
        try:
            self.put_scenes(scenes)
            if volume_cases:
                ensure_driver(self)
                put_storage(self, volume_cases)
            self.barrier(cases[0].prefix)
            if volume_cases:
                storage_barrier(self, self._barriers[-1], BARRIER_NAMESPACE,
                                self._schedulers())
                storage = read_storage(self)
            self.create_pods([c.pod for c in scenes])
            keys = {(c.pod["metadata"]["namespace"], c.pod["metadata"]["name"])
                    for c in scenes}
            decisions = self.wait(keys)
            outcomes = [Outcome(c, decisions[(c.pod["metadata"]["namespace"],
                                              c.pod["metadata"]["name"])]) for c in cases]
            cluster, test_pods = self.read_back()
            attach(storage, cluster.storage)
            fw = default_framework(seed=self.seed)
            columnar = ColumnarScores(fw)
            scored: list[tuple[Outcome, dict[str, Any]]] = []
            for o in outcomes:
                key = (o.case.pod["metadata"]["namespace"], o.case.pod["metadata"]["name"])
                pod = test_pods.get(key)
                if pod is None:
                    o.problems.append("pod under test missing when read back")
                    continue
                o.policyd = schedule_one(fw, pod_from_dict(unbound(pod)), cluster)
                compare(o)
                if o.ok and o.mix == SCORED:
                    scored.append((o, pod))
            self._compare_scores(scored, fw, cluster, columnar)
            plain = [o for o in outcomes if not o.case.storage]
            if self.daemon_scheduler is not None:
                self._daemon_round(plain, fw, cluster)
                self._twin_round(outcomes, decisions, fw, cluster)
            self._probe(plain, cluster)
            return outcomes
        finally:
            self.cleanup(scenes, namespaces, volume_cases)

    def kube_scores(self, keys: set[str]) -> dict[str, KubeScores]:
        """kube-scheduler's scores per pod (`namespace/name`, see `score_log`) read from
        its log so far, waiting up to 3 s for `keys` to show up: klog flushes its buffer
        every --log-flush-frequency. A pod bound with one feasible node has no scores."""
        assert self.score_log is not None
        deadline = time.monotonic() + 3.0
        while True:
            with self.score_log.open("rb") as f:
                f.seek(self._log_offset)
                data = f.read()
            end = data.rfind(b"\n") + 1
            self._log_offset += end
            read_score_lines(data[:end].decode(errors="replace"), self._scores)
            if keys <= self._scores.keys() or time.monotonic() > deadline:
                return self._scores
            time.sleep(0.1)

    def _compare_scores(self, scored: Sequence[tuple[Outcome, dict[str, Any]]],
                        fw: Framework, cluster: ClusterState,
                        columnar: ColumnarScores) -> None:
        """`compare_scores` for each scored case, with kube-scheduler's scores from its
        log when the runner has one."""
        logged: dict[str, KubeScores] = {}
        if self.score_log is not None and scored:
            logged = self.kube_scores({pod_key(pod) for _, pod in scored})
        for o, pod in scored:
            compare_scores(o, fw, pod_from_dict(unbound(pod)), cluster, columnar,
                           logged.get(pod_key(pod)))

    def read_back(self, under_test: str = "true"
                   ) -> tuple[ClusterState, dict[tuple[str, str], dict[str, Any]]]:
        """The cluster as the API server holds it, decoded as the daemon decodes it
        (nodes, pods, namespace labels, the workloads default spreading reads), without
        the pods whose UNDER_TEST_LABEL is `under_test`: those are returned apart, raw
        and as stored, by (namespace, name). Everything on the API server is read, not
        only some cases' objects (`tests.gen.differential` keeps cases apart)."""
        nodes = self.client.request("GET", "/api/v1/nodes")["items"]
        pods = self.client.request("GET", "/api/v1/pods")["items"]
        namespaces = self.client.request("GET", "/api/v1/namespaces")["items"]
        workloads = {}
        for kind, (api_version, path) in _WORKLOAD_PATHS.items():
            items = self.client.request("GET", path)["items"]
            for item in items:  # list items carry neither
                item["apiVersion"], item["kind"] = api_version, kind
            workloads[kind] = items
        test_pods = {}
        others = []
        for p in pods:
            if p["metadata"].get("labels", {}).get(UNDER_TEST_LABEL) == under_test:
                test_pods[(p["metadata"]["namespace"], p["metadata"]["name"])] = p
            else:
                for key in ("apiVersion", "kind"):
                    p.setdefault(key, {"apiVersion": "v1", "kind": "Pod"}[key])
                others.append(p)
        for n in nodes:
            n.setdefault("apiVersion", "v1")
            n.setdefault("kind", "Node")
        cluster = ClusterState([node_from_dict(n) for n in nodes],
                               [pod_from_dict(p) for p in others])
        cluster.workloads = workloads
        cluster.namespace_labels = {
            ns["metadata"]["name"]: dict(ns["metadata"].get("labels", {}))
            for ns in namespaces}
        return cluster, test_pods

    def _daemon_round(self, outcomes: Sequence[Outcome], fw: Framework,
                      cluster: ClusterState) -> None:
        """The same pods again, now placed by a running `policyd run` daemon.

        The daemon builds its cluster from its own watches and reports through the API
        (binding, PodScheduled condition), so this checks the whole path against the
        same truth: kube-scheduler's message when unschedulable; when schedulable, a
        node with the best total in policyd's (score-checked) in-process scoring."""
        assert self.daemon_scheduler is not None
        todo = [o for o in outcomes if o.ok and o.policyd is not None]
        if not todo:
            return
        self.each(self.delete_pod, [o.case.pod for o in todo])
        copies = []
        for o in todo:
            copy = {**o.case.pod, "metadata": {**o.case.pod["metadata"], "name": "daemon"},
                    "spec": {**o.case.pod["spec"], "schedulerName": self.daemon_scheduler}}
            copies.append(copy)
        self.create_pods(copies)
        decisions = self.wait({(c["metadata"]["namespace"], "daemon") for c in copies})
        for o, pod in zip(todo, copies, strict=True):
            self._judge_daemon(o, decisions[(pod["metadata"]["namespace"], "daemon")],
                               fw, cluster)
        self.each(self.delete_pod, copies)

    def _judge_daemon(self, o: Outcome, d: KubeDecision, fw: Framework,
                      cluster: ClusterState, node: str | None = None) -> None:
        """Record in `o` how `policyd run`'s decision `d` differs from kube-scheduler's;
        `node` is the node of `o`'s case that `d.node` stands for (a twin's)."""
        o.daemon = d
        k = o.kube
        if not d.decided:
            o.problems.append("policyd run decided nothing in time")
        elif d.reason and d.reason != "Unschedulable":
            o.problems.append(f"policyd run failed: {d.reason}: {d.message}")
        elif (d.node is None) != (k.node is None):
            o.problems.append(f"policyd run: node={d.node} {d.message}; kube-scheduler: "
                              f"node={k.node} {k.message}")
        elif d.node is None and d.message != k.message:
            o.problems.append("policyd run's FailedScheduling differs:\n      "
                              f"kube-scheduler: {k.message}\n      policyd run:    "
                              f"{d.message}")
        elif d.node is not None:
            self._check_daemon_node(o, node or d.node, fw, cluster)

    def _twin_round(self, outcomes: Sequence[Outcome],
                    decisions: Mapping[tuple[str, str], KubeDecision], fw: Framework,
                    cluster: ClusterState) -> None:
        """`policyd run`'s decisions on the volume cases' twins (`Case.twin`), each
        judged against kube-scheduler's decision on the case itself, as `_daemon_round`
        judges a copy: the twin is the same scene under another prefix, on the API
        server in the same batch (so both count the same nodes), its pod placed by the
        daemon while kube-scheduler places the case's. The twin's names in its decision
        (its node, and the namespaces, claims or PVs a FailedScheduling message names)
        are read back under the case's prefix before they are compared."""
        for o in outcomes:
            twin = o.case.twin
            if twin is None or not o.ok or o.policyd is None:
                continue
            d = decisions[(twin.pod["metadata"]["namespace"], twin.pod["metadata"]["name"])]
            own = re.compile(rf"(?<![\w-]){re.escape(twin.prefix)}-")
            node = own.sub(f"{o.case.prefix}-", d.node) if d.node is not None else None
            d = replace(d, message=own.sub(f"{o.case.prefix}-", d.message))
            self._judge_daemon(o, d, fw, cluster, node)

    def _check_daemon_node(self, o: Outcome, node: str, fw: Framework,
                           cluster: ClusterState) -> None:
        p = o.policyd
        assert p is not None
        if node not in p.feasible:
            o.problems.append(f"policyd run chose {node}, infeasible in-process")
            return
        if len(p.feasible) == 1:
            return
        ref = schedule_one(fw, p.pod, cluster, reference=True)
        if ref.scores is None:
            o.problems.append(f"policyd's reference path scored nothing: {ref.message}")
            return
        check_best(o, ref.scores, node, "policyd run")

    def _probe(self, outcomes: Sequence[Outcome], cluster: ClusterState) -> None:
        """Pin copies of the pod to single nodes and compare both schedulers again.

        A pod both schedulers placed says little about the nodes they rejected; a copy
        pinned (required node affinity on the hostname) to one node makes each of them
        judge that node alone, reasons included. The first probe of a case is policyd's
        choice when kube-scheduler chose another node (ties): kube-scheduler must accept
        it. Then, up to `probes` in all, nodes policyd rejected (kube-scheduler must
        reject them for the same reasons) alternating with nodes policyd accepted and
        kube-scheduler did not pick: kube-scheduler must accept those too, which finds
        "policyd accepts, kube-scheduler rejects" without reading any score.

        The original pod (bound elsewhere by kube-scheduler) is deleted first: it would
        count in the copies' affinity and spreading. Pinning by node affinity changes
        what PodTopologySpread counts (nodeAffinityPolicy Honor), which is fine: both
        schedulers judge the same pinned copy.
        """
        plans: list[tuple[Outcome, list[str]]] = []
        for o in outcomes:
            p = o.policyd
            if p is None or p.node is None or o.kube.node is None or not o.ok:
                continue
            plan = [p.node] if p.node != o.kube.node else []
            rng = random.Random(f"{self.seed}/{o.case.index}/probe")
            rejected = [n for n in o.case.node_names if n not in p.feasible]
            accepted = [n for n in o.case.node_names
                        if n in p.feasible and n not in plan and n != o.kube.node]
            rng.shuffle(rejected)
            rng.shuffle(accepted)
            plan += _alternate(rejected, accepted)[: max(0, self.probes - len(plan))]
            if plan:
                plans.append((o, plan))
        if not plans:
            return
        self.each(self.delete_pod, [o.case.pod for o, _ in plans])
        fw = default_framework(seed=self.seed)
        for round_ in range(max(len(plan) for _, plan in plans)):
            batch = [(o, plan[round_]) for o, plan in plans if round_ < len(plan)]
            copies = [pinned_copy(o.case.pod, node, f"probe-{round_}") for o, node in batch]
            self.create_pods(copies)
            decisions = self.wait({(c["metadata"]["namespace"], c["metadata"]["name"])
                                    for c in copies})
            for (o, node), pod in zip(batch, copies, strict=True):
                d = decisions[(pod["metadata"]["namespace"], pod["metadata"]["name"])]
                # As stored: admission added the RuntimeClass overhead, defaults, ...
                stored = unbound(d.pod) if d.pod else pod
                probe = Outcome(o.case, d, schedule_one(fw, pod_from_dict(stored), cluster))
                compare(probe)
                o.probes.append((node, d))
                o.problems += [f"pinned to {node}: {problem}" for problem in probe.problems]
            self.each(self.delete_pod, copies)

    def release(self, pod: dict[str, Any]) -> None:
        """Remove every finalizer of `pod` (a held pod then goes); gone already is fine."""
        meta = pod["metadata"]
        try:
            self.client.request(
                "PATCH", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                body={"metadata": {"finalizers": None}},
                content_type="application/merge-patch+json")
        except ApiError as err:
            if err.status != 404:
                raise

    def cleanup(self, cases: Sequence[Scene], namespaces: list[str],
                volume_cases: Sequence[Case] = ()) -> None:
        """Delete every pod of `namespaces` and of the barrier namespace (releasing the
        cases' HOLD_FINALIZER pods first), the cases' nodes (by their CASE_LABEL prefix)
        and the barrier nodes made since the last clean-up; then the storage of
        `volume_cases` and of the storage barriers (`volumes.cleanup_storage`).
        Namespaces stay."""
        self.each(self.release, [p for c in cases for p in c.pods if _held(p)])
        self.each(lambda ns: self.client.request(
            "DELETE", f"/api/v1/namespaces/{ns}/pods", query={"gracePeriodSeconds": 0}),
            namespaces)
        self.client.request("DELETE", f"/api/v1/namespaces/{BARRIER_NAMESPACE}/pods",
                            query={"gracePeriodSeconds": 0})
        prefixes = ",".join([c.prefix for c in cases] + self._barriers)
        if volume_cases:
            cleanup_storage(self, volume_cases, [*namespaces, BARRIER_NAMESPACE],
                            self._barriers)
        self._barriers.clear()
        self.client.request("DELETE", "/api/v1/nodes",
                            query={"labelSelector": f"{CASE_LABEL} in ({prefixes})"})


# What kube-scheduler's default spreading reads (helper.DefaultSelector).
_WORKLOAD_PATHS = {
    "Service": ("v1", "/api/v1/services"),
    "ReplicationController": ("v1", "/api/v1/replicationcontrollers"),
    "ReplicaSet": ("apps/v1", "/apis/apps/v1/replicasets"),
    "StatefulSet": ("apps/v1", "/apis/apps/v1/statefulsets"),
}


BARRIER_NAMESPACE = "diff-barrier"


def _alternate(a: Sequence[str], b: Sequence[str]) -> list[str]:
    """a[0], b[0], a[1], b[1], ... and then the rest of the longer one."""
    return [x for i in range(max(len(a), len(b))) for x in (*a[i:i + 1], *b[i:i + 1])]


def _held(pod: dict[str, Any]) -> bool:
    return HOLD_FINALIZER in pod["metadata"].get("finalizers", ())


def pod_key(pod: dict[str, Any]) -> str:
    """A raw pod's `namespace/name`, the key of `Pod.key` and of the schedulers' logs."""
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


def unbound(pod: dict[str, Any]) -> dict[str, Any]:
    """A copy of a pod read back from the API server as kube-scheduler first saw it:
    not yet bound (no nodeName, no status conditions), apiVersion and kind set (list
    items carry neither), so `pod_from_dict` decodes it as a pending pod."""
    out = dict(pod)
    out["apiVersion"], out["kind"] = "v1", "Pod"
    out["spec"] = {k: v for k, v in pod["spec"].items() if k != "nodeName"}
    out["status"] = {k: v for k, v in pod.get("status", {}).items() if k != "conditions"}
    return out


def compare(o: Judged) -> None:
    """Record every difference between the two decisions in `o.problems`."""
    k, p = o.kube, o.policyd
    assert p is not None
    if not k.decided:
        o.problems.append("kube-scheduler decided nothing in time")
        return
    if k.reason and k.reason != "Unschedulable":
        o.problems.append(f"kube-scheduler failed: {k.reason}: {k.message}")
        return
    if p.error is not None:
        o.problems.append(f"policyd failed: {p.message}")
        return
    if k.node is None and p.node is not None:
        o.problems.append(f"policyd placed it on {p.node}; kube-scheduler: {k.message}")
        return
    if k.node is not None and p.node is None:
        o.problems.append(f"kube-scheduler placed it on {k.node}; policyd: {p.message}")
        return
    if k.node is None:
        o.mix, o.compared = UNSCHEDULABLE, MESSAGE_COMPARED
        if k.message != p.message:
            theirs, mine = parse_fit_error(k.message), parse_fit_error(p.message)
            o.problems.append(
                "FailedScheduling differs:\n      kube-scheduler: "
                f"{k.message}\n      policyd:        {p.message}"
                + (f"\n      counts kube={theirs[1]} policyd={mine[1]}"
                   if theirs and mine and theirs[1] != mine[1] else ""))
        return
    if k.node not in p.feasible:
        status = p.diagnosis.node_to_status.get(k.node)
        o.problems.append(f"kube-scheduler's node {k.node} is not feasible for policyd"
                          + (f" ({status.reasons})" if status is not None else ""))
        return
    o.mix = SINGLE_NODE if len(p.feasible) == 1 else SCORED
    o.compared = VERDICT_ONLY  # until its scores are compared


def reference_scores(scores: ScoreResult) -> dict[str, dict[str, int]]:
    """node -> plugin -> weighted score, and the node's total under TOTAL."""
    return {n.name: {**{ps.plugin: ps.normalized[i] * ps.weight for ps in scores.plugins},
                     TOTAL: scores.totals[i]}
            for i, n in enumerate(scores.nodes)}


def kube_weighted(scores: KubeScores) -> dict[str, dict[str, int]]:
    """kube-scheduler's logged scores in the shape of `reference_scores`; a node whose
    total was not logged gets -1, which no real total equals."""
    return {node: {**plugins, TOTAL: scores.totals.get(node, -1)}
            for node, plugins in scores.plugins.items()}


def score_diffs(a: Mapping[str, Mapping[str, int]], b: Mapping[str, Mapping[str, int]]
                ) -> dict[tuple[str, str], tuple[int | None, int | None]]:
    """(node, plugin) -> (score in a, score in b) wherever the two differ, a node or a
    plugin only one of them has included; sorted by node, then plugin."""
    out = {}
    for node in sorted(set(a) | set(b)):
        x, y = a.get(node, {}), b.get(node, {})
        for plugin in sorted(set(x) | set(y)):
            if x.get(plugin) != y.get(plugin):
                out[(node, plugin)] = (x.get(plugin), y.get(plugin))
    return out


def record_score_diffs(o: Judged, a_name: str, a: Mapping[str, Mapping[str, int]],
                       b_name: str, b: Mapping[str, Mapping[str, int]]) -> None:
    """Record in `o.problems`, as one problem naming the first 12, every (node, plugin)
    whose weighted score differs between `a` and `b` (`score_diffs`); nothing when
    they agree."""
    diffs = [f"{node} {plugin}: {a_name} {x}, {b_name} {y}"
             for (node, plugin), (x, y) in score_diffs(a, b).items()]
    if diffs:
        o.problems.append(f"weighted scores differ ({a_name} vs {b_name}): "
                          + "; ".join(diffs[:12])
                          + (f" (+{len(diffs) - 12} more)" if len(diffs) > 12 else ""))


def check_best(o: Judged, scores: ScoreResult, node: str | None, who: str) -> None:
    """`node`, chosen by `who`, must have the highest total in policyd's reference
    scoring: both schedulers score every feasible node here (percentageOfNodesToScore
    100) and pick among the highest totals, so anything else is a score difference."""
    names = [n.name for n in scores.nodes]
    if node is None or node not in names:
        return  # reported by compare()
    i = names.index(node)
    best = max(scores.totals)
    if scores.totals[i] < best:
        j = scores.totals.index(best)
        detail = ", ".join(
            f"{ps.plugin}(w{ps.weight}) {ps.normalized[i]} vs {ps.normalized[j]}"
            for ps in scores.plugins if ps.normalized[i] != ps.normalized[j])
        o.problems.append(
            f"{who} chose {node}, which policyd's reference path scores "
            f"{scores.totals[i]} against {best} for {names[j]}: {detail}")


def compare_scores(o: Judged, fw: Framework, pod: Pod, cluster: ClusterState,
                   columnar: ColumnarScores, theirs: KubeScores | None) -> None:
    """Both of policyd's paths against each other and against kube-scheduler, for a
    pod `o` found SCORED, problems recorded in `o.problems`.

    The reference path's weighted score of every plugin on every feasible node, and
    each node's total, must be kube-scheduler's when its log has them (`theirs`; `o`
    is then SCORE_COMPARED); otherwise kube-scheduler's node must be among the
    reference's best (`check_best`). The columnar path (the daemon's; the one that
    decided `o.policyd`, with `columnar` attached to `fw`) must score exactly as the
    reference path, so it equals kube-scheduler's too, and choose one of the
    reference's best nodes."""
    ref = schedule_one(fw, pod, cluster, reference=True)
    if ref.scores is None:
        o.problems.append(f"policyd's reference path scored nothing: {ref.message}")
        return
    mine = reference_scores(ref.scores)
    record_score_diffs(o, "reference path", mine, "columnar path",
                 columnar.by_pod.get(pod.key, {}))
    check_best(o, ref.scores, o.policyd.node if o.policyd else None,
               "policyd's columnar path")
    if theirs is None:
        check_best(o, ref.scores, o.kube.node, "kube-scheduler")
        return
    o.compared = SCORE_COMPARED
    record_score_diffs(o, "kube-scheduler", kube_weighted(theirs), "policyd", mine)


class ColumnarScores:
    """What the default (columnar) path scored, per pod: node -> plugin -> weighted
    score, and the node's total under TOTAL.

    Attached to a Framework it stands in for the framework's `run_score_fast`, so the
    scores recorded are those of the very cycle whose decision the runner compares
    (`schedule_one`'s default path, as the daemon runs it). The totals are
    run_score_fast's own; each plugin's score is run_score_fast again on a copy of the
    framework holding that plugin alone, on the same cycle after the real run."""

    def __init__(self, fw: Framework) -> None:
        self.by_pod: dict[str, dict[str, dict[str, int]]] = {}
        self._fw = fw
        self._alone: list[tuple[str, Framework]] = []
        for bs in fw.scores:
            alone = copy.copy(fw)
            alone.scores = (bs,)
            self._alone.append((bs.name, alone))
        # An instance attribute hides the method for the cycle's `fw.run_score_fast`.
        fw.run_score_fast = self._run_score_fast  # type: ignore[method-assign]

    def _run_score_fast(self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray,
                        nodes: Sequence[NodeInfo]) -> tuple[IntArray, Status | None]:
        totals, status = Framework.run_score_fast(self._fw, state, pod, table, idx, nodes)
        if status is None:
            names = [table.names[i] for i in idx.tolist()]
            per_node = {n: {TOTAL: t} for n, t in zip(names, totals.tolist(), strict=True)}
            for name, alone in self._alone:
                if name in state.skip_score:
                    continue  # neither path nor kube-scheduler scores a skipped plugin
                scores, err = Framework.run_score_fast(alone, state, pod, table, idx, nodes)
                for n, score in zip(names, scores.tolist(), strict=True):
                    per_node[n][name] = score if err is None else -1
            self.by_pod[f"{pod.namespace}/{pod.name}"] = per_node
        return totals, status
