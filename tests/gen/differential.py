"""Seeded cases for the differential test against kube-scheduler: a few nodes, pods
already bound to them, and one pod to place.

Every case is a pure function of (seed, index) and a name prefix, so a failure found
in a run of thousands can be replayed alone. Cases are built to share one API server
with other cases at the same time without influencing them:

- node names, namespace names and topology values (zones, racks) carry the prefix;
- every node has the label `CASE_LABEL=<prefix>` and the pod under test selects it
  through `nodeSelector` (ANDed with whatever node affinity the case has), so other
  cases' nodes fail NodeAffinity (or an earlier filter) for it;
- pod (anti-)affinity and topology spread select pods in the case's own namespaces
  only (namespaceSelectors always include the case label).

Other cases' nodes still show up in the FailedScheduling message ("0/N nodes"), and a
spread constraint with nodeAffinityPolicy Ignore counts their (empty) domains, which is
why the test reads the whole batch back for policyd instead of the case alone; a case
replayed alone gives the same verdict with other counts.

The objects come from `tests.gen.clusters` (the project's one random cluster
generator, which describes the mix); this module adds what isolates a case and what
both schedulers must agree on.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field, replace
from typing import Any

from policyd.model.quantity import nano_value
from tests.gen.clusters import (
    HOSTNAME,
    MIXES,
    ROOMY,
    Mix,
    Names,
    Vocabulary,
    gen_node,
    gen_pod_dict,
    gen_workloads,
)

CASE_LABEL = "diff.policyd.io/case"
UNDER_TEST_LABEL = "diff.policyd.io/under-test"
# UNDER_TEST_LABEL's value on the queued pods of sequence cases ("true" on single pods).
SEQUENCE = "sequence"
# The comparison's kube-scheduler profile: not default-scheduler, so that pods other
# tests leave pending on the shared control plane never land on these nodes.
SCHEDULER_NAME = "policyd-differential"
# Keeps a deleted pod around, terminating, until the runner removes it.
HOLD_FINALIZER = "diff.policyd.io/hold"
# Every mix, and the roomy one four times more, on four to twelve nodes: most pods of
# the other mixes fail an early filter, and a case is score-compared only when two or
# more nodes fit (about 40% of cases here against 35% with two roomy and a fifth with
# MIXES on 2-9 nodes), while about 45% stay unschedulable for the FailedScheduling
# comparison.
CASE_MIXES = (*MIXES, ROOMY, ROOMY, ROOMY, ROOMY)


@dataclass
class Case:
    """One cluster plus one pod to place. `namespaces` maps name -> labels."""

    seed: int
    index: int
    prefix: str
    namespaces: dict[str, dict[str, str]]
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    pod: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    # Services and ReplicaSets: the selectors of PodTopologySpread's default constraints.
    workloads: list[dict[str, Any]] = field(default_factory=list)
    # Volume cases (`tests.gen.volumes`): StorageClasses, PVs, claims and CSINodes in
    # creation order; the claims (`namespace/name`) the PV controller must have bound
    # before the pod under test is created; what the case exercises.
    storage: list[dict[str, Any]] = field(default_factory=list)
    bind_first: list[str] = field(default_factory=list)
    volume_kinds: tuple[str, ...] = ()
    # The same scene under another prefix, its pod for the `policyd run` daemon: a
    # volume case's own claims are bound by kube-scheduler's decision, so the daemon
    # gets a copy of the scene rather than the scene after it (`Runner.run_batch`).
    twin: Case | None = None

    @property
    def node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.nodes]


def gen_case(seed: int, index: int, prefix: str) -> Case:
    """The case number `index` of the run with `seed`; names start with `prefix`
    (a DNS label: lower case letters, digits and dashes)."""
    rng = random.Random(f"{seed}/{index}")
    return gen_scene(rng, seed, index, prefix, rng.choice(CASE_MIXES))


def gen_scene(rng: random.Random, seed: int, index: int, prefix: str, mix: Mix, *,
              vocabulary: Vocabulary | None = None,
              node_vocabulary: Vocabulary | None = None) -> Case:
    """A case drawn from `rng` with `mix`, isolated under `prefix` as the module says;
    `vocabulary` adds a test's own names to every pod (existing ones and the pod under
    test), `node_vocabulary` to every node (`tests.gen.clusters.Vocabulary`). Without
    them it is exactly `gen_case`'s case, which is this with the mix drawn first."""
    zones = [f"{prefix}-z{z}" for z in "abc"]
    racks = [f"{prefix}-R{r}" for r in "12"]
    n_nodes = rng.randint(4, 12)
    zones = zones[: rng.randint(1, 3)]
    namespaces = {f"{prefix}-a": {CASE_LABEL: prefix, "team": "a"},
                  f"{prefix}-b": {CASE_LABEL: prefix, "team": "b"}}
    ns_names = list(namespaces)
    names = Names(zones=zones, racks=racks, namespaces=ns_names,
                  namespace_labels={CASE_LABEL: prefix})
    nodes = [gen_node(rng, f"{prefix}-n{i}", names, mix,
                      labels={HOSTNAME: f"{prefix}-n{i}", CASE_LABEL: prefix},
                      vocabulary=node_vocabulary)
             for i in range(n_nodes)]
    names = replace(names, nodes=[n["metadata"]["name"] for n in nodes])
    home = rng.choice(ns_names)
    pods = [_held_while_terminating(gen_pod_dict(
                rng, f"p{i}", home if rng.random() < mix.same_namespace
                else rng.choice(ns_names), names, mix, bound_to=rng.choice(names.nodes),
                vocabulary=vocabulary))
            for i in range(rng.randint(0, mix.existing_per_node * n_nodes))]
    pod = isolated(gen_pod_dict(rng, "under-test", home, names, mix, vocabulary=vocabulary),
                   prefix)
    _drop_shared_ports_of_finished(pods)
    for existing in pods:
        if not existing["status"].get("phase") and rng.random() < RESIZING:
            resize_in_place(rng, existing)
    workloads = gen_workloads(rng, home, mix, [*pods, pod])
    pod["metadata"]["labels"][UNDER_TEST_LABEL] = "true"
    return Case(seed, index, prefix, namespaces, nodes, pods, pod, notes=[f"mix {mix.name}"],
                workloads=workloads)


