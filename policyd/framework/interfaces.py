"""One small protocol per extension point; a plugin implements only what it needs.

A plugin's evaluation comes in two forms, and only two:

- the reference form, per node: `filter`, `score`, `normalize_score`. Close to
  upstream's Go and obviously correct; every rejection reason comes from `filter`.
- the columnar form, over the `NodeTable` rows `idx`: `filter_mask`, `score_vector`,
  `normalize_vector`. Optional, for plugins on the hot path. A columnar method may
  return None: "use the reference form for this pod" (its documented fallback).

Both forms must give the same answer: the same feasible nodes, and after normalizing the
same scores (tests/unit/plugins/test_plugin_contract.py runs every registered plugin
through both). The `Framework` classifies each plugin once, when it is built, with
isinstance against these runtime-checkable protocols; `extension_points` is that same
classification for the config's plugin sets. Every method receives plain records
(Pod, NodeInfo) and returns values: `None` means Success.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import numpy as np

from policyd.framework.cycle_state import CycleState
from policyd.framework.fit_error import Diagnosis
from policyd.framework.status import Status
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.model.table import BoolArray, IntArray, NodeTable

if TYPE_CHECKING:
    from policyd.framework.waiting_pods import WaitingPods
    from policyd.model.cluster import ClusterState

T = TypeVar("T")


@runtime_checkable
class Plugin(Protocol):
    name: str


@runtime_checkable
class PreEnqueuePlugin(Plugin, Protocol):
    def pre_enqueue(self, pod: Pod, cluster: ClusterState) -> Status | None:
        """Whether `pod` may enter the scheduling queue's active or backoff queue now
        (upstream's PreEnqueue). A rejection gates it, silently: no cycle, no event,
        until one of this plugin's registered events moves it and it passes."""


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    def less(self, a: Pod, b: Pod) -> bool:
        """Whether `a` should be scheduled before `b`."""


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[set[str] | None, Status | None]:
        """Compute per-pod data once. Returns (node names to restrict to or None for all,
        status). A Skip status means this plugin's Filter does not run for the pod; a
        rejection stops the cycle with its message."""


@runtime_checkable
class PreFilterExtensionsPlugin(Plugin, Protocol):
    """upstream's PreFilterExtensions: keep what PreFilter computed from the other pods
    up to date when a pod is added to or removed from `node` (preemption's dry runs on
    a cloned CycleState, nominated pods counted on their node), instead of rerunning
    PreFilter. Only for plugins whose PreFilter state depends on pods other than the
    incoming one; a PreFilter plugin without them must declare
    `pre_filter_reads_other_pods = False` for the dry runs to rely on its state."""

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node: NodeInfo
                ) -> Status | None:
        """`pod_to_add` now counts on `node` (whose NodeInfo already holds it)."""

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, node: NodeInfo
                   ) -> Status | None:
        """`pod_to_remove` no longer counts on `node` (already gone from its NodeInfo)."""


def pre_filter_state_follows_pods(plugin: object) -> bool:
    """Whether preemption's dry runs can rely on the plugin's PreFilter state once it is
    updated through PreFilterExtensions: the plugin has them, or declares that its
    PreFilter reads no pod but the incoming one (`pre_filter_reads_other_pods = False`).
    A plugin that says neither makes the dry runs rerun PreFilter (correct for any
    plugin, and slower)."""
    if isinstance(plugin, PreFilterExtensionsPlugin):
        return True
    return getattr(plugin, "pre_filter_reads_other_pods", True) is False


def filter_reads_node_pods(plugin: object) -> bool:
    """Whether the plugin's Filter verdict on a node may change when pods are added to
    or taken off that node (its own pods, or PreFilter state its extensions update).
    A plugin that reads the node alone declares `filter_reads_node_pods = False`:
    preemption's dry runs then ask it once per node instead of once per check. Not
    declaring it is always correct."""
    return getattr(plugin, "filter_reads_node_pods", True) is not False


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        """Whether `pod` fits `node`; None when it does. The reference form, and the
        only source of rejection reasons."""


