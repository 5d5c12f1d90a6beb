"""What every rule kind implements, and the NodeTable reads several kinds share.

A rule is compiled once from its spec. Each cycle, `bind` does the part that depends on
the pod alone and returns a per-node function: a filter's check (None: the rule is
inactive for the pod), a score's raw value (None: missing). `mask` and `values` are the
same functions over NodeTable rows (the engine's vectorized path) and must give exactly
their results; the defaults here call the per-node function on each row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from policyd.framework.events import ClusterEventWithHint
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.policy.rules.applies_to import AppliesTo
from policyd.policy.schema_parts import RuleKind

if TYPE_CHECKING:
    from policyd.model.cluster import ClusterState
    from policyd.model.table import BoolArray, IntArray, NodeTable

FloatArray = np.ndarray[Any, np.dtype[np.float64]]

NodeCheck = Callable[[NodeInfo], bool]
NodeValue = Callable[[NodeInfo], float | None]


class RulePolicy(Protocol):
    """The compiled policy as its rules see it: rules exist before the plugin that
    holds them, so they know it by this shape rather than by its class."""

    applies_to: AppliesTo
    filter_rules: tuple[FilterRule, ...]

    def applies(self, pod: Pod) -> bool: ...


# FilterRule.autoscaler_visible
ALWAYS, WHEN_REQUESTED, NEVER = "always", "when-requested", "never"


@dataclass(frozen=True, slots=True)
class Projection:
    """What a filter rule means for one pod in kube-scheduler's own constraints, which
    an autoscaler simulates (policyd.admission). `requirements`: NodeSelectorRequirements
    (API JSON) a node must meet, ANDed into every required nodeAffinity term of the pod;
    `invisible`: why no such constraint expresses the rule ("" when it is projected)."""

    requirements: tuple[Mapping[str, Any], ...] = ()
    invisible: str = ""


class FilterRule:
    """A `filters[]` rule. `unresolvable`: whether evicting pods can never make a
    rejected node pass (the Unschedulable code it fails with); `reads_pod`: whether its
    verdict depends on the pod beyond appliesTo, so the pod's own update can undo it."""

    kind: ClassVar[RuleKind]  # its declaration in filters/schemas.py
    unresolvable = True
    reads_pod = False
    # Whether `project` can say it in kube-scheduler's constraints (what lint's
    # --require-autoscaler-visible asks of a policy before any pod exists): ALWAYS,
    # WHEN_REQUESTED (the pod's own request says it), or NEVER (the default).
    autoscaler_visible: ClassVar[str] = "never"

    def __init__(self, rule_id: str, message: str) -> None:
        self.id = rule_id
        self.message = message

    # Whether `bind_in` reads the cluster beyond the incoming pod (the placed pods of
    # its group): the policy's PreFilter then depends on other pods.
    reads_cluster: ClassVar[bool] = False

    def bind(self, policy: RulePolicy, pod: Pod) -> NodeCheck | None:
        raise NotImplementedError

    def bind_in(self, policy: RulePolicy, pod: Pod, cluster: ClusterState | None
                ) -> NodeCheck | None:
        """`bind` with the cycle's cluster at hand (None where there is none): only
        rules that declare `reads_cluster` look at it."""
        return self.bind(policy, pod)

    def group_topology_key(self) -> str | None:
        """The node label key whose one domain a pod group's pods must share under this
        rule (sameTopology), else None."""
        return None

    def project(self, pod: Pod) -> Projection | None:
        """This rule for `pod` as kube-scheduler constraints, or why it cannot be; None
        when the rule is inactive for the pod (as `bind`). By default a kind has no
        kube-scheduler equivalent: the node's load, metrics, arbitrary expressions."""
        return Projection(invisible=f"a {self.kind.name} rule has no kube-scheduler "
                          "equivalent")

    def node_label_keys(self) -> tuple[str, ...]:
        """The node label keys the rule reads by name (explain and audit point out a
        node whose key differs from one only by case); () when it reads none."""
        return ()

    def mask(self, check: NodeCheck, policy: RulePolicy, pod: Pod, table: NodeTable,
             idx: IntArray) -> BoolArray:
        """The batch form of `check` over `table` rows `idx`; exactly its results.
        This default calls it per node; rules that read only columns override it."""
        infos = table.infos
        return np.fromiter((check(infos[i]) for i in idx.tolist()), np.bool_, idx.size)

    def events(self, policy: RulePolicy) -> tuple[ClusterEventWithHint, ...]:
        """The cluster events that can undo this rule's rejections, with their hints
        (see policyd/policy/requeue.py)."""
        raise NotImplementedError


class ScoreRule:
    """A `scores[]` rule. `missing`: what a node without a value scores (only metric
    rules choose; every other kind scores it 0, `worst`)."""

    kind: ClassVar[RuleKind]  # its declaration in scores/schemas.py
    missing = "worst"

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.id: str = spec["id"]
        self.weight: int = int(spec["weight"])
        self.normalize: str = spec["normalize"]
        self.reverse = bool(spec.get("reverse", False))

    def bind(self, pod: Pod) -> NodeValue:
        raise NotImplementedError

    def node_label_keys(self) -> tuple[str, ...]:
        """As FilterRule.node_label_keys."""
        return ()

    def values(self, value: NodeValue, pod: Pod, table: NodeTable,
               idx: IntArray) -> FloatArray:
        """The batch form of `value` over rows `idx`, NaN where it is None. This default
        calls it per node; rules that read only columns override it."""
        infos = table.infos
        nan = math.nan
        return np.fromiter(
            (nan if (v := value(infos[i])) is None else v for i in idx.tolist()),
            np.float64, idx.size)


def label_group_mask(keys: tuple[str, ...], check: NodeCheck, table: NodeTable,
                     idx: IntArray) -> BoolArray:
    """Decide a label-only check once per distinct combination of the labels it reads."""
    group_id, members = table.label_groups(keys)
    infos = table.infos
    ok = np.fromiter((check(infos[i]) for i in members), np.bool_, len(members))
    return ok[group_id[idx]]


def resource_row(table: NodeTable, array: IntArray, name: str, idx: IntArray) -> IntArray:
    """Rows `idx` of a per-resource column of `table` (allocatable, requested); 0 on
    every node when no node lists the resource."""
    j = table.resource_column(name)
    if j is None:
        return np.zeros(idx.size, np.int64)
    return table.take(array[j], idx)
