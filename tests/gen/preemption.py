"""Seeded preemption cases for the differential test: full nodes of pods with distinct
priorities, PodDisruptionBudgets over some of them, and one to three preemptors tried
one after another, so that both schedulers' victims, nominated node and message are
compared, and a later preemptor meets an earlier one's nomination.

Isolated from other cases as `tests.gen.differential` describes (prefixed names, the
case label on every node and in every preemptor's nodeSelector, one namespace of its
own). What keeps kube-scheduler's choice free of chance:

- every pod of a case has its own priority (a PriorityClass per value), so victims are
  ordered without a tie and no two nodes' candidates tie on "the highest victim's
  priority" (upstream's second criterion, before start times and the random offset);
- at most five nodes: every node preemption might help is dry-run (upstream tries all
  of them below 100 potential nodes), so where the dry runs start does not matter;
- preemptors go in strictly falling priority: a later one never clears an earlier one's
  nomination, so nothing a step leaves changes behind the runner's back;
- every existing pod holds VICTIM_FINALIZER: a victim stays, terminating (with the
  DisruptionTarget condition), after kube-scheduler deletes it, so the runner reads
  which pods went, and the nominated preemptor waits on its node ("not eligible due to
  a terminating pod on the nominated node") instead of racing the next step. The runner
  releases them when the batch is done.

No disruption controller runs in the dev control plane: a budget's status
(disruptionsAllowed) is what the disruption controller would write for pods that are
all healthy, and the runner writes it through the status subresource.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from policyd.model.records import Node, Pod
from tests.builders import make_node, make_pod
from tests.gen.clusters import (
    HOSTNAME,
    RESTART_ALL_FEATURE,
    RESTART_ALL_RULE,
    add_restart_rule,
    side_stream,
)
from tests.gen.differential import CASE_LABEL, UNDER_TEST_LABEL, isolated

# Keeps a victim around, terminating, until the runner releases it.
VICTIM_FINALIZER = "diff.policyd.io/victim"
# UNDER_TEST_LABEL's value on a case's preemptor of step `k` (`step_label`).
STEP_PREFIX = "preempt-"
# The PriorityClasses cases use: one per value, cluster-wide, shared by every case.
MAX_PRIORITY = 99
NEVER_SUFFIX = "-never"
# Node sizes: small enough that a few pods fill a node.
NODE_CPU = "4"
NODE_MEMORY = "16Gi"
_POD_CPUS = ("500m", "1", "1500m", "2")
_PREEMPTOR_CPUS = ("1500m", "2", "2500m", "3", "3500m")
# The label a case's budget selects, on some of its pods.
BUDGET_LABEL = "app"
BUDGET_APP = "db"
IMAGE = "registry/app:1"


def priority_class_name(value: int, never: bool = False) -> str:
    return f"diff-prio-{value}{NEVER_SUFFIX if never else ''}"


def priority_class(value: int, never: bool = False) -> dict[str, Any]:
    """The PriorityClass of `value` (preemptionPolicy Never for `never`)."""
    obj: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                           "metadata": {"name": priority_class_name(value, never)},
                           "value": value}
    if never:
        obj["preemptionPolicy"] = "Never"
    return obj


def step_label(step: int) -> str:
    return f"{STEP_PREFIX}{step}"


@dataclass
class PreemptionCase:
    """Nodes full of prioritised pods, budgets over some of them, and `steps`: the
    preemptors, one per step, in falling priority. Has the fields of a runner `Scene`."""

    seed: int
    index: int
    prefix: str
    namespaces: dict[str, dict[str, str]]
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    steps: list[dict[str, Any]]
    budgets: list[dict[str, Any]] = field(default_factory=list)
    priority_classes: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    workloads: list[dict[str, Any]] = field(default_factory=list)

    @property
    def node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.nodes]


def gen_preemption_case(seed: int, index: int, prefix: str) -> PreemptionCase:
    """The preemption case number `index` of the run with `seed`, names starting with
    `prefix`."""
    rng = random.Random(f"{seed}/preemption/{index}")
    namespace = f"{prefix}-a"
    nodes = [_node(f"{prefix}-n{i}", prefix, rng.random() < 0.5)
             for i in range(rng.randint(2, 5))]
    fills = [_fill(rng) for _ in nodes]
    n_steps = rng.choice((1, 2, 2, 3, 3))
    n_pods = sum(len(f) for f in fills)
    # Distinct priorities for every pod of the case; the preemptors' are drawn from the
    # same values, so some existing pods outrank them.
    values = rng.sample(range(1, MAX_PRIORITY + 1), n_pods + n_steps)
    # Preemptors from the upper two thirds: most find victims, some meet higher pods.
    upper = sorted(values)[len(values) // 3:]
    step_values = sorted(rng.sample(upper, n_steps), reverse=True)
    pod_values = [v for v in values if v not in step_values]
    rng.shuffle(pod_values)
    pods: list[dict[str, Any]] = []
    for node, cpus in zip(nodes, fills, strict=True):
        for cpu in cpus:
            i = len(pods)
            labels = {BUDGET_LABEL: BUDGET_APP} if rng.random() < 0.35 else {"app": "web"}
            pods.append(_pod(f"p{i}", namespace, labels, cpu, pod_values[i],
                             node=node["metadata"]["name"]))
    steps = []
    classes = {priority_class_name(v): priority_class(v) for v in pod_values}
    for k, value in enumerate(step_values):
        never = rng.random() < 0.15
        classes[priority_class_name(value, never)] = priority_class(value, never)
        pod = isolated(_pod(f"s{k}", namespace, {"app": "web"},
                            rng.choice(_PREEMPTOR_CPUS), value, never=never), prefix)
        pod["metadata"]["labels"][UNDER_TEST_LABEL] = step_label(k)
        steps.append(pod)
    budgets = []
    covered = [p for p in pods if p["metadata"]["labels"].get(BUDGET_LABEL) == BUDGET_APP]
    if covered and rng.random() < 0.7:
        budgets.append(_budget(rng, f"{prefix}-pdb", namespace, len(covered)))
    notes = [f"{len(nodes)} nodes", f"{len(pods)} pods", f"{n_steps} preemptor(s)"]
    if budgets:
        notes.append("budget " + str(budgets[0]["spec"]))
    notes += _declared_features(side_stream(rng, "preemption-features"), nodes, steps)
    return PreemptionCase(seed, index, prefix, {namespace: {CASE_LABEL: prefix}}, nodes,
                          pods, steps, budgets, list(classes.values()), notes)


def _declared_features(rng: random.Random, nodes: list[dict[str, Any]],
                       steps: list[dict[str, Any]]) -> list[str]:
    """NodeDeclaredFeatures in preemption (drawn last, from a side stream, so the
    cases made before stay as they were): 30% of the nodes declare the feature and 20%
    of the preemptors need it, so preemption may only pick a declaring node (the
    others are UnschedulableAndUnresolvable for them)."""
    for node in nodes:
        if rng.random() < 0.3:
            node["status"]["declaredFeatures"] = [RESTART_ALL_FEATURE]
    needing = 0
    for pod in steps:
        if rng.random() < 0.2:
            add_restart_rule(pod["spec"]["containers"][0], RESTART_ALL_RULE, rng)
            needing += 1
    return [f"{needing} preemptor(s) needing a declared feature"] if needing else []


def _node(name: str, prefix: str, has_image: bool) -> dict[str, Any]:
    resources = {"cpu": NODE_CPU, "memory": NODE_MEMORY, "pods": "110"}
    status: dict[str, Any] = {"capacity": dict(resources), "allocatable": dict(resources)}
    if has_image:
        # The pods' image on some nodes: ImageLocality scores (policyd skips it when no
        # node has an image the pod uses, which kube-scheduler logs as 0 everywhere).
        status["images"] = [{"names": [IMAGE], "sizeBytes": 300 * 1024 * 1024}]
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {HOSTNAME: name, CASE_LABEL: prefix}},
            "status": status}


def _fill(rng: random.Random) -> list[str]:
    """The cpu requests of one node's pods: 2 to 4 cores in all, most often full."""
    cpus: list[str] = []
    used = 0.0
    target = rng.choice((2.0, 3.0, 3.5, 4.0, 4.0, 4.0))
    while True:
        cpu = rng.choice(_POD_CPUS)
        size = float(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu)
        if used + size > target:
            return cpus
        cpus.append(cpu)
        used += size


