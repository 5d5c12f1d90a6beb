"""The one seeded generator of nodes, pods and workloads for tests, covering what the
built-in plugins read.

Used to check the fast path against the reference path, that decoding survives mutated
input, that generated objects only use known fields, and (through
`tests.gen.differential`, which isolates its cases on a shared API server) policyd
against kube-scheduler. Every object is a pure function of the `random.Random` it is
given, so a failing seed replays alone.

The mix aims at what differs between schedulers in practice: mixed-case keys and values,
taints with every effect against tolerations with every operator (and the not-ready
taint every pod tolerates by admission), Gt/Lt on integer and non-integer values,
matchFields on the node name, host port conflicts by protocol and host IP (hostNetwork
and sidecar ports included), init containers and sidecars, explicit zero and
limits-only requests, pod-level requests, a RuntimeClass, extended resources, nodes
missing cpu or memory, finished and terminating existing pods, topology spread with
minDomains, node inclusion policies and matchLabelKeys, default spreading through
Services and ReplicaSets, required and preferred pod (anti-)affinity both ways with
namespaces, namespaceSelectors, match/mismatchLabelKeys and empty or missing selectors.
About two thirds of the pods end up unschedulable; `Mix` keeps enough clusters clean
for spreading and affinity to decide. A `Vocabulary` adds the names a test's subject
reads of its own (a generated policy's label keys, extended resources, priorities).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tests.builders import PodBuilder

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
RACK = "Rack"  # a mixed-case topology key
GPU = "example.com/gpu"
# Pods may name this RuntimeClass; the differential runner creates it with this
# overhead, which admission then adds to the pods (offline, the name alone is kept).
RUNTIME_CLASS = "diff-overhead"
RUNTIME_CLASS_OVERHEAD = {"cpu": "250m", "memory": "120Mi"}
# Marks a pod as terminating when it is decoded offline (the API server sets it itself).
TERMINATING_SINCE = "2026-11-01T11:00:00Z"

APPS = ["web", "db", "cache", "Web"]
TIERS = ["front", "back"]
TAINT_KEYS = ["dedicated", "Dedicated", "gpu"]
TAINT_VALUES = ["", "x", "X"]
EFFECTS = ["NoSchedule", "NoExecute", "PreferNoSchedule"]
# Images of containers, and the names and sizes nodes report for them. One size per
# name: kube-scheduler keeps a single size per image name for the whole cluster (the
# first node's it saw), policyd each node's own; see docs/compatibility.md.
IMAGES = ["registry/app:1", "registry/db:2", "other:3", "localhost:5000/tool"]
NODE_IMAGES = {"registry/app:1": 300, "registry/db:2": 900, "other:3": 30,
               "localhost:5000/tool:latest": 120}  # MiB; an untagged name means :latest


@dataclass(frozen=True)
class Mix:
    """What a cluster leans towards: a pod that every node rejects in an early filter
    never reaches PodTopologySpread or InterPodAffinity, so some mixes keep nodes clean
    and roomy and put their weight on spreading or pod affinity instead."""

    name: str
    taints: float = 1.0  # scales taint and unschedulable rates
    roomy: bool = False  # big nodes: resources rarely decide
    spread: float = 0.35  # chance a pod to place has spread constraints
    affinity: float = 0.35  # chance of each of podAffinity / podAntiAffinity
    existing_per_node: int = 3  # up to this many existing pods per node
    apps: int = 4  # how many app label values pods draw from
    same_namespace: float = 0.0  # chance an existing pod shares the pod's namespace
    # NodeDeclaredFeatures: the share of nodes declaring RestartAllContainersOnContainerExits
    # and of pods to place with a RestartAllContainers restart rule (the issue 27 mix).
    declares_restart_all: float = 0.3
    restart_all_rule: float = 0.2


MIXES = (
    Mix("mixed"),
    Mix("mixed"),
    Mix("spread", taints=0.2, roomy=True, spread=0.95, affinity=0.1, existing_per_node=4,
        apps=2, same_namespace=0.7),
    Mix("affinity", taints=0.2, roomy=True, spread=0.1, affinity=0.7, existing_per_node=3,
        apps=2, same_namespace=0.6),
    Mix("fit", taints=0.3, spread=0.2, affinity=0.15),
)
# The short forms' default: with the "mixed" mix most pods fail an early filter, and
# the fast path must be compared on many decided placements and scores too.
ROOMY = Mix("roomy", taints=0.3, roomy=True, affinity=0.2)


# Declared features (status.declaredFeatures) besides the one pods can need: a v1.36
# kubelet declares those of its feature gates that are on, none a pod infers at
# scheduling time; and a name no registry knows yet, which the scheduler ignores.
RESTART_ALL_FEATURE = "RestartAllContainersOnContainerExits"
OTHER_FEATURES = ("ExtendWebSocketsToKubelet", "InPlacePodVerticalScalingInitContainers",
                  "SomeFutureFeature/part")
RESTART_ALL_RULE = {"action": "RestartAllContainers",
                    "exitCodes": {"operator": "In", "values": [42]}}


def side_stream(rng: random.Random, what: str) -> random.Random:
    """A generator for what was added to the mix later (declared features, restart
    rules), seeded from `rng`'s state without drawing from it: every object the
    generator made before stays exactly as it was, so recorded seeds keep their cases.
    Seeded from the state's text (a str seed is hashed with SHA-512), never hash():
    the state holds None, whose hash differs from process to process before 3.12."""
    return random.Random(f"{what}/{rng.getstate()!r}")


def _declare_features(rng: random.Random, status: dict[str, Any], mix: Mix) -> None:
    side = side_stream(rng, "declared-features")
    features = [f for f in OTHER_FEATURES if side.random() < 0.3]
    if side.random() < mix.declares_restart_all:
        features.append(RESTART_ALL_FEATURE)
    if features:
        status["declaredFeatures"] = sorted(features)  # the API server wants them sorted


def _add_restart_rules(rng: random.Random, spec: dict[str, Any], mix: Mix) -> None:
    """A RestartAllContainers rule (on a container, an init container or a sidecar,
    which then need a restartPolicy) for `mix.restart_all_rule` of the pods; a few
    others get a plain Restart rule, which needs no feature."""
    side = side_stream(rng, "restart-rules")
    r = side.random()
    if r < mix.restart_all_rule:
        rule = RESTART_ALL_RULE
    elif r < mix.restart_all_rule + 0.05:
        rule = {**RESTART_ALL_RULE, "action": "Restart"}
    else:
        return
    holders = spec["containers"] + spec.get("initContainers", [])
    add_restart_rule(side.choice(holders), rule, side)


def add_restart_rule(container: dict[str, Any], rule: Mapping[str, Any],
                     rng: random.Random) -> None:
    """Give `container` the restart rule `rule` (with the restartPolicy the API server
    requires alongside rules, unless it has one: a sidecar keeps Always)."""
    container.setdefault("restartPolicy", rng.choice(["Never", "OnFailure"]))
    container["restartPolicyRules"] = [dict(rule)]


@dataclass(frozen=True)
class Names:
    """The names generated objects refer to: topology values nodes take, namespaces
    pods live in and affinity terms list, nodes matchFields names."""

    zones: Sequence[str]
    racks: Sequence[str]
    namespaces: Sequence[str]
    nodes: Sequence[str] = ()
    # Labels every namespace has: namespaceSelectors require them, so that they never
    # reach beyond these namespaces.
    namespace_labels: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Vocabulary:
    """Names a test's subject reads that the generator does not draw by itself: the label
    and annotation keys generated policies refer to, any extended resource, priorities.
    Drawn after everything else, so objects generated without one stay the same."""

    label_keys: Sequence[str] = ()
    label_values: Sequence[str] = ("",)
    annotation_keys: Sequence[str] = ()
    annotation_values: Sequence[str] = ("",)
    # Extra resources nodes have and containers request, some of each, in these amounts.
    resources: Sequence[str] = ()
    quantities: Sequence[str] = ("0", "1", "2", "4", "8")
    priorities: tuple[int, int] | None = None  # pods' spec.priority, inclusive bounds

    def add_metadata(self, rng: random.Random, meta: dict[str, Any]) -> None:
        labels = meta.setdefault("labels", {})
        for key in rng.sample(list(self.label_keys), rng.randint(0, len(self.label_keys))):
            labels[key] = rng.choice(self.label_values)
        annotations = {key: rng.choice(self.annotation_values) for key in rng.sample(
            list(self.annotation_keys), rng.randint(0, len(self.annotation_keys)))}
        if annotations:
            meta["annotations"] = annotations

    def amounts(self, rng: random.Random) -> dict[str, str]:
        return {name: rng.choice(self.quantities) for name in rng.sample(
            list(self.resources), rng.randint(0, len(self.resources)))}


DEFAULT_NAMES = Names(zones=["zone-a", "zone-b", "zone-c"], racks=["rack-1", "rack-2"],
                      namespaces=["default", "shop"],
                      nodes=[f"node-{i}" for i in range(8)])


def gen_node(rng: random.Random, name: str, names: Names = DEFAULT_NAMES,
             mix: Mix = ROOMY, labels: Mapping[str, str] | None = None,
             vocabulary: Vocabulary | None = None) -> dict[str, Any]:
    """A node with `labels` (default: its hostname) and random others, allocatable,
    taints and images."""
    labels = dict(labels) if labels is not None else {HOSTNAME: name}
    if rng.random() < 0.9:
        labels[ZONE] = rng.choice(names.zones)
    if rng.random() < 0.5:
        labels[RACK] = rng.choice(names.racks)
    if rng.random() < 0.5:
        labels[rng.choice(["env", "Env"])] = rng.choice(["prod", "Prod", "staging"])
    if rng.random() < 0.3:
        labels["disk"] = rng.choice(["ssd", "hdd", "SSD"])
    if rng.random() < 0.4:
        labels["cores"] = rng.choice([str(rng.randint(1, 64)), "08", "1.5", "many"])
    if mix.roomy:
        alloc: dict[str, str] = {"cpu": rng.choice(["8", "16"]),
                                 "memory": rng.choice(["16Gi", "32Gi"]),
                                 "pods": rng.choice(["20", "110"])}
    else:
        alloc = {"cpu": rng.choice(["1", "2", "4", "1500m"]),
                 "memory": rng.choice(["2Gi", "4Gi", "8Gi", "3000Mi"]),
                 "pods": rng.choice(["2", "4", "110"])}
    if rng.random() < 0.3:
        alloc["ephemeral-storage"] = rng.choice(["1Gi", "10Gi"])
    if rng.random() < 0.2:
        alloc[GPU] = rng.choice(["1", "2"])
    if rng.random() < 0.04:
        del alloc[rng.choice(["cpu", "memory"])]  # reports none: nothing fits, scores 0
    spec: dict[str, Any] = {}
    taints: list[dict[str, str]] = []
    for _ in range(rng.choice([0, 0, 0, 1, 1, 2]) if rng.random() < mix.taints else 0):
        taint = {"key": rng.choice(TAINT_KEYS), "effect": rng.choice(EFFECTS)}
        if rng.random() < 0.1:
            # Every pod tolerates not-ready:NoExecute for 300s (DefaultTolerationSeconds
            # admission), so only the read-back pod knows it tolerates this one.
            taint = {"key": "node.kubernetes.io/not-ready",
                     "effect": rng.choice(["NoExecute", "NoSchedule"])}
        value = rng.choice(TAINT_VALUES)
        if value:
            taint["value"] = value
        if all((t["key"], t["effect"]) != (taint["key"], taint["effect"]) for t in taints):
            taints.append(taint)
    if taints:
        spec["taints"] = taints
    if rng.random() < 0.08 * mix.taints:
        spec["unschedulable"] = True
    status: dict[str, Any] = {"allocatable": alloc, "capacity": dict(alloc)}
    if rng.random() < 0.4:
        status["images"] = [
            {"names": [img], "sizeBytes": NODE_IMAGES[img] * 1024 * 1024}
            for img in rng.sample(sorted(NODE_IMAGES), rng.randint(1, 3))]
    _declare_features(rng, status, mix)
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if vocabulary:
        vocabulary.add_metadata(rng, meta)
        alloc.update(vocabulary.amounts(rng))
        status["capacity"] = dict(alloc)
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec,
            "status": status}


def _requests(rng: random.Random, scale: float = 1.0) -> dict[str, str]:
    reqs: dict[str, str] = {}
    if rng.random() < 0.75:
        # "0": an explicit zero is not replaced by the scoring defaults (100m / 200Mi).
        reqs["cpu"] = rng.choice(["100m", "250m", "500m", "1", "1500m", "3", "0.5", "1001m",
                                  "0"])
    if rng.random() < 0.75:
        reqs["memory"] = rng.choice(["64Mi", "512Mi", "1Gi", "2500Mi", "5Gi", "1.5Gi", "100M",
                                     "0"])
    if rng.random() < 0.1:
        reqs["ephemeral-storage"] = rng.choice(["500Mi", "2Gi"])
    if rng.random() < 0.1 * scale:
        reqs[GPU] = "1"
    return reqs


def _container(name: str, image: str, reqs: dict[str, str],
               limits_only: bool = False) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": image}
    if reqs and limits_only:
        # The API server copies limits into missing requests.
        c["resources"] = {"limits": dict(reqs)}
    elif reqs:
        # Extended resources must have limits equal to requests.
        c["resources"] = {"requests": dict(reqs)}
        if GPU in reqs:
            c["resources"]["limits"] = {GPU: reqs[GPU]}
    return c


def _ports(rng: random.Random, host_network: bool = False) -> list[dict[str, Any]]:
    ports: list[dict[str, Any]] = []
    for _ in range(rng.choice([1, 1, 2])):
        host_port = rng.choice([80, 443, 8080])
        port: dict[str, Any] = {
            # With hostNetwork the API requires hostPort == containerPort.
            "containerPort": host_port if host_network else 8000 + rng.randint(0, 99),
            "hostPort": host_port, "protocol": rng.choice(["TCP", "TCP", "UDP"])}
        ip = rng.choice(["", "", "127.0.0.1", "0.0.0.0", "10.0.0.1"])
        if ip:
            port["hostIP"] = ip
        if all((p["hostPort"], p["protocol"], p.get("hostIP")) !=
               (port["hostPort"], port["protocol"], port.get("hostIP")) for p in ports):
            ports.append(port)
    return ports


def _selector(rng: random.Random, labels: dict[str, str]) -> dict[str, Any]:
    r = rng.random()
    if r < 0.5:
        return {"matchLabels": {"app": rng.choice(APPS) if rng.random() < 0.3
                                else labels.get("app", "web")}}
    if r < 0.75:
        return {"matchExpressions": [{"key": "app", "operator": "In",
                                      "values": rng.sample(APPS, 2)}]}
    if r < 0.85:
        return {"matchExpressions": [{"key": "tier", "operator": rng.choice(
            ["Exists", "DoesNotExist"])}]}
    if r < 0.9:
        return {}  # every pod (of the term's namespaces)
    return {"matchLabels": {"tier": rng.choice(TIERS)},
            "matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}


def _affinity_term(rng: random.Random, names: Names, labels: dict[str, str]
                   ) -> dict[str, Any]:
    term: dict[str, Any] = {"labelSelector": _selector(rng, labels),
                            "topologyKey": rng.choice([HOSTNAME, ZONE, ZONE, RACK])}
    if rng.random() < 0.04:
        del term["labelSelector"]  # no selector: matches no pod
    r = rng.random()
    if r < 0.15:
        term["namespaces"] = rng.sample(list(names.namespaces),
                                        rng.randint(1, len(names.namespaces)))
    elif r < 0.25:
        term["namespaceSelector"] = {"matchLabels": dict(names.namespace_labels or {})}
        if rng.random() < 0.5:
            term["namespaceSelector"]["matchExpressions"] = [
                {"key": "team", "operator": "In", "values": ["a"]}]
    if "labelSelector" in term and "tier" not in repr(term["labelSelector"]):
        r = rng.random()
        if r < 0.1:
            term["matchLabelKeys"] = ["tier"]
        elif r < 0.15:
            term["mismatchLabelKeys"] = ["tier"]
    return term


def _pod_affinity(rng: random.Random, names: Names, labels: dict[str, str], rate: float
                  ) -> dict[str, Any]:
    affinity: dict[str, Any] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        if rng.random() < rate:
            part: dict[str, Any] = {}
            if rng.random() < 0.6:
                part["requiredDuringSchedulingIgnoredDuringExecution"] = [
                    _affinity_term(rng, names, labels) for _ in range(rng.choice([1, 1, 2]))]
            if rng.random() < 0.5:
                part["preferredDuringSchedulingIgnoredDuringExecution"] = [
                    {"weight": rng.randint(1, 100),
                     "podAffinityTerm": _affinity_term(rng, names, labels)}
                    for _ in range(rng.choice([1, 2]))]
            if part:
                affinity[kind] = part
    return affinity


def _node_requirement(rng: random.Random, racks: Sequence[str]) -> dict[str, Any]:
    op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
    if op in ("Gt", "Lt"):
        return {"key": "cores", "operator": op, "values": [str(rng.randint(0, 64))]}
    key, values = rng.choice([
        ("env", ["prod", "staging"]), ("Env", ["Prod", "prod"]), ("disk", ["ssd"]),
        (RACK, list(racks[:2])), ("disk", ["SSD", "hdd"])])
    if op in ("Exists", "DoesNotExist"):
        return {"key": key, "operator": op}
    return {"key": key, "operator": op, "values": values}


def _node_affinity(rng: random.Random, names: Names) -> dict[str, Any]:
    affinity: dict[str, Any] = {}
    if rng.random() < 0.35:
        terms = []
        for _ in range(rng.choice([1, 1, 2])):
            term: dict[str, Any] = {}
            if rng.random() < 0.15:
                # The API allows exactly one value here.
                term["matchFields"] = [{"key": "metadata.name", "operator": rng.choice(
                    ["In", "In", "NotIn"]), "values": [rng.choice(names.nodes)]}]
            if "matchFields" not in term or rng.random() < 0.3:
                term["matchExpressions"] = [_node_requirement(rng, names.racks)
                                            for _ in range(rng.choice([1, 1, 2]))]
            terms.append(term)
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": terms}
    if rng.random() < 0.3:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": rng.randint(1, 100),
             "preference": {"matchExpressions": [_node_requirement(rng, names.racks)]}
             if rng.random() < 0.85 else {"matchFields": [
                 {"key": "metadata.name", "operator": rng.choice(["In", "NotIn"]),
                  "values": [rng.choice(names.nodes)]}]}}
            for _ in range(rng.choice([1, 2]))]
    return affinity


def _tolerations(rng: random.Random) -> list[dict[str, Any]]:
    tols: list[dict[str, Any]] = []
    for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):
        r = rng.random()
        if r < 0.05:
            tols.append({"operator": "Exists"})  # tolerates everything
        elif r < 0.15:
            tols.append({"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                         "effect": "NoSchedule"})
        elif r < 0.55:
            tol: dict[str, Any] = {"key": rng.choice(TAINT_KEYS), "operator": "Exists"}
            if rng.random() < 0.5:
                tol["effect"] = rng.choice(EFFECTS)
                if tol["effect"] == "NoExecute" and rng.random() < 0.5:
                    tol["tolerationSeconds"] = rng.choice([0, 60])
            tols.append(tol)
        else:
            tol = {"key": rng.choice(TAINT_KEYS), "operator": "Equal",
                   "value": rng.choice(TAINT_VALUES)}
            if rng.random() < 0.6:
                tol["effect"] = rng.choice(EFFECTS)
            tols.append(tol)
    return tols


def _spread(rng: random.Random, labels: dict[str, str]) -> list[dict[str, Any]]:
    out = []
    for key in rng.sample([ZONE, HOSTNAME, RACK], rng.choice([1, 1, 2])):
        c: dict[str, Any] = {
            "maxSkew": rng.choice([1, 1, 2, 3]),
            "topologyKey": key,
            "whenUnsatisfiable": rng.choice(["DoNotSchedule", "DoNotSchedule",
                                             "ScheduleAnyway"]),
            "labelSelector": {"matchLabels": {"app": labels["app"]}} if rng.random() < 0.8
            else {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
        }
        if rng.random() < 0.04:
            del c["labelSelector"]  # no selector: counts no pod
        if c["whenUnsatisfiable"] == "DoNotSchedule" and rng.random() < 0.25:
            c["minDomains"] = rng.randint(1, 5)
        if rng.random() < 0.3:
            c["nodeAffinityPolicy"] = rng.choice(["Honor", "Ignore"])
        if rng.random() < 0.3:
            c["nodeTaintsPolicy"] = rng.choice(["Honor", "Ignore"])
        if (rng.random() < 0.1 and "tier" in labels and "labelSelector" in c
                and "tier" not in repr(c["labelSelector"])):
            c["matchLabelKeys"] = ["tier"]
        out.append(c)
    return out


def gen_pod_dict(rng: random.Random, name: str, namespace: str, names: Names = DEFAULT_NAMES,
                 mix: Mix = ROOMY, *, bound_to: str | None = None,
                 vocabulary: Vocabulary | None = None) -> dict[str, Any]:
    """A pod: bound to a node (existing; maybe finished or terminating) or to place
    (with node selection, tolerations and spreading)."""
    labels = {"app": rng.choice(APPS[: mix.apps])}
    if rng.random() < 0.6:
        labels["tier"] = rng.choice(TIERS)
    containers = [_container(f"c{i}", rng.choice(IMAGES), _requests(rng),
                             limits_only=rng.random() < 0.1)
                  for i in range(rng.choice([1, 1, 2]))]
    spec: dict[str, Any] = {"containers": containers, "terminationGracePeriodSeconds": 0}
    host_network = rng.random() < 0.08
    if host_network:
        spec["hostNetwork"] = True
    if rng.random() < 0.25:
        inits = []
        for i in range(rng.choice([1, 2])):
            init = _container(f"init{i}", "registry/app:1", _requests(rng, 0))
            if rng.random() < 0.5:
                init["restartPolicy"] = "Always"
                if rng.random() < 0.2:
                    init["ports"] = _ports(rng, host_network)  # sidecars' ports count
            inits.append(init)
        spec["initContainers"] = inits
    if rng.random() < (0.25 if bound_to else 0.2):
        containers[0]["ports"] = _ports(rng, host_network)
    if rng.random() < 0.08:
        # Pod-level requests (PodLevelResources, beta in v1.36) replace the containers'
        # cpu and memory, which may not exceed them: the containers get none.
        for c in containers + spec.get("initContainers", []):
            for values in c.get("resources", {}).values():
                values.pop("cpu", None)
                values.pop("memory", None)
        spec["resources"] = {"requests": {"cpu": rng.choice(["1", "2", "3"]),
                                          "memory": rng.choice(["1Gi", "3Gi"])}}
    if rng.random() < 0.08:
        spec["runtimeClassName"] = RUNTIME_CLASS
    affinity = _pod_affinity(rng, names, labels, mix.affinity * (0.4 if bound_to else 1.0))
    status: dict[str, Any] = {}
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels}
    if bound_to:
        spec["nodeName"] = bound_to
        r = rng.random()
        if r < 0.1:
            # Finished pods free their node.
            status["phase"] = rng.choice(["Succeeded", "Failed"])
        elif r < 0.15:
            # Still on its node for resources; PodTopologySpread no longer counts it.
            meta["deletionTimestamp"] = TERMINATING_SINCE
    else:
        if rng.random() < 0.15:
            key, value = rng.choice([("env", "prod"), ("Env", "Prod"), ("disk", "ssd")])
            spec["nodeSelector"] = {key: value}
        node_aff = _node_affinity(rng, names)
        if node_aff:
            affinity["nodeAffinity"] = node_aff
        tols = _tolerations(rng)
        if tols:
            spec["tolerations"] = tols
        if rng.random() < mix.spread:
            spec["topologySpreadConstraints"] = _spread(rng, labels)
        _add_restart_rules(rng, spec, mix)
    if affinity:
        spec["affinity"] = affinity
    if vocabulary:
        vocabulary.add_metadata(rng, meta)
        for c in containers + spec.get("initContainers", []):
            extra = vocabulary.amounts(rng)
            if extra:
                c.setdefault("resources", {}).setdefault("requests", {}).update(extra)
        if vocabulary.priorities:
            spec["priority"] = rng.randint(*vocabulary.priorities)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": status}


def gen_workloads(rng: random.Random, namespace: str, mix: Mix, pods: list[dict[str, Any]]
                  ) -> list[dict[str, Any]]:
    """A Service and/or a ReplicaSet selecting one app in `namespace` (the selectors of
    PodTopologySpread's default constraints); the ReplicaSet becomes the controller
    (ownerReference) of some of the `pods` it selects. The ReplicaSet has no replicas,
    and nobody checks the reference's uid."""
    out: list[dict[str, Any]] = []
    app = rng.choice(APPS[: mix.apps])
    if rng.random() < 0.35:
        selector = {"app": app}
        if rng.random() < 0.3:
            selector["tier"] = rng.choice(TIERS)
        out.append({"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": f"svc-{app.lower()}", "namespace": namespace},
                    "spec": {"selector": selector, "ports": [{"port": 80}]}})
    if rng.random() < 0.25:
        name = f"rs-{app.lower()}"
        out.append({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "metadata": {"name": name, "namespace": namespace},
                    "spec": {"replicas": 0, "selector": {"matchLabels": {"app": app}},
                             "template": {"metadata": {"labels": {"app": app}},
                                          "spec": {"containers": [
                                              {"name": "c", "image": "registry/app:1"}]}}}})
        for p in pods:
            meta = p["metadata"]
            if (meta["namespace"] == namespace and meta["labels"].get("app") == app
                    and rng.random() < 0.7):
                meta["ownerReferences"] = [{
                    "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name,
                    "uid": "00000000-0000-0000-0000-000000000001", "controller": True}]
    return out


