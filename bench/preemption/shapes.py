"""What the preemption benchmark schedules: every node full of low-priority pods, and
high-priority preemptors that each need one of them gone.

Nodes are the e2e bench's (4 cpu, 32Gi, 110 pods, three zones). Each holds
FILLERS_PER_NODE fillers of 1 cpu each, so a preemptor (1 cpu) fits nowhere and every
node is a candidate with exactly one victim. Two shapes:
- `uniform`: fillers without affinity (only NodeResourcesFit has work);
- `affinity`: every filler carries a required hostname anti-affinity term and a
  preferred zone affinity term (thousands of pods with terms: InterPodAffinity's
  per-term counts are what the dry runs keep up to date), and the preemptor a required
  hostname anti-affinity term no pod matches, so InterPodAffinity's PreFilter and
  Filter run for it instead of skipping.
Terms select labels no preemptor carries, so they never reject a node by themselves.
"""

from __future__ import annotations

from typing import Any

from bench.e2e.shapes import HOSTNAME_LABEL, NAMESPACE, SCHEDULER_NAME, ZONE_LABEL, node_body

SHAPES = ("uniform", "affinity")
FILLERS_PER_NODE = 4
LOW_CLASS = "bench-preemption-low"
HIGH_CLASS = "bench-preemption-high"
LOW_PRIORITY = 100
HIGH_PRIORITY = 10_000
# Distinct filler term selectors: many distinct terms, as a real cluster's workloads.
TERM_GROUPS = 50
IMAGE = "registry.k8s.io/pause:3.10"

Obj = dict[str, Any]

__all__ = ["node_body"]


def _term(labels: dict[str, str], key: str) -> Obj:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key}


def filler_body(i: int, node: str, shape: str) -> Obj:
    group = f"g{i % TERM_GROUPS}"
    spec: Obj = {
        "schedulerName": SCHEDULER_NAME, "terminationGracePeriodSeconds": 0,
        "nodeName": node, "priorityClassName": LOW_CLASS, "priority": LOW_PRIORITY,
        "containers": [{"name": "c", "image": IMAGE,
                        "resources": {"requests": {"cpu": "1", "memory": "500Mi"}}}]}
    if shape == "affinity":
        spec["affinity"] = {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                _term({"avoid": group}, HOSTNAME_LABEL)]},
            "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "podAffinityTerm": _term({"group": group}, ZONE_LABEL)}]}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"filler-{i}", "namespace": NAMESPACE,
                         "labels": {"app": "filler", "group": group}},
            "spec": spec}


def preemptor_body(name: str, shape: str) -> Obj:
    spec: Obj = {
        "schedulerName": SCHEDULER_NAME, "terminationGracePeriodSeconds": 0,
        "priorityClassName": HIGH_CLASS, "priority": HIGH_PRIORITY,
        "containers": [{"name": "c", "image": IMAGE,
                        "resources": {"requests": {"cpu": "1", "memory": "500Mi"}}}]}
    if shape == "affinity":
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            _term({"app": "nothing-has-this"}, HOSTNAME_LABEL)]}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE,
                         "labels": {"app": "preemptor"}},
            "spec": spec}


def priority_class_bodies() -> list[Obj]:
    return [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
             "metadata": {"name": name}, "value": value}
            for name, value in ((LOW_CLASS, LOW_PRIORITY), (HIGH_CLASS, HIGH_PRIORITY))]


def for_api(body: Obj) -> Obj:
    """The body as created through the API: `priority` is the admission plugin's to set
    from the class (a client may not set it to another value)."""
    spec = {k: v for k, v in body["spec"].items() if k != "priority"}
    return {**body, "spec": spec}
