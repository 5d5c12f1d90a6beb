"""Which bound pods sit on a node that their policies' filter rules reject now.

A policy change or a node's label drift can leave pods on nodes the scheduler would no
longer pick for them; nothing evicts them, so nothing says so. `audit` asks each filter
RULE of each policy that applies to a bound pod about the pod's node as it is now, with
the pod itself taken off that node for the question (`ClusterState.what_if`): the
scheduler asked the same question with the pod not yet there, so a headroom or
maxPodsPerNode rule never counts the pod against itself, and a pod that fitted when it
was placed, on a node that did not change, still passes.

Capacity rules (headroom, maxPodsPerNode) judge the node with all its other pods: when a
node is over such a limit, every pod the policy applies to there is reported, since
which one arrived last is not in the snapshot and removing any one of them is what
the rule asks for. Scores are not audited: a score ranks nodes, it cannot be violated.

Rules are asked through their per-node reference form (`bind`, then the check per
node), the form every rejection reason comes from; pods are grouped by node so each
node's record is looked up once.

A node label key that differs from one a policy reads only by case (`Env` on the node,
`env` in the policy) silently matches nothing; `label_case_mismatches` finds each such
pair on the actual nodes, for audit's findings and explain's reasons.

The engine does not import the policy package (the layers contract): a policy is
anything with the shape of `CheckedPolicy` (or `LabelKeyPolicy`), as `CompiledPolicy`
has.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from policyd.engine.device_audit import DeviceFinding
from policyd.engine.profiles import scheduler_name_words
from policyd.model.cluster import ClusterState
from policyd.model.node_info import NodeInfo
from policyd.model.records import Node, Pod

# Why a bound pod was not audited (SkippedPod.kind), stable for JSON consumers.
FINISHED = "finished"
TERMINATING = "terminating"
NODE_MISSING = "node-missing"
NOT_SERVED = "not-served"


class CheckedRule(Protocol):
    """A filter rule as the audit asks it (`policyd.policy.rules.base.FilterRule`)."""

    @property
    def id(self) -> str: ...

    @property
    def message(self) -> str: ...

    def bind(self, policy: Any, pod: Pod) -> Callable[[NodeInfo], bool] | None: ...


class CheckedPolicy(Protocol):
    """A compiled policy as the audit reads it (`policyd.policy.compiler.CompiledPolicy`)."""

    @property
    def name(self) -> str: ...  # spec.pluginName

    @property
    def policy_name(self) -> str: ...  # metadata.name

    @property
    def mode(self) -> str: ...  # Enforce | Audit: spec.mode

    @property
    def filter_rules(self) -> Sequence[CheckedRule]: ...

    def applies(self, pod: Pod) -> bool: ...

    def mode_for(self, pod: Pod) -> str: ...  # the pod's namespace's scoped mode

    def exemption(self, pod: Pod, rule_id: str) -> PolicyException | None: ...


class PolicyException(Protocol):
    """An unexpired exception of a policy (`policyd.policy.scopes.PolicyException`)."""

    @property
    def name(self) -> str: ...

    @property
    def reason(self) -> str: ...

    @property
    def expires(self) -> str: ...


class LabelKeyPolicy(Protocol):
    """A compiled policy as the label-case check reads it."""

    @property
    def name(self) -> str: ...  # spec.pluginName

    @property
    def policy_name(self) -> str: ...  # metadata.name

    @property
    def node_label_keys(self) -> tuple[str, ...]: ...


@dataclass(frozen=True, slots=True)
class CaseMismatch:
    """A node whose label key differs from one a policy reads only by case, the
    policy's own spelling absent from the node (so the policy never sees it)."""

    node: str
    policy: str  # metadata.name
    plugin: str  # spec.pluginName
    node_key: str
    policy_key: str

    def describe(self) -> str:
        # JSON's quoting: a control character or a look-alike letter shows as an escape.
        return (f"node has label {json.dumps(self.node_key)}, policy wants "
                f"{json.dumps(self.policy_key)}")