@runtime_checkable
class ColumnarFilterPlugin(Plugin, Protocol):
    def filter_mask(
        self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray
    ) -> BoolArray | None:
        """Pass/fail for the nodes `table.infos[idx]` at once (True = passes), or None
        when this pod needs the per-node `filter`. Must agree with `filter` exactly."""


@runtime_checkable
class ColumnarStatusesPlugin(Plugin, Protocol):
    def filter_statuses(
        self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray
    ) -> Sequence[Status | None] | None:
        """`filter`'s status for each of the nodes `table.infos[idx]` at once (None =
        passes), or None when this pod needs the per-node `filter`: an unschedulable
        pod's diagnosis asks every node for its reason. Must agree with `filter`
        exactly."""


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> Status | None:
        """Compute per-pod scoring data over the feasible nodes. Skip: Score not run."""


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        """The node's raw score. Raising is an internal error (an Error status)."""


@runtime_checkable
class NormalizeScorePlugin(Plugin, Protocol):
    def normalize_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], scores: list[int]
    ) -> Status | None:
        """Rewrite `scores` (aligned with `nodes`) in place into [0, 100]."""


@runtime_checkable
class ColumnarScorePlugin(Plugin, Protocol):
    def score_vector(
        self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray
    ) -> IntArray | None:
        """Scores of the nodes `table.infos[idx]`, or None to use the per-node form.
        Followed by `normalize_vector` when the plugin has one, the result must equal
        `score` followed by `normalize_score` (when it has one); a plugin may therefore
        normalize here already and have no `normalize_vector` (compiled policies do)."""


@runtime_checkable
class ColumnarNormalizePlugin(Plugin, Protocol):
    def normalize_vector(
        self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray, scores: IntArray
    ) -> IntArray:
        """The normalized form of `scores`, exactly as `normalize_score` computes it."""


# One rule's scores over the nodes: each node's raw value (None: missing) and 0..100 score.
RuleScores = list[tuple[float | None, int]]


@runtime_checkable
class ScoreBreakdownPlugin(Plugin, Protocol):
    def score_breakdown(
        self, state: CycleState, nodes: Sequence[NodeInfo]
    ) -> dict[str, RuleScores]:
        """For plugins that score by several rules (compiled policies): per rule id, what
        each of `nodes` got, which explain shows beside the plugin's total."""


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    """Called once a node is chosen and the pod assumed there, under the same lock as
    the cycle (the daemon's state lock): the plugin records what it takes (the volume
    bindings it chose) in the cluster state, so the next cycle sees it taken."""

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """Take what the pod needs on `node_name`. A rejection fails the pod's cycle,
        and every Reserve plugin's `unreserve` runs."""

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        """Undo `reserve` (the pod did not bind). Must be idempotent and must not fail:
        it also runs for plugins whose `reserve` did not run or did not succeed."""


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    """The last say before the binding cycle (upstream's Permit): runs after Reserve,
    under the same lock, on the chosen node."""

    def permit(self, state: CycleState, pod: Pod, node_name: str
               ) -> tuple[Status | None, float]:
        """None (Success) to let the pod go on; a rejection to send it back to the
        queue (its Reserve undone); Wait with the longest it may wait, in seconds
        (at most 15 minutes), to hold it before PreBind until the plugin allows it
        through the framework's `WaitingPods` (or rejects it, or the time passes).
        The number is read only with Wait."""


@runtime_checkable
class WaitingPodsPlugin(Plugin, Protocol):
    """A plugin that acts on pods waiting at Permit (allows a gang's other members,
    rejects them): given the framework's map when the framework is built, as
    upstream's plugins reach it through their framework handle."""

    def use_waiting_pods(self, waiting: WaitingPods) -> None:
        ...


