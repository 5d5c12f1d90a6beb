"""The cluster events that can make a pod a compiled policy rejected schedulable,
derived once, when the policy is compiled, from what its filter rules read
(a policy's answer to upstream's EnqueueExtensions.EventsToRegister).

| rule reads                                   | events                                 |
|----------------------------------------------|----------------------------------------|
| node labels (nodeLabels, annotationToNodeLabel) | Node Add, UpdateNodeLabel           |
| node allocatable (requireExtendedResource)   | Node Add, UpdateNodeAllocatable        |
| free room on the node (headroom)             | the above, and a bound pod deleted or  |
|                                              | scaled down (Pod Delete, ScaleDown)    |
| pods on the node (maxPodsPerNode)            | Node Add; a bound pod deleted, or      |
|                                              | updated out of the policy's appliesTo  |
| JMESPath or CEL over the node                | Node Add, any Node update              |
| the pod (annotations, JMESPath or CEL over   | the pod's own update                   |
| the pod,                                     |                                        |
| appliesTo selectors and condition, requests) |                                        |

Each filter rule kind declares its row in its own module (`events`, under
policyd/policy/rules/filters/) from the events and hints here. Score rules never
reject, so they register nothing. Each node hint binds the rule to the pending pod and
checks the changed node alone (an empty node, as upstream's NodeResourcesFit hint
does): Queue when it passes now and did not before.
"""

from __future__ import annotations

from typing import Any

from policyd.framework.events import (
    NODE,
    POD,
    QUEUE,
    QUEUE_SKIP,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    HintFn,
    QueueingHint,
    queue_if_assigned_deleted,
    queue_if_self,
)
from policyd.model.node_info import NodeInfo
from policyd.model.records import Node, Pod
from policyd.model.resources import pod_requests
from policyd.policy.rules.base import FilterRule, RulePolicy

NODE_LABELS = ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)
NODE_ALLOCATABLE = ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE)
NODE_ANY = ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE)
NODE_ADDED = ClusterEvent(NODE, ActionType.ADD)
POD_FREED = ClusterEvent(POD, ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN)
POD_COUNTED = ClusterEvent(POD, ActionType.DELETE | ActionType.UPDATE)
POD_OWN_UPDATE = ClusterEvent(POD, ActionType.UPDATE)


def policy_events(policy: RulePolicy) -> tuple[ClusterEventWithHint, ...]:
    """Each filter rule's events (`FilterRule.events`), in rule order, and the pod's own
    update when something the rules or appliesTo read of the pod can change."""
    out: list[ClusterEventWithHint] = []
    applies = policy.applies_to
    reads_pod = (applies.labels is not None or applies.annotations is not None
                 or applies.condition is not None)
    for rule in policy.filter_rules:
        out.extend(rule.events(policy))
        reads_pod = reads_pod or rule.reads_pod
    if out and reads_pod:
        out.append(ClusterEventWithHint(POD_OWN_UPDATE, queue_if_self))
    return tuple(out)


def node_hint(policy: RulePolicy, rule: FilterRule) -> HintFn:
    def hint(pod: Pod, old: Any, new: Any) -> QueueingHint:
        if not isinstance(new, Node):
            return QUEUE_SKIP
        check = rule.bind(policy, pod)
        if check is None or not check(NodeInfo(new)):
            return QUEUE_SKIP  # inactive for this pod, or the node still fails
        if isinstance(old, Node) and check(NodeInfo(old)):
            return QUEUE_SKIP  # it passed before too: the change is not what helps
        return QUEUE
    return hint


def freed_hint(resource: str) -> HintFn:
    """A bound pod deleted, or scaled down in `resource`, leaves more room."""
    def hint(pod: Pod, old: Any, new: Any) -> QueueingHint:
        if new is None:
            return queue_if_assigned_deleted(pod, old, new)
        if not isinstance(old, Pod) or not isinstance(new, Pod):
            return QUEUE
        if new.uid == pod.uid:
            return QUEUE
        if not new.node_name or resource == "pods":
            return QUEUE_SKIP
        # As the node counts it: a resize the kubelet carried out (status) frees room
        # too (read with v1.36's default gates: compiled policies are built without any).
        before = pod_requests(old, use_status=True).get(resource, 0)
        after = pod_requests(new, use_status=True).get(resource, 0)
        return QUEUE if before > after else QUEUE_SKIP
    return hint


def uncounted_hint(policy: RulePolicy) -> HintFn:
    """A bound pod the policy counted is deleted, or updated so it no longer counts."""
    def hint(pod: Pod, old: Any, new: Any) -> QueueingHint:
        if not isinstance(old, Pod) or not old.node_name or old.uid == pod.uid:
            return QUEUE_SKIP
        if not policy.applies(old):
            return QUEUE_SKIP
        if new is None:
            return QUEUE
        return QUEUE if isinstance(new, Pod) and not policy.applies(new) else QUEUE_SKIP
    return hint