# Sequence cases: pods queued together for a scheduler that starts only once they all
# exist, so both schedulers order them (PrioritySort) and carry each placement into
# the next decision. The classes' values, by name; every queued pod has one ("diff-zero"
# stands for no priority), and every class says preemptionPolicy: Never: a preemption
# in the middle of a sequence would change what the later pods see in a way the
# sequence comparison does not replay (preemption has cases of its own).
SEQUENCE_SCHEDULER_NAME = "policyd-differential-queue"
PRIORITY_CLASSES = {"diff-low": -10, "diff-zero": 0, "diff-mid": 100, "diff-high": 1000}
# Mostly clean, roomy nodes: a pod every node rejects for a taint or a label teaches
# nothing about order; one mix in three is a general one.
SEQUENCE_MIXES = (
    Mix("queue", taints=0.1, roomy=True, spread=0.3, affinity=0.2, existing_per_node=2,
        apps=2, same_namespace=0.5),
    Mix("queue", taints=0.1, roomy=True, spread=0.3, affinity=0.2, existing_per_node=2,
        apps=2, same_namespace=0.5),
    *MIXES[2:],
)
# A pod's share of a node when the generator makes it big, by node size (`Mix.roomy`):
# a few such pods fill the nodes, so who goes first decides who fits.
_BIG_CPU = {True: ("3", "5", "7"), False: ("700m", "1", "1500m")}


@dataclass
class SequenceCase:
    """One cluster plus pods to queue together (`queue`)."""

    seed: int
    index: int
    prefix: str
    namespaces: dict[str, dict[str, str]]
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    queue: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    workloads: list[dict[str, Any]] = field(default_factory=list)

    @property
    def node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.nodes]