def _pod(name: str, namespace: str, labels: dict[str, str], cpu: str, priority: int, *,
         node: str | None = None, never: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "priorityClassName": priority_class_name(priority, never),
        # Deleted at once (no kubelet runs), kept only by the victim finalizer.
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "resources": {
            "requests": {"cpu": cpu, "memory": "256Mi"}}, "image": IMAGE}]}
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels)}
    if node is not None:
        spec["nodeName"] = node
        meta["finalizers"] = [VICTIM_FINALIZER]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {}}


def _budget(rng: random.Random, name: str, namespace: str, covered: int
            ) -> dict[str, Any]:
    """A budget over the case's BUDGET_APP pods, by minAvailable or maxUnavailable, with
    the status the disruption controller would give it (all its pods healthy)."""
    spec: dict[str, Any] = {"selector": {"matchLabels": {BUDGET_LABEL: BUDGET_APP}}}
    if rng.random() < 0.5:
        spec["minAvailable"] = rng.randint(max(0, covered - 1), covered)
        allowed = covered - spec["minAvailable"]
        desired = spec["minAvailable"]
    else:
        spec["maxUnavailable"] = rng.randint(0, 1)
        allowed = spec["maxUnavailable"]
        desired = covered - spec["maxUnavailable"]
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec,
            "status": {"disruptionsAllowed": allowed, "currentHealthy": covered,
                       "desiredHealthy": max(0, desired), "expectedPods": covered,
                       "observedGeneration": 1}}


