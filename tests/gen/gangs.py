"""Seeded gang cases for the differential test against kube-scheduler (issue 30): a few
nodes, then steps run one after another: pod groups of scheduling.k8s.io/v1alpha2
(gangs whose minCount is their size or less, and basic-policy groups) with per-pod CPU
and memory requests, and plain pods between them, all competing for the same nodes.

A case is a pure function of (seed, index); the prefix and the scheduler name only
name things, so the same case is built twice, once for each scheduler, under two
prefixes (`gen_gang_case(seed, i, prefix, scheduler)`), and both copies share the API
server at once without seeing each other:

- node names carry the prefix, every node has `CASE_LABEL=<prefix>` and every pod
  selects it (nodeSelector); each copy has its own namespace (the prefix), where its
  PodGroups live;
- no pod (anti-)affinity or spreading: nothing reads another copy's pods.

Why steps and priorities (the comparison needs one order, and kube-scheduler has one
only if the case gives it):
- a group's PodGroup is created after all its members (the runner waits until both
  schedulers have seen them): GangScheduling's PreEnqueue holds the members until the
  PodGroup exists, so the group is tried whole, never a first quorum of a larger group;
- kube-scheduler orders a group's members by priority, then by the moment each was
  first moved to its active queue, which for members released together by one
  PodGroup event is the iteration order of a map. Members therefore get distinct
  priorities (`ORDER_CLASSES`, descending with the member index), so both schedulers
  try them in creation order. The classes say `preemptionPolicy: Never`: a member
  never preempts a plain pod (policyd does not preempt for a gang's members, and
  upstream's v1.36 gang cycle would; issue 30 says so), and both write DefaultPreemption's
  "not eligible" text instead;
- groups and plain pods are steps: the runner lets one settle before creating the
  next, since which of two gangs pending at once goes first is the order of two
  watches' events, not the case's.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from tests.gen.clusters import HOSTNAME
from tests.gen.differential import CASE_LABEL

WORKLOAD_API = "scheduling.k8s.io/v1alpha2"
# Members get ORDER_CLASSES[k] for their index k: ORDER_TOP - k, preemptionPolicy Never.
MAX_GROUP = 7
ORDER_TOP = 1000
ORDER_CLASSES = tuple(f"gang-order-{k}" for k in range(MAX_GROUP))
# Kinds of group (GangCase.notes and the tally): a gang whose minCount is its size, a
# gang that needs fewer than all, a basic-policy group (no quorum).
GANG_ALL = "gang minCount=size"
GANG_PART = "gang minCount<size"
BASIC = "basic"
GROUP_KINDS = (GANG_ALL, GANG_PART, BASIC)

_NODE_CPU = ("2", "4", "4", "6", "8")
_NODE_MEMORY = ("4Gi", "8Gi", "8Gi", "16Gi")
_POD_CPU = ("500m", "1", "1", "1500m", "2", "3")
_POD_MEMORY = ("256Mi", "512Mi", "1Gi", "1Gi", "2Gi", "3Gi")


def priority_classes() -> list[dict[str, Any]]:
    """The PriorityClasses the members use (cluster-scoped, created once)."""
    return [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
             "metadata": {"name": name}, "value": ORDER_TOP - k,
             "preemptionPolicy": "Never",
             "description": "policyd gang differential: member order in a group"}
            for k, name in enumerate(ORDER_CLASSES)]


@dataclass
class Step:
    """Pods created together and left to settle: one group's members (then its
    PodGroup), or plain pods (no group)."""

    pods: list[dict[str, Any]]
    group: dict[str, Any] | None = None  # the PodGroup, created after the members
    kind: str = ""  # a GROUP_KINDS entry for a group

    @property
    def group_name(self) -> str | None:
        return self.group["metadata"]["name"] if self.group is not None else None


@dataclass
class GangCase:
    seed: int
    index: int
    prefix: str
    scheduler: str
    namespace: str
    nodes: list[dict[str, Any]]
    steps: list[Step]
    notes: list[str] = field(default_factory=list)

    # What `tests.integration.differential.runner.Scene` reads: the runner's put_scenes
    # and cleanup serve these cases too. No pod exists before the steps, no workload.
    @property
    def namespaces(self) -> dict[str, dict[str, str]]:
        return {self.namespace: {CASE_LABEL: self.prefix}}

    @property
    def pods(self) -> list[dict[str, Any]]:
        return []

    @property
    def workloads(self) -> list[dict[str, Any]]:
        return []

    @property
    def node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.nodes]

    def pod_names(self) -> list[str]:
        return [p["metadata"]["name"] for s in self.steps for p in s.pods]


def gen_gang_case(seed: int, index: int, prefix: str, scheduler: str) -> GangCase:
    rng = random.Random(f"gangs/{seed}/{index}")
    nodes = [_node(f"{prefix}-n{i}", prefix, rng.choice(_NODE_CPU), rng.choice(_NODE_MEMORY))
             for i in range(rng.randint(2, 4))]
    steps: list[Step] = []
    notes = [f"{len(nodes)} nodes"]
    for g in range(rng.randint(1, 3)):
        if rng.random() < 0.35:
            plain = [_pod(f"p{g}-{k}", prefix, scheduler, *_requests(rng))
                     for k in range(rng.randint(1, 2))]
            steps.append(Step(plain))
            notes.append(f"{len(plain)} plain")
        size = rng.randint(1, MAX_GROUP - 1)
        roll = rng.random()
        policy: dict[str, Any]
        if roll < 0.25:
            kind, policy = BASIC, {"basic": {}}
        elif roll < 0.6 and size > 1:
            kind = GANG_PART
            policy = {"gang": {"minCount": rng.randint(1, size - 1)}}
        else:
            kind, policy = GANG_ALL, {"gang": {"minCount": size}}
        uniform = _requests(rng) if rng.random() < 0.5 else None
        name = f"g{g}"
        members = [_pod(f"{name}-{k}", prefix, scheduler, *(uniform or _requests(rng)),
                        group=name, order=k) for k in range(size)]
        group = {"apiVersion": WORKLOAD_API, "kind": "PodGroup",
                 "metadata": {"name": name, "namespace": prefix},
                 "spec": {"schedulingPolicy": policy}}
        steps.append(Step(members, group, kind))
        notes.append(f"{name}: {size} pods, {kind}"
                     + (f" {policy['gang']['minCount']}" if kind == GANG_PART else "")
                     + (", uniform" if uniform else ""))
    return GangCase(seed, index, prefix, scheduler, prefix, nodes, steps, notes)


def _requests(rng: random.Random) -> tuple[str, str]:
    return rng.choice(_POD_CPU), rng.choice(_POD_MEMORY)


def _node(name: str, prefix: str, cpu: str, memory: str) -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": memory, "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {HOSTNAME: name, CASE_LABEL: prefix}},
            "status": {"allocatable": resources, "capacity": dict(resources)}}


def _pod(name: str, prefix: str, scheduler: str, cpu: str, memory: str, *,
         group: str | None = None, order: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler, "nodeSelector": {CASE_LABEL: prefix},
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "image": "registry/app:1",
                        "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if group is not None:
        spec["schedulingGroup"] = {"podGroupName": group}
    if order is not None:
        spec["priorityClassName"] = ORDER_CLASSES[order]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": prefix}, "spec": spec}
