"""Which of a pod's policy rules kube-scheduler, and so an autoscaler, can see.

cluster-autoscaler and Karpenter decide whether a new node would take a pending pod by
simulating kube-scheduler's constraints on the pod (resources, nodeSelector, node
affinity, tolerations, spread); a policyd policy is invisible to them. Each filter
rule of an Enforce-mode policy that applies to the pod says what it means in those
constraints (`FilterRule.project`): node label rules become NodeSelectorRequirements
for the pod's required node affinity; the rest (headroom, metrics, JMESPath, CEL, a
node's pod count) say why no constraint expresses them. Audit-mode policies filter
nothing, so there is nothing to project.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from policyd.model.records import Pod
from policyd.policy.policy_schema import ENFORCE
from policyd.policy.rules.base import Projection


class ProjectedRule(Protocol):
    @property
    def id(self) -> str: ...

    def project(self, pod: Pod) -> Projection | None: ...


class ProjectedPolicy(Protocol):
    """A compiled policy as the projection reads it (`CompiledPolicy` is one)."""

    @property
    def policy_name(self) -> str: ...  # metadata.name

    @property
    def filter_rules(self) -> Sequence[ProjectedRule]: ...

    def applies(self, pod: Pod) -> bool: ...

    def mode_for(self, pod: Pod) -> str: ...  # spec.mode, or the namespace's scoped mode

    def exemption(self, pod: Pod, rule_id: str) -> object | None: ...


@dataclass(frozen=True, slots=True)
class RuleProjection:
    """One rule of one policy for one pod: its requirements, or why it has none."""

    policy: str  # metadata.name
    rule: str  # the rule's id
    requirements: tuple[Mapping[str, Any], ...]
    invisible: str  # "" when projected

    @property
    def name(self) -> str:
        return f"{self.policy}/{self.rule}"


def project_pod(pod: Pod, policies: Iterable[ProjectedPolicy]) -> list[RuleProjection]:
    """Each active filter rule of each policy that applies to `pod` in Enforce mode for
    its namespace, in the profile's order (a policy loaded twice counts once); a rule an
    exception exempts the pod from is not active."""
    out: list[RuleProjection] = []
    seen: set[str] = set()
    for policy in policies:
        if policy.policy_name in seen or not policy.applies(pod) \
                or policy.mode_for(pod) != ENFORCE:
            continue
        seen.add(policy.policy_name)
        for rule in policy.filter_rules:
            if policy.exemption(pod, rule.id) is not None:
                continue
            projection = rule.project(pod)
            if projection is not None:
                out.append(RuleProjection(policy.policy_name, rule.id,
                                          projection.requirements, projection.invisible))
    return out