def label_case_mismatches(policies: Iterable[LabelKeyPolicy], nodes: Iterable[Node]
                          ) -> list[CaseMismatch]:
    """Each (node, policy, key) where the node has a label key equal to one the policy
    reads but for case, and not the policy's spelling itself; by node, then policy.
    Costs one lookup per node label."""
    wanted: dict[str, list[tuple[LabelKeyPolicy, str]]] = {}
    seen: set[str] = set()
    for p in policies:
        if p.policy_name in seen:  # profiles that load one policy share it
            continue
        seen.add(p.policy_name)
        for key in p.node_label_keys:
            wanted.setdefault(key.lower(), []).append((p, key))
    if not wanted:
        return []
    out: list[CaseMismatch] = []
    for node in nodes:
        labels = node.labels
        for have in labels:
            for p, key in wanted.get(have.lower(), ()):
                if key != have and key not in labels:
                    out.append(CaseMismatch(node.name, p.policy_name, p.name, have, key))
    out.sort(key=lambda m: (m.node, m.policy, m.policy_key))
    return out


@dataclass(frozen=True, slots=True)
class Violation:
    """A filter rule of a policy that rejects the node a bound pod runs on."""

    pod: str  # namespace/name
    node: str
    policy: str  # metadata.name
    plugin: str  # spec.pluginName
    rule: str  # the rule's id
    mode: str  # the policy's mode for the pod (spec.mode, or its namespace's scoped mode)
    message: str  # the rule's rejection message, as the scheduler would say it


@dataclass(frozen=True, slots=True)
class Exemption:
    """A filter rule of a policy a bound pod is exempt from by one of the policy's
    exceptions (the rule was not asked)."""

    pod: str
    node: str
    policy: str
    plugin: str
    rule: str
    exception: str
    reason: str
    expires: str


@dataclass(frozen=True, slots=True)
class SkippedPod:
    """A bound pod that was not audited; `kind` is one of the constants above."""

    pod: str
    node: str
    kind: str
    reason: str


@dataclass(slots=True)
class PolicyChecks:
    """One policy's part of an audit: the bound pods it applies to, each with its node
    (every one was checked; its violations are in the result's `violations`)."""

    policy: str
    plugin: str
    mode: str
    pods: list[tuple[str, str]] = field(default_factory=list)
    # The rule ids asked of each of `pods` (same order): a rule that does not apply to
    # a pod (an annotation it lacks) is not asked, so it neither passes nor fails.
    rules: list[tuple[str, ...]] = field(default_factory=list)


@dataclass(slots=True)
class AuditResult:
    violations: list[Violation]
    skipped: list[SkippedPod]
    checked: int  # bound pods audited (whether or not a policy applies to them)
    policies: list[PolicyChecks]  # every policy that applied to a pod, by name
    # Node label keys that differ from a policy's only by case (set by the caller, who
    # knows every policy; findings, not violations).
    label_case: list[CaseMismatch] = field(default_factory=list)
    # Allocated devices of bound pods that today's allocator would not give them
    # (`policyd.engine.device_audit`, set by the caller).
    devices: list[DeviceFinding] = field(default_factory=list)
    # namespace/name -> metadata.uid of every pod audited (what a report refers to).
    uids: dict[str, str] = field(default_factory=dict)
    # Rules bound pods are exempt from by a policy exception (not asked; no violation).
    exempted: list[Exemption] = field(default_factory=list)

    def violating_pods(self) -> dict[str, int]:
        """metadata.name -> number of distinct pods violating the policy, most first
        (then by name)."""
        pods: dict[str, set[str]] = {}
        for v in self.violations:
            pods.setdefault(v.policy, set()).add(v.pod)
        return dict(sorted(((name, len(keys)) for name, keys in pods.items()),
                           key=lambda kv: (-kv[1], kv[0])))


# Which policies judge a pod: the pod's profile's, or None when the pod is not audited.
PolicyChooser = Callable[[Pod], Sequence[CheckedPolicy] | None]