# -- the short forms: a cluster of `node-<i>` nodes in DEFAULT_NAMES' namespaces --------


def gen_nodes(rng: random.Random, n: int, *, mix: Mix = ROOMY,
              vocabulary: Vocabulary | None = None) -> list[dict[str, Any]]:
    return [gen_node(rng, f"node-{i}", DEFAULT_NAMES, mix, vocabulary=vocabulary)
            for i in range(n)]


_PLAIN_SPEC_KEYS = ("affinity", "topologySpreadConstraints", "initContainers", "hostNetwork",
                    "nodeSelector", "resources", "runtimeClassName")


def gen_pod(rng: random.Random, name: str, *, bound_to: str | None = None,
            rich: bool = True, names: Names = DEFAULT_NAMES, mix: Mix = ROOMY,
            vocabulary: Vocabulary | None = None) -> PodBuilder:
    """A pod in one of the namespaces, as a builder. Not `rich`: only labels, containers
    with requests and tolerations (what NodeResourcesFit and TaintToleration read)."""
    pod = gen_pod_dict(rng, name, rng.choice(names.namespaces), names, mix,
                       bound_to=bound_to, vocabulary=vocabulary)
    if not rich:
        spec = pod["spec"]
        for key in _PLAIN_SPEC_KEYS:
            spec.pop(key, None)
        for c in spec["containers"]:
            c.pop("ports", None)
    return PodBuilder.of(pod)


def gen_cluster(rng: random.Random, nodes: int, pods: int, *, rich: bool = True,
                mix: Mix = ROOMY, vocabulary: Vocabulary | None = None
                ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`nodes` nodes and `pods` pods bound to them."""
    node_objs = gen_nodes(rng, nodes, mix=mix, vocabulary=vocabulary)
    names = replace(DEFAULT_NAMES, nodes=[n["metadata"]["name"] for n in node_objs])
    pod_objs = [gen_pod(rng, f"existing-{i}", rich=rich, names=names, mix=mix,
                        vocabulary=vocabulary,
                        bound_to=node_objs[rng.randrange(nodes)]["metadata"]["name"]).raw()
                for i in range(pods)]
    return node_objs, pod_objs