@runtime_checkable
class ClusterPlugin(Plugin, Protocol):
    """A plugin that reads the cluster outside a cycle, where no CycleState carries it
    (Coscheduling's queue sort orders pods by their PodGroup's creation): given the
    cluster the scheduler keeps (the daemon's state, a simulation's copy)."""

    def use_cluster(self, cluster: ClusterState) -> None:
        ...


class BindingHandle(Protocol):
    """What a PreBind plugin may do beyond its cycle state, given by whoever binds (the
    daemon: the API server and its informer-fed state; the offline commands: the
    snapshot's state alone)."""

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Replace `obj` (a full object with kind, apiVersion, metadata.resourceVersion)
        on the API server; returns what the server stored. Raises `BindingApiError`."""

    def locked(self, fn: Callable[[ClusterState], T]) -> T:
        """`fn(cluster)` under the lock the informers update the cluster state with."""

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True when the wait should end now (the scheduler is
        stopping, or the binding was called off): the plugin then fails with
        "context canceled", as upstream's wait on a cancelled context."""

    def now(self) -> float:
        """Monotonic seconds, for deadlines."""


class BindingApiError(Exception):
    """A write a PreBind plugin asked for failed (the API server's message).
    `conflict`: the object changed since it was read (409), so reading it again and
    retrying may succeed."""

    def __init__(self, message: str, *, conflict: bool = False) -> None:
        super().__init__(message)
        self.conflict = conflict


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    def pre_bind(self, state: CycleState, pod: Pod, node_name: str,
                 handle: BindingHandle) -> Status | None:
        """Make the node ready for the pod before it is bound (write the volume
        bindings and wait for them); runs outside the cycle's lock, in the binder. A
        failure unreserves the pod and sends it back to the queue with the message."""


@runtime_checkable
class UndoPreBindPlugin(Plugin, Protocol):
    """A Reserve plugin whose PreBind writes to the API server and whose upstream
    Unreserve undoes those writes (DynamicResources takes the pod out of its claims'
    reservedFor). policyd splits that Unreserve: `unreserve` runs under the state lock
    and touches only the cluster state; this runs after it, outside the lock, before
    the pod is requeued, with the handle its PreBind had."""

    def undo_pre_bind(self, state: CycleState, pod: Pod, node_name: str,
                      handle: BindingHandle) -> None:
        """Undo what this plugin's PreBind wrote for `pod`. Must not fail: a write
        that fails is logged (the next attempt, or a controller, cleans up)."""


@runtime_checkable
class PreBindPreFlightPlugin(PreBindPlugin, Protocol):
    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str
                            ) -> Status | None:
        """Before PreBind (upstream's PreBindPreFlight): whether `pre_bind` will have
        work for this pod on `node_name`. None (Success): it will, which is when the
        binder tells the API where the pod is going (NominatedNodeNameForExpectation);
        Skip: it will not, and is not called; an error fails the binding cycle. Reads
        the cycle state only, never the API: it runs before any write."""


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    """What a PostFilter plugin found that can make the pod fit later (upstream's
    PostFilterResult with its NominatingInfo): the node to nominate, the pods to evict
    there, and the pods whose nomination to that node must be cleared. Whoever runs
    the cycle acts on it (the daemon: the API writes; offline: the cluster copy)."""

    nominated_node: str
    victims: tuple[Pod, ...] = ()
    clear_nominations: tuple[Pod, ...] = ()


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis
                    ) -> tuple[PostFilterResult | None, Status]:
        """Runs when no node fits. A Success status comes with a result (the pod
        will fit once it is acted on); a rejection's message becomes the part of the
        FailedScheduling message after the filters' reasons."""


