"""Small clusters for the preemption tests: nodes, pods with priorities and start
times, and one PostFilter call on a real default-profile Framework."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policyd.config.plugins import default_framework
from policyd.framework.cycle_state import CycleState
from policyd.framework.fit_error import Diagnosis
from policyd.framework.interfaces import PostFilterResult
from policyd.framework.runtime import Framework
from policyd.framework.status import Status
from policyd.model.cluster import ClusterState
from policyd.model.records import Node, Pod
from policyd.plugins.defaultpreemption.plugin import PreemptionReport, new, preemption_report
from tests.builders import PodBuilder, make_node, make_pod

LOW, MID, HIGH, VERY_HIGH = 0, 100, 1000, 10000


def node(name: str, cpu: str = "4", pods: str = "110") -> Node:
    return make_node(name).capacity(cpu=cpu, memory="16Gi", pods=pods).obj()


def one_pod_node(name: str) -> Node:
    """Room for exactly one pod and no resources (upstream's onePodRes nodes)."""
    return make_node(name).capacity(pods="1").obj()


def running(name: str, node_name: str, priority: int, cpu: str = "",
            started: str = "2026-01-01T00:00:00Z", namespace: str = "default",
            **labels: str) -> Pod:
    b = make_pod(name, namespace).node(node_name).priority(priority).phase("Running")
    b.set("status.startTime", started)
    if cpu:
        b.req(cpu=cpu)
    if labels:
        b.labels(labels)
    return b.obj()


def pending(name: str, priority: int, cpu: str = "") -> PodBuilder:
    b = make_pod(name).priority(priority)
    return b.req(cpu=cpu) if cpu else b


def budget(name: str, allowed: int, namespace: str = "default",
           disrupted: Sequence[str] = (), **labels: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": labels}},
            "status": {"disruptionsAllowed": allowed,
                       "disruptedPods": {p: "2026-01-01T00:00:00Z" for p in disrupted}}}


def cluster_of(nodes: Sequence[Node], pods: Sequence[Pod] = (),
               budgets: Sequence[dict[str, Any]] = ()) -> ClusterState:
    cluster = ClusterState(nodes, pods)
    for b in budgets:
        cluster.disruption_budgets.upsert("PodDisruptionBudget", b)
    return cluster


def framework(seed: int = 0) -> Framework:
    """kube-scheduler's default profile (policyd's plugins), seeded."""
    return default_framework(seed=seed)


def cycle_state(cluster: ClusterState, fw: Framework) -> CycleState:
    state = CycleState(cluster.node_infos(), cluster)
    state.framework = fw
    return state


def post_filter(cluster: ClusterState, pod: Pod, statuses: Mapping[str, Status],
                absent: Status | None = None, args: Mapping[str, Any] | None = None,
                fw: Framework | None = None
                ) -> tuple[PostFilterResult | None, Status, PreemptionReport | None]:
    """DefaultPreemption's PostFilter after filters that left `statuses` (node ->
    status; every other node gets `absent`, by default UnschedulableAndUnresolvable)."""
    state = cycle_state(cluster, fw or framework())
    diagnosis = Diagnosis(node_to_status=dict(statuses), absent_nodes_status=absent)
    result, status = new(args).post_filter(state, pod, diagnosis)
    return result, status, preemption_report(state)


def names(pods: Sequence[Pod]) -> list[str]:
    return [p.name for p in pods]