def gen_sequence_case(seed: int, index: int, prefix: str) -> SequenceCase:
    """The sequence case number `index` of the run with `seed` (isolated from other
    cases exactly as `gen_case`'s are).

    Two to five nodes and three to eight pods in one namespace, most of them big and
    free of node selection, with priorities (through PRIORITY_CLASSES) that tend to
    rise along the queue: the pod named last is often the one PrioritySort tries first
    and the one that takes the last space."""
    rng = random.Random(f"{seed}/sequence/{index}")
    mix = rng.choice(SEQUENCE_MIXES)
    zones = [f"{prefix}-z{z}" for z in "abc"][: rng.randint(1, 3)]
    racks = [f"{prefix}-R{r}" for r in "12"]
    namespaces = {f"{prefix}-a": {CASE_LABEL: prefix, "team": "a"},
                  f"{prefix}-b": {CASE_LABEL: prefix, "team": "b"}}
    ns_names = list(namespaces)
    names = Names(zones=zones, racks=racks, namespaces=ns_names,
                  namespace_labels={CASE_LABEL: prefix})
    n_nodes = rng.randint(2, 5)
    nodes = [gen_node(rng, f"{prefix}-n{i}", names, mix,
                      labels={HOSTNAME: f"{prefix}-n{i}", CASE_LABEL: prefix})
             for i in range(n_nodes)]
    names = replace(names, nodes=[n["metadata"]["name"] for n in nodes])
    home = rng.choice(ns_names)
    pods = [_held_while_terminating(gen_pod_dict(
                rng, f"p{i}", home if rng.random() < mix.same_namespace
                else rng.choice(ns_names), names, mix, bound_to=rng.choice(names.nodes)))
            for i in range(rng.randint(0, mix.existing_per_node * n_nodes // 2))]
    _drop_shared_ports_of_finished(pods)
    n_queue = rng.randint(3, 8)
    queue = []
    for i in range(n_queue):
        pod = gen_pod_dict(rng, f"s{i:02d}", home, names, mix)
        if rng.random() < 0.7:
            # Most pods could go anywhere: then only the others and the space left decide.
            pod["spec"].pop("nodeSelector", None)
            pod["spec"].get("affinity", {}).pop("nodeAffinity", None)
        pod = isolated(pod, prefix, SEQUENCE_SCHEDULER_NAME)
        if rng.random() < 0.7:
            _enlarge(pod, rng.choice(_BIG_CPU[mix.roomy]))
        if rng.random() < 0.2 + 0.6 * i / (n_queue - 1):
            pod["spec"]["priorityClassName"] = rng.choice(
                sorted(c for c in PRIORITY_CLASSES if c != "diff-zero"))
        else:
            pod["spec"]["priorityClassName"] = "diff-zero"
        pod["metadata"]["labels"][UNDER_TEST_LABEL] = SEQUENCE
        queue.append(pod)
    workloads = gen_workloads(rng, home, mix, [*pods, *queue])
    return SequenceCase(seed, index, prefix, namespaces, nodes, pods, queue,
                        notes=[f"mix {mix.name}", "sequence"], workloads=workloads)


def _enlarge(pod: dict[str, Any], cpu: str) -> None:
    """Make `pod` request `cpu` (pod-level requests if it has them, else its first
    container's, as limits when that container has only limits)."""
    spec = pod["spec"]
    if "resources" in spec:
        spec["resources"]["requests"]["cpu"] = cpu
        return
    resources = spec["containers"][0].setdefault("resources", {})
    kind = "limits" if "limits" in resources and "requests" not in resources else "requests"
    resources.setdefault(kind, {})["cpu"] = cpu


# The share of running bound pods that are caught in an in-place resize: their status
# (written through pods/status, as the kubelet would) says what they run with and what is
# allocated, at container level, at pod level (InPlacePodLevelResourcesVerticalScaling)
# or both, and how the resize stands. kube-scheduler counts such a pod by the larger of
# spec, status and allocation, by status and allocation alone once it is infeasible.
RESIZING = 0.3
_RESIZE_FACTORS = (0.5, 1.0, 1.5, 2.0, 3.0)
_RESIZE_CONDITIONS: tuple[list[dict[str, str]], ...] = (
    [],
    [{"type": "PodResizeInProgress", "status": "True"}],
    [{"type": "PodResizePending", "status": "True", "reason": "Deferred"}],
    [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}],
    [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"},
     {"type": "PodResizeInProgress", "status": "True"}],
)


def _scaled(rng: random.Random, requests: dict[str, str]) -> dict[str, str]:
    """cpu and memory of `requests` each times a random factor (in milli-units and
    bytes, written as plain quantities); other resources are not resized in place."""
    out: dict[str, str] = {}
    for name in ("cpu", "memory"):
        if name in requests:
            nano = int(nano_value(requests[name]) * rng.choice(_RESIZE_FACTORS))
            out[name] = f"{nano // 10**6}m" if name == "cpu" else str(nano // 10**9)
    return out


def resize_in_place(rng: random.Random, pod: dict[str, Any]) -> None:
    """Give a bound, running pod the status of an in-place resize (see RESIZING)."""
    spec, status = pod["spec"], pod["status"]
    pod_level = spec.get("resources", {}).get("requests")
    if pod_level and rng.random() < 0.7:
        status["resources"] = {"requests": _scaled(rng, pod_level)}
        if rng.random() < 0.7:
            status["allocatedResources"] = _scaled(rng, pod_level)
    statuses: dict[str, list[dict[str, Any]]] = {}
    for key, field_name in (("containers", "containerStatuses"),
                            ("initContainers", "initContainerStatuses")):
        for c in spec.get(key, []):
            requests = c.get("resources", {}).get("requests", {})
            entry: dict[str, Any] = {"name": c["name"], "image": c["image"], "imageID": "",
                                     "ready": False, "restartCount": 0}
            if requests and rng.random() < 0.6:
                entry["resources"] = {"requests": _scaled(rng, requests)}
            if requests and rng.random() < 0.5:
                entry["allocatedResources"] = _scaled(rng, requests)
            statuses.setdefault(field_name, []).append(entry)
    status.update(statuses)
    status["conditions"] = copy.deepcopy(rng.choice(_RESIZE_CONDITIONS))


def _held_while_terminating(pod: dict[str, Any]) -> dict[str, Any]:
    """The API server sets deletionTimestamp itself: a terminating pod is created with
    a finalizer instead, and the runner deletes it after creating it."""
    if pod["metadata"].pop("deletionTimestamp", None):
        pod["metadata"]["finalizers"] = [HOLD_FINALIZER]
    return pod


def isolated(pod: dict[str, Any], prefix: str, scheduler: str = SCHEDULER_NAME
              ) -> dict[str, Any]:
    """The pod under test, for the comparison's scheduler and this case's nodes only."""
    spec = pod["spec"]
    spec["schedulerName"] = scheduler
    spec["nodeSelector"] = {CASE_LABEL: prefix, **spec.get("nodeSelector", {})}
    return pod


def _port_keys(pod: dict[str, Any]) -> set[tuple[str, str, int]]:
    """(host IP, protocol, host port) of what a pod holds on its node, as the scheduler
    keys them: no IP means 0.0.0.0, no protocol TCP; containers and sidecars."""
    spec = pod["spec"]
    holders = spec["containers"] + [c for c in spec.get("initContainers", [])
                                    if c.get("restartPolicy") == "Always"]
    return {(p.get("hostIP") or "0.0.0.0", p.get("protocol") or "TCP", p["hostPort"])
            for c in holders for p in c.get("ports", []) if p.get("hostPort")}


def _drop_shared_ports_of_finished(pods: list[dict[str, Any]]) -> None:
    """A pod that finishes while another pod on its node holds one of its exact host
    ports makes kube-scheduler forget that port (its per-node port set is a set, not a
    count; an intended difference, see docs/compatibility.md). Such finished pods lose their
    ports, so the cases test what both agree on."""
    for pod in pods:
        if not pod["status"].get("phase"):
            continue
        mine = _port_keys(pod)
        others = set().union(*(_port_keys(o) for o in pods if o is not pod
                               and o["spec"]["nodeName"] == pod["spec"]["nodeName"]))
        if mine & others:
            for c in pod["spec"]["containers"] + pod["spec"].get("initContainers", []):
                c.pop("ports", None)
            pod["spec"].pop("hostNetwork", None)


def pinned_copy(pod: dict[str, Any], node: str, name: str) -> dict[str, Any]:
    """The pod under test restricted to one node by required node affinity on its
    hostname, added to every term (terms are ORed, expressions within one ANDed)."""
    out = copy.deepcopy(pod)
    out["metadata"] = {"name": name, "namespace": pod["metadata"]["namespace"],
                       "labels": dict(pod["metadata"].get("labels", {}))}
    out["spec"].pop("nodeName", None)
    requirement = {"key": HOSTNAME, "operator": "In", "values": [node]}
    node_aff = out["spec"].setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = node_aff.setdefault("requiredDuringSchedulingIgnoredDuringExecution",
                                   {"nodeSelectorTerms": [{}]})
    for term in required["nodeSelectorTerms"]:
        term.setdefault("matchExpressions", []).append(dict(requirement))
    return out
