"""Queueing hints of the two plugins that look at other pods: InterPodAffinity and
PodTopologySpread (upstream's isSchedulableAfterPodChange / isSchedulableAfterNodeChange
of each, v1.36). Plain functions of (pending pod, old, new), so they are tested
without a cluster.

Only bound pods count: a pod that is not on a node is in no node's pod list, so its
add, relabel or delete changes nothing for either plugin (policyd has no preemption,
hence no nominated pods).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from policyd.framework.events import QUEUE, QUEUE_SKIP, QueueingHint, is_self
from policyd.framework.status import Status
from policyd.model.records import Node, Pod
from policyd.plugins.interpodaffinity.terms import AffinityTerm, pod_affinity_terms
from policyd.plugins.podtopologyspread.constraints import Constraint, pod_constraints


def _matches_all(terms: Sequence[AffinityTerm], pod: Pod) -> bool:
    """podMatchesAllAffinityTerms: namespaceSelector terms are judged without namespace
    labels, as upstream's hint does."""
    return bool(terms) and all(t.matches(pod, None) for t in terms)


def affinity_after_pod_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    modified = new if isinstance(new, Pod) else None
    original = old if isinstance(old, Pod) else None
    if modified is not None and original is not None and is_self(pod, modified):
        return QUEUE  # the pending pod's own labels changed
    if (modified is not None and not modified.node_name) or (
            original is not None and not original.node_name):
        return QUEUE_SKIP
    terms = pod_affinity_terms(pod)
    affinity, anti = terms.required_affinity, terms.required_anti_affinity
    if modified is not None and original is not None:  # a bound pod relabelled
        if not _matches_all(affinity, original) and _matches_all(affinity, modified):
            return QUEUE
        if _matches_all(anti, original) and not _matches_all(anti, modified):
            return QUEUE
        return QUEUE_SKIP
    if modified is not None:  # a bound pod added: may be the peer the pod waits for
        return QUEUE if _matches_all(affinity, modified) else QUEUE_SKIP
    if original is None:
        return QUEUE_SKIP
    # A bound pod deleted: it may have been what the pod's anti-affinity avoided, or a
    # pod whose own anti-affinity kept this one away.
    if _matches_all(anti, original):
        return QUEUE
    theirs = pod_affinity_terms(original).required_anti_affinity
    return QUEUE if _matches_all(theirs, pod) else QUEUE_SKIP


def affinity_after_node_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    if not isinstance(new, Node):
        return QUEUE_SKIP
    original = old if isinstance(old, Node) else None
    terms = pod_affinity_terms(pod)
    for t in terms.required_affinity:
        key = t.topology_key
        if original is None:
            if key in new.labels:
                return QUEUE
            continue
        if key in new.labels and original.labels.get(key) != new.labels[key]:
            return QUEUE  # the key appeared, or its value changed
    for t in terms.required_anti_affinity:
        if original is None:
            return QUEUE
        key = t.topology_key
        if key in original.labels and original.labels.get(key) != new.labels.get(key):
            return QUEUE  # the key went away, or its value changed
    return QUEUE_SKIP


def _hard_constraints(pod: Pod) -> tuple[Constraint, ...] | None:
    """The pod's own DoNotSchedule constraints; None when they come from the profile's
    defaults (their selector needs the workloads, which a hint does not see)."""
    if not pod.topology_spread_constraints:
        return None
    own = pod_constraints(pod)
    return () if isinstance(own, Status) else own[0]


def _involved(changed: Pod, pod: Pod) -> bool:
    if changed.uid == pod.uid:
        return True
    return bool(changed.node_name) and changed.namespace == pod.namespace


def spread_after_pod_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    modified = new if isinstance(new, Pod) else None
    original = old if isinstance(old, Pod) else None
    if (modified is not None and not _involved(modified, pod)) or (
            original is not None and not _involved(original, pod)):
        return QUEUE_SKIP
    constraints = _hard_constraints(pod)
    if constraints is None:
        return QUEUE
    if modified is not None and original is not None:
        if (is_self(pod, modified) and modified.tolerations != original.tolerations
                and any(c.honor_node_taints for c in constraints)):
            return QUEUE
        if modified.labels == original.labels:
            return QUEUE_SKIP
        for c in constraints:
            if c.selector.matches(original.labels) != c.selector.matches(modified.labels):
                return QUEUE
        return QUEUE_SKIP
    changed = modified if modified is not None else original
    if changed is None:
        return QUEUE_SKIP
    return QUEUE if any(c.selector.matches(changed.labels) for c in constraints) \
        else QUEUE_SKIP


def _has_keys(node: Node, constraints: Sequence[Constraint]) -> bool:
    return all(c.topology_key in node.labels for c in constraints)


def spread_after_node_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    constraints = _hard_constraints(pod)
    if constraints is None:
        return QUEUE
    original = old if isinstance(old, Node) else None
    modified = new if isinstance(new, Node) else None
    was = original is not None and _has_keys(original, constraints)
    now = modified is not None and _has_keys(modified, constraints)
    if original is not None and modified is not None:
        if was != now:
            return QUEUE
        if now and (any(original.labels.get(c.topology_key) != modified.labels.get(
                c.topology_key) for c in constraints) or original.taints != modified.taints):
            return QUEUE
        return QUEUE_SKIP
    if modified is not None:
        return QUEUE if now else QUEUE_SKIP
    return QUEUE if was else QUEUE_SKIP
