"""Seeded generators of SchedulingPolicy documents, with nodes and pods whose labels,
annotations and resources the generated rules read: every filter and score rule kind
of schemas/policy.schema.json, selectors, appliesTo, and metric rules with a cache of
values some of which are missing or aged out.

Used to check compiled policies against the reference evaluator, and every plugin's
columnar form against its reference form.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from policyd.model.pod_groups import COSCHEDULING_LABEL
from tests.gen.clusters import DEFAULT_NAMES, MIXES, Vocabulary, gen_node, gen_pod
from tests.unit.policy.conftest import make_policy

KEYS = ["env", "Env", "tier", "zone", "n"]
VALUES = ["a", "b", "prod", "1", "5", "10", ""]
ANN_KEYS = ["x", "lat", "hw"]
ANN_VALUES = ["true", "false", "3", "12.5", "a", "0.1", "0.3", "100",
              # not JSON numbers, so missing to numeric rules and to_number (valid label
              # values: selectors take them too; test_json_numbers has the others)
              "Infinity", "NaN", "1e400", "1_000", "0x10", "01", "1e2"]
# What nodes' annotations may also hold: JSON numbers at the raw-value bound (2^53
# counts) and beyond it (missing to numeric and jmespath scores).
NODE_ANN_VALUES = [*ANN_VALUES, "1e308", "-1e308", "9007199254740992", "-9007199254740992",
                   "9007199254740994", "123456789012345678901234567890"]
RESOURCES = ["cpu", "memory", "example.com/gpu", "pods"]


# What generated policies read, drawn onto the shared generator's nodes and pods (one
# random-cluster generator for every test: tests/gen/clusters.py). kube-system is a
# namespace because policies may exclude it; the tight mix because headroom and
# pods-per-node rules must see nodes that are nearly full.
VOCABULARY = Vocabulary(label_keys=KEYS, label_values=VALUES, annotation_keys=ANN_KEYS,
                        annotation_values=ANN_VALUES, resources=["example.com/gpu"],
                        quantities=["0", "1", "2", "3", "4"], priorities=(0, 20))
NODE_VOCABULARY = replace(VOCABULARY, annotation_values=NODE_ANN_VALUES)
NAMES = replace(DEFAULT_NAMES, namespaces=["default", "prod", "kube-system"])
MIX = next(m for m in MIXES if m.name == "fit")


# CEL rules: missing keys (errors), guards, optionals, shortcuts, whole-object use
# and a dyn result that is sometimes not a number.
CEL_FILTERS = [
    'node.labels["env"] == pod.labels["env"]',
    '"tier" in node.labels',
    'node.labels.?n.orValue("0") != "0" && int(node.labels.n) > 2',
    'quantity(node.status.allocatable.memory).isGreaterThan(quantity("3Gi"))',
    'has(node.metadata.annotations) && node.annotations.exists(k, k == pod.labels.?env'
    '.orValue(""))',
    'size(node) > 0 && node.metadata.name.startsWith("n")',
    'dyn(node.annotations.?hw.orValue(true)) == true',
]
CEL_SCORES = [
    'int(node.labels.n)',
    'size(node.labels)',
    'double(node.annotations.lat)',
    'quantity(node.status.allocatable.cpu).asApproximateFloat()',
    'dyn(node.labels.?n.hasValue() ? int(node.labels.n) : node.metadata.name)',
    'uint(size(pod.spec.containers)) * 3u',
]


# Pod groups the generated pods join (scheduler-plugins' label): what sameTopology rules
# and appliesTo.podGroup read.
GROUPS = ("g1", "g2")


def policy_pod(rng: random.Random, name: str, node: str = "") -> dict[str, Any]:
    raw = gen_pod(rng, name, bound_to=node or None, names=NAMES, mix=MIX,
                  vocabulary=VOCABULARY).raw()
    if rng.random() < 0.4:
        raw["metadata"].setdefault("labels", {})[COSCHEDULING_LABEL] = rng.choice(GROUPS)
    return raw


def policy_node(rng: random.Random, name: str) -> dict[str, Any]:
    return gen_node(rng, name, names=NAMES, mix=MIX, vocabulary=NODE_VOCABULARY)


def _requirement(rng: random.Random, node: bool) -> dict[str, Any]:
    ops = ["In", "NotIn", "Exists", "DoesNotExist"] + (["Gt", "Lt"] if node else [])
    op = rng.choice(ops)
    r: dict[str, Any] = {"key": rng.choice(KEYS), "operator": op}
    if op in ("In", "NotIn"):
        r["values"] = rng.sample(VALUES, rng.randint(1, 3))
    elif op in ("Gt", "Lt"):
        r["values"] = [str(rng.randint(0, 8))]
    return r


def _selector(rng: random.Random, node: bool) -> dict[str, Any]:
    sel: dict[str, Any] = {}
    if rng.random() < 0.5:
        sel["matchLabels"] = {rng.choice(KEYS): rng.choice(VALUES)}
    sel["matchExpressions"] = [_requirement(rng, node) for _ in range(rng.randint(0, 2))]
    return sel


# The filter rule kinds, by the short names `filter_rule` draws; PROJECTED_KINDS are
# those kube-scheduler can always express (`FilterRule.project`: node affinity).
FILTER_KINDS = ("a2l", "labels", "headroom", "ext", "cap", "topo", "jmes", "cel")
PROJECTED_KINDS = ("a2l", "labels")


def filter_rule(rng: random.Random, i: int, kinds: Sequence[str] = FILTER_KINDS
                ) -> dict[str, Any]:
    """A filter rule with id `f<i>` of one of `kinds` (FILTER_KINDS' names)."""
    kind = rng.choice(kinds)
    r: dict[str, Any] = {"id": f"f{i}", "message": f"filter {i} failed"}
    if kind == "a2l":
        a: dict[str, Any] = {"annotation": rng.choice(ANN_KEYS), "label": rng.choice(KEYS)}
        if rng.random() < 0.5:
            a["value"] = rng.choice(ANN_VALUES)
        if rng.random() < 0.5:
            a["useAnnotationValue"] = True
        else:
            a["labelValue"] = rng.choice(VALUES)
        r["annotationToNodeLabel"] = a
    elif kind == "labels":
        sel = _selector(rng, True)
        if not sel.get("matchLabels") and not sel["matchExpressions"]:
            sel["matchExpressions"] = [_requirement(rng, True)]
        r["nodeLabels"] = sel
    elif kind == "headroom":
        res = rng.choice(RESOURCES)
        if rng.random() < 0.5:
            r["headroom"] = {"resource": res, "percent": rng.choice([0, 10, 12.5, 50, 100])}
        else:
            q = {"cpu": "500m", "memory": "1Gi", "example.com/gpu": "1", "pods": "2"}[res]
            r["headroom"] = {"resource": res, "quantity": q}
    elif kind == "ext":
        r["requireExtendedResource"] = {"name": "example.com/gpu",
                                        "quantity": rng.randint(1, 3)}
    elif kind == "cap":
        r["maxPodsPerNode"] = rng.randint(1, 3)
    elif kind == "topo":
        r["sameTopology"] = {"key": rng.choice(KEYS)}
    elif kind == "jmes":
        r["jmespath"] = rng.choice([
            "node.metadata.labels.env == pod.metadata.labels.env",
            "quantity(node.status.allocatable.memory) > quantity('3Gi')",
            "to_number(node.metadata.labels.n) > `2`",
            "contains(keys(node.metadata.labels), 'tier')",
            "abs(node.metadata.name)",
        ])
    else:
        r["cel"] = rng.choice(CEL_FILTERS)
    return r


def _score(rng: random.Random, i: int) -> dict[str, Any]:
    kind = rng.choice(["lv", "num", "alloc", "jmes", "cel"])
    r: dict[str, Any] = {"id": f"s{i}", "weight": rng.randint(1, 100),
                         "normalize": rng.choice(["minmax", "max", "none"])}
    if kind != "num" and rng.random() < 0.3:
        r["reverse"] = True
    if kind == "lv":
        r["labelValue"] = {"label": rng.choice(KEYS), "values": {
            v: rng.choice([0, 10, 33.3, 50, 100, 150]) for v in rng.sample(VALUES, 3)},
            "default": rng.choice([0, 5])}
    elif kind == "num":
        src = rng.choice(["label", "annotation"])
        r["numeric"] = {src: rng.choice(KEYS if src == "label" else ANN_KEYS),
                        "prefer": rng.choice(["highest", "lowest"])}
    elif kind == "alloc":
        r["allocation"] = {"strategy": rng.choice(["least", "most"])}
        if rng.random() < 0.5:
            r["allocation"]["resources"] = [
                {"name": n, "weight": rng.randint(1, 5)}
                for n in rng.sample(["cpu", "memory", "example.com/gpu"], rng.randint(1, 3))]
    elif kind == "jmes":
        r["jmespath"] = rng.choice([
            "to_number(node.metadata.labels.n)",
            "length(keys(node.metadata.labels))",
            "to_number(node.metadata.annotations.lat)",
            "quantity(node.status.allocatable.cpu)",
            "node.metadata.name",
        ])
    else:
        r["cel"] = rng.choice(CEL_SCORES)
    return r


def policy_doc(rng: random.Random) -> dict[str, Any]:
    applies: dict[str, Any] = {}
    if rng.random() < 0.3:
        applies["namespaces"] = {"exclude": ["kube-system"]}
    if rng.random() < 0.4:
        applies["labelSelector"] = _selector(rng, False)
    if rng.random() < 0.3:
        applies["annotationSelector"] = {"matchExpressions": [
            {"key": rng.choice(ANN_KEYS), "operator": "Exists"}]}
    if rng.random() < 0.2:
        applies["condition"] = "spec.priority > `5`"
    if rng.random() < 0.2:
        applies["podGroup"] = rng.choice([{"member": True}, {"member": False},
                                          {"names": [rng.choice(GROUPS)]}])
    spec: dict[str, Any] = {"filters": [filter_rule(rng, i) for i in range(rng.randint(0, 3))],
                            "scores": [_score(rng, i) for i in range(rng.randint(0, 3))]}
    if applies:
        spec["appliesTo"] = applies
    return make_policy(**spec)


METRICS = ["latency_ms", "load"]


def metric_policy_doc(rng: random.Random) -> dict[str, Any]:
    scores = [_score(rng, i) for i in range(rng.randint(0, 2))]
    for i in range(rng.randint(1, 2)):
        scores.append({"id": f"m{i}", "weight": rng.randint(1, 100),
                       "normalize": rng.choice(["minmax", "max", "none"]),
                       "metric": {"name": rng.choice(METRICS),
                                  "prefer": rng.choice(["highest", "lowest"]),
                                  "missing": rng.choice(["worst", "neutral", "skip"])}})
    rng.shuffle(scores)
    return make_policy(scores=scores)


def metrics_cache(rng: random.Random, names: list[str]) -> Any:
    from policyd.nodemetrics import MetricsCache

    now = [1000.0]
    cache = MetricsCache(clock=lambda: now[0])
    for metric in METRICS:
        if rng.random() < 0.1:
            continue  # no provider published this metric yet
        max_age = rng.choice([30.0, 60.0])
        # Two publishes: an old one (some values age out) and a recent one.
        for at in (now[0] - rng.choice([10.0, 45.0, 90.0]), now[0] - rng.choice([0.0, 5.0])):
            values = {n: rng.choice([0, 0.5, 1, 3, 12.5, 40, 100, 250, 1e-3,
                                        1e308, -1e308, 2.0**53, 2.0**60])
                      for n in names if rng.random() < 0.6}
            cache.update(metric, values, max_age=max_age, provider="p", timestamp=at)
    return cache