@runtime_checkable
class PostFilterNotesPlugin(Plugin, Protocol):
    def post_filter_notes(self, state: CycleState) -> list[str]:
        """After `post_filter` ran in this cycle: what it did or would do, in lines
        (preemption: the node, the victims, why other candidates lost); [] when it did
        not run. Only explain asks."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """One thing a filter judged on a node, for explain: a claim of the pod, whether it
    fits there, and in words how (the PV it takes) or why not."""

    subject: str
    fits: bool
    verdict: str


@runtime_checkable
class VerdictsPlugin(Plugin, Protocol):
    def verdicts(self, state: CycleState, pod: Pod, node: NodeInfo) -> Sequence[Verdict]:
        """After `filter` ran on `node`: the verdict on each part of the pod the plugin
        judges separately (VolumeBinding: each claim). Only explain asks."""


@dataclass(frozen=True, slots=True)
class AuditedRule:
    """One filter rule of an audited policy, bound to a pod: its id and the reason a
    node it rejects would have been given (the rule's `filter` reason)."""

    rule: str
    reason: str


@runtime_checkable
class AuditPlugin(Plugin, Protocol):
    """A policy in Audit mode (`spec.mode: Audit`): its filter rules are judged, rule by
    rule, on the nodes the enforced filters left feasible, and reject nothing; its
    scores count nowhere. It is neither a Filter nor a Score plugin, so the runner can
    never let it reject or score; the Framework keeps it in its own `audits`.

    `audited_points` are the extension points its Enforce form has: a profile may name
    it wherever it may name that form (switching the mode never invalidates a
    profile), and where the profile enables it at `filter`, it is audited."""

    policy_name: str
    audited_points: frozenset[str]

    def audit_bind(self, state: CycleState, pod: Pod) -> Sequence[AuditedRule]:
        """Bind the policy's filter rules to `pod`, once per cycle: the rules active for
        it, in order ([] when the policy does not apply: nothing to audit)."""

    def audit_filter(self, state: CycleState, pod: Pod, node: NodeInfo
                     ) -> Sequence[bool]:
        """After `audit_bind`, the reference form: whether `node` passes each bound
        rule, aligned with them."""

    def audit_mask(self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray
                   ) -> Sequence[BoolArray]:
        """After `audit_bind`, the columnar form: per bound rule, which of the nodes
        `table.infos[idx]` pass (True = passes). Must agree with `audit_filter`."""


# The config's extension point names and the protocol that puts a plugin there.
EXTENSION_POINTS: dict[str, type] = {
    "preEnqueue": PreEnqueuePlugin,
    "queueSort": QueueSortPlugin,
    "preFilter": PreFilterPlugin,
    "filter": FilterPlugin,
    "preScore": PreScorePlugin,
    "score": ScorePlugin,
    "postFilter": PostFilterPlugin,
    "reserve": ReservePlugin,
    "permit": PermitPlugin,
    "preBind": PreBindPlugin,
}


def extension_points(plugin: object) -> frozenset[str]:
    """The extension points `plugin` implements; an audited policy's are those of its
    Enforce form (where a profile may name it; the Framework audits it instead)."""
    if isinstance(plugin, AuditPlugin):
        return plugin.audited_points
    return frozenset(point for point, protocol in EXTENSION_POINTS.items()
                     if isinstance(plugin, protocol))


def default_normalize_score(max_priority: int, reverse: bool, scores: list[int]) -> None:
    """helper.DefaultNormalizeScore: scale to [0, max_priority] by the highest score;
    reversed, subtract from max_priority (all max when every score is 0)."""
    max_count = max(scores, default=0)
    if max_count == 0:
        if reverse:
            for i in range(len(scores)):
                scores[i] = max_priority
        return
    for i, s in enumerate(scores):
        s = max_priority * s // max_count
        scores[i] = max_priority - s if reverse else s


def default_normalize_vector(max_priority: int, reverse: bool, scores: IntArray) -> IntArray:
    """`default_normalize_score` over an array (integer division as upstream)."""
    max_count = int(scores.max()) if scores.size else 0
    if max_count == 0:
        return np.full_like(scores, max_priority) if reverse else scores
    out = max_priority * scores // max_count
    return max_priority - out if reverse else out