def by_scheduler(profiles: Mapping[str, Sequence[CheckedPolicy]],
                 others: Sequence[CheckedPolicy] | None = None) -> PolicyChooser:
    """The policies of the profile whose schedulerName the pod names; `others` for a
    pod no profile serves (None: such pods are skipped)."""
    def choose(pod: Pod) -> Sequence[CheckedPolicy] | None:
        return profiles.get(pod.scheduler_name, others)
    return choose


def audit(cluster: ClusterState, pods: Iterable[Pod], choose: PolicyChooser) -> AuditResult:
    """Audit each bound pod of `pods` (pending ones are ignored) on `cluster`, which
    holds them on their nodes and is left exactly as it was."""
    result = AuditResult([], [], 0, [])
    # By metadata.name: profiles that load the same policy file share one entry.
    checks: dict[str, PolicyChecks] = {}
    by_node: dict[str, list[tuple[Pod, Sequence[CheckedPolicy]]]] = {}
    for pod in pods:
        if not pod.node_name:
            continue
        policies = choose(pod)
        skip = _skip(pod, cluster, policies)
        if skip is not None:
            result.skipped.append(skip)
            continue
        assert policies is not None  # _skip says why otherwise
        by_node.setdefault(pod.node_name, []).append((pod, policies))
    for node_name, placed in by_node.items():
        info = cluster.get(node_name)
        assert info is not None  # _skip reported pods whose node is missing
        for pod, policies in placed:
            result.checked += 1
            result.uids[pod.key] = pod.uid
            _audit_pod(cluster, info, pod, policies, checks, result)
    result.policies = sorted(checks.values(), key=lambda c: c.policy)
    result.violations.sort(key=lambda v: (v.policy, v.pod, v.rule))
    return result


def _skip(pod: Pod, cluster: ClusterState,
          policies: Sequence[CheckedPolicy] | None) -> SkippedPod | None:
    if pod.finished:
        return SkippedPod(pod.key, pod.node_name, FINISHED,
                          f"finished (status.phase is {pod.phase})")
    if pod.deleting:
        return SkippedPod(pod.key, pod.node_name, TERMINATING,
                          "being deleted (metadata.deletionTimestamp is set)")
    if cluster.get(pod.node_name) is None:
        return SkippedPod(pod.key, pod.node_name, NODE_MISSING,
                          f"bound to node {pod.node_name}, which is not in the cluster "
                          "read (a node deleted, or a partial snapshot)")
    if policies is None:
        return SkippedPod(pod.key, pod.node_name, NOT_SERVED,
                          f"schedulerName {scheduler_name_words(pod)} is not served by "
                          "the profile")
    return None


def _audit_pod(cluster: ClusterState, info: NodeInfo, pod: Pod,
               policies: Sequence[CheckedPolicy], checks: dict[str, PolicyChecks],
               result: AuditResult) -> None:
    asked: list[tuple[CheckedPolicy, CheckedRule, Callable[[NodeInfo], bool]]] = []
    for policy in policies:
        if not policy.filter_rules or not policy.applies(pod):
            continue
        entry = checks.get(policy.policy_name)
        if entry is None:
            entry = checks[policy.policy_name] = PolicyChecks(policy.policy_name, policy.name,
                                                      policy.mode)
        entry.pods.append((pod.key, info.name))
        ids: list[str] = []
        for rule in policy.filter_rules:
            exempt = policy.exemption(pod, rule.id)
            if exempt is not None:
                result.exempted.append(Exemption(
                    pod.key, info.name, policy.policy_name, policy.name, rule.id,
                    exempt.name, exempt.reason, exempt.expires))
                continue
            check = rule.bind(policy, pod)
            if check is not None:  # None: the rule does not apply to this pod
                asked.append((policy, rule, check))
                ids.append(rule.id)
        entry.rules.append(tuple(ids))
    if not asked:
        return
    # The node as the scheduler saw it before placing the pod: every other pod on it.
    # The record in the state is the one removed, whatever copy `pod` is.
    with cluster.what_if(remove=[pod]):
        failed = [(policy, rule) for policy, rule, check in asked if not check(info)]
    result.violations.extend(
        Violation(pod.key, info.name, policy.policy_name, policy.name, rule.id,
                  policy.mode_for(pod), rule.message)
        for policy, rule in failed)