# --- Dry-run scenes for the engine alone (no API server) ---------------------------

@dataclass
class DryRunScene:
    """One cluster, one preemptor and the pods nominated to nodes: what the
    incremental and the rerun forms of preemption's dry runs are compared on
    (tests/unit/plugins/defaultpreemption/test_incremental.py)."""

    nodes: list[Node]
    pods: list[Pod]  # bound
    preemptor: Pod
    nominated: list[tuple[Pod, str]]  # (pending pod, node name)
    budgets: list[dict[str, Any]]
    notes: list[str]


_APPS = ("a", "b", "c")
_DRY_RUN_KEYS = (HOSTNAME, "topology.kubernetes.io/zone")


def gen_dry_run_scene(seed: int) -> DryRunScene:
    """Full nodes in two or three zones whose pods carry labels, required
    anti-affinity, host ports and priorities; a preemptor with, by chance, required
    (anti-)affinity, DoNotSchedule topology spread and a host port; budgets over
    app=a; pods nominated to nodes, some above the preemptor's priority.

    Left out on purpose, as the forms then differ where upstream's extensions do
    (see evaluator.py's docstring): terminating pods, `labelSelector: {}` spread
    constraints, claims; a nominated pod has anti-affinity only when the preemptor
    has required terms (so InterPodAffinity's PreFilter does not skip)."""
    rng = random.Random(f"{seed}/dry-run")
    zone_key = _DRY_RUN_KEYS[1]
    zones = [f"z{i}" for i in range(rng.randint(2, 3))]
    nodes: list[Node] = []
    pods: list[Pod] = []
    notes: list[str] = []
    for i in range(rng.randint(2, 7)):
        name = f"n{i}"
        nodes.append(make_node(name).label(zone_key, rng.choice(zones))
                     .capacity(cpu="4", memory="16Gi", pods=str(rng.choice((4, 110))))
                     .obj())
        used = 0.0
        for _ in range(rng.randint(1, 5)):
            cpu = rng.choice((0.5, 1.0, 1.5))
            if used + cpu > 4:
                break
            used += cpu
            b = (make_pod(f"p{len(pods)}").node(name).priority(rng.randint(0, 60))
                 .phase("Running").labels(app=rng.choice(_APPS))
                 .set("status.startTime", f"2026-01-01T00:00:{rng.randint(0, 59):02d}Z"))
            b.container(host_ports=(8080,) if rng.random() < 0.15 else (),
                        cpu=f"{int(cpu * 1000)}m")
            if rng.random() < 0.25:
                b.affinity({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    _term(rng.choice(_APPS), rng.choice(_DRY_RUN_KEYS))]}})
            pods.append(b.obj())
    pb = make_pod("preemptor").priority(rng.randint(40, 100)).labels(
        app=rng.choice(_APPS[:2]))
    pb.container(host_ports=(8080,) if rng.random() < 0.2 else (),
                 cpu=rng.choice(("1", "2", "3")))
    affinity: dict[str, Any] = {}
    has_terms = False
    if rng.random() < 0.35:
        has_terms = True
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            _term(rng.choice(_APPS), rng.choice(_DRY_RUN_KEYS))]}
    if rng.random() < 0.2:
        has_terms = True
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            _term(rng.choice(_APPS), zone_key)]}
    if affinity:
        pb.affinity(affinity)
    if rng.random() < 0.4:
        constraint: dict[str, Any] = {
            "maxSkew": rng.choice((1, 1, 2)), "topologyKey": rng.choice(_DRY_RUN_KEYS),
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": rng.choice(_APPS)}}}
        if rng.random() < 0.3:
            constraint["minDomains"] = rng.choice((2, 4))
        pb.spread(constraint)
        notes.append(f"spread {constraint}")
    preemptor = pb.obj()
    nominated = []
    for k in range(rng.choice((0, 0, 1, 2))):
        nb = make_pod(f"nom{k}").priority(rng.randint(30, 100)).labels(
            app=rng.choice(_APPS))
        nb.container(cpu=rng.choice(("500m", "1")))
        if has_terms and rng.random() < 0.3:
            nb.affinity({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                _term(rng.choice(_APPS), rng.choice(_DRY_RUN_KEYS))]}})
        nominated.append((nb.obj(), rng.choice(nodes).name))
    budgets = []
    if rng.random() < 0.5:
        budgets.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                        "metadata": {"name": "pdb-a", "namespace": "default"},
                        "spec": {"selector": {"matchLabels": {"app": "a"}}},
                        "status": {"disruptionsAllowed": rng.choice((0, 1)),
                                   "disruptedPods": {}}})
    notes += [f"{len(nodes)} nodes", f"{len(pods)} pods", f"{len(nominated)} nominated",
              f"{len(budgets)} budget(s)", f"affinity {affinity}"]
    return DryRunScene(nodes, pods, preemptor, nominated, budgets, notes)


def _term(app: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
