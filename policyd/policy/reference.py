"""A plain, obviously-correct evaluator of a policy document, for testing the compiler.

It reads the policy dict on every call, evaluates JMESPath from source, matches labels
with its own few lines, and computes scores with Fractions (exact arithmetic): no
caching, no binding, no shared helpers with the compiled rules (`policyd/policy/rules/`)
beyond quantity parsing and pod requests. One small function per rule kind, looked up
by the kind's key as the compiler's registry does. Tests run both on generated cases
and require identical answers. Not for production use: it is slow on purpose.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import jmespath

from policyd.cel import compile_rule
from policyd.model.node_info import NodeInfo
from policyd.model.node_metrics import MetricsReader
from policyd.model.pod_groups import group_key
from policyd.model.quantity import resource_value
from policyd.model.records import Pod
from policyd.model.resources import pod_requests
from policyd.policy.jmes import OPTIONS


def _search(expr: str, data: Any) -> Any:
    return jmespath.search(expr, data, options=OPTIONS)


def _truthy(v: Any) -> bool:
    return not (v is None or v is False or v == "" or v == [] or v == {})


def _requirement(labels: Mapping[str, str], req: Mapping[str, Any]) -> bool:
    key, op, values = req["key"], req["operator"], req.get("values") or []
    has = key in labels
    value = labels.get(key)
    if op == "In":
        return has and value in values
    if op == "NotIn":
        return not has or value not in values
    if op == "Exists":
        return has
    if op == "DoesNotExist":
        return not has
    # Go's strconv.ParseInt: ASCII digits with an optional sign, within int64.
    m = re.fullmatch(r"([+-]?)0*([0-9]{1,19})", value) if isinstance(value, str) else None
    n = int(m.group(1) + m.group(2)) if m else None
    if n is None or not -(2**63) <= n < 2**63:
        return False
    return n > int(values[0]) if op == "Gt" else n < int(values[0])


def _selector(labels: Mapping[str, str], sel: Mapping[str, Any], labels_field: str) -> bool:
    for k, v in (sel.get(labels_field) or {}).items():
        if labels.get(k) != v:
            return False
    return all(_requirement(labels, r) for r in sel.get("matchExpressions") or [])


def applies(doc: Mapping[str, Any], pod: Pod) -> bool:
    a = doc["spec"].get("appliesTo") or {}
    ns = a.get("namespaces") or {}
    if ns.get("include") and pod.namespace not in ns["include"]:
        return False
    if pod.namespace in (ns.get("exclude") or []):
        return False
    if "labelSelector" in a and not _selector(pod.labels, a["labelSelector"], "matchLabels"):
        return False
    if "annotationSelector" in a and not _selector(
            pod.annotations, a["annotationSelector"], "matchAnnotations"):
        return False
    if "podGroup" in a:
        group = group_key(pod)
        member = a["podGroup"].get("member")
        if member is not None and member != (group is not None):
            return False
        names = a["podGroup"].get("names")
        if names is not None and (group is None or group.name not in names):
            return False
    if a.get("condition"):
        try:
            return _truthy(_search(a["condition"], pod.raw))
        except Exception:
            return False
    return True


def _annotation_to_node_label(r: Mapping[str, Any], doc: Mapping[str, Any], pod: Pod,
                              info: NodeInfo) -> bool | None:
    ann = pod.annotations.get(r["annotation"])
    if ann is None or ("value" in r and ann != r["value"]):
        return None
    want = ann if r.get("useAnnotationValue") else r.get("labelValue")
    labels = info.node.labels
    return r["label"] in labels and labels[r["label"]] == want


def _node_labels(r: Mapping[str, Any], doc: Mapping[str, Any], pod: Pod,
                 info: NodeInfo) -> bool | None:
    return _selector(info.node.labels, r, "matchLabels")


def _headroom(h: Mapping[str, Any], doc: Mapping[str, Any], pod: Pod,
              info: NodeInfo) -> bool | None:
    res = h["resource"]
    alloc = info.node.allocatable.get(res, 0)
    if res == "pods":
        used = len(info.pods) + 1
    else:
        used = info.requested.get(res, 0) + pod_requests(pod).get(res, 0)
    if "quantity" in h:
        return alloc - used >= resource_value(res, h["quantity"])
    return Fraction(alloc - used) >= Fraction(alloc) * Fraction(str(h["percent"])) / 100


def _require_extended_resource(e: Mapping[str, Any], doc: Mapping[str, Any], pod: Pod,
                               info: NodeInfo) -> bool | None:
    return info.node.allocatable.get(e["name"], 0) >= resource_value(
        e["name"], e.get("quantity", 1))


def _max_pods_per_node(cap: int, doc: Mapping[str, Any], pod: Pod,
                       info: NodeInfo) -> bool | None:
    same = [p for p in info.pods.values() if p.uid != pod.uid and applies(doc, p)]
    return len(same) < cap


def _jmespath_filter(expr: str, doc: Mapping[str, Any], pod: Pod,
                     info: NodeInfo) -> bool | None:
    try:
        return _truthy(_search(expr, {"pod": pod.raw, "node": info.node.raw}))
    except Exception:
        return False


def _cel_objects(pod: Pod, info: NodeInfo) -> dict[str, Any]:
    """The whole raw objects, each with its `labels`/`annotations` shortcuts."""
    out = {}
    for name, raw in (("pod", pod.raw), ("node", info.node.raw)):
        meta = raw.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        out[name] = {**raw, **{k: meta[k] if isinstance(meta.get(k), dict) else {}
                               for k in ("labels", "annotations")}}
    return out


def _cel(expr: str, pod: Pod, info: NodeInfo) -> Any:
    return compile_rule(expr, {"pod": dict, "node": dict}).evaluate(_cel_objects(pod, info))


def _cel_filter(expr: str, doc: Mapping[str, Any], pod: Pod, info: NodeInfo) -> bool | None:
    try:
        return _cel(expr, pod, info) is True
    except Exception:
        return False


# Per filter kind: whether the node passes (None: the rule is inactive for the pod).
_FILTERS: dict[str, Callable[[Any, Mapping[str, Any], Pod, NodeInfo], bool | None]] = {
    "annotationToNodeLabel": _annotation_to_node_label,
    "nodeLabels": _node_labels,
    "headroom": _headroom,
    "requireExtendedResource": _require_extended_resource,
    "maxPodsPerNode": _max_pods_per_node,
    "jmespath": _jmespath_filter,
    "cel": _cel_filter,
}
# Filter kinds that read other nodes' pods: (spec, pod, node, every node) -> passes.
_CLUSTER_FILTERS: dict[str, Callable[[Any, Pod, NodeInfo, Sequence[NodeInfo]],
                                     bool | None]] = {}
# The kinds whose rejection evicting pods can resolve.
_RESOLVABLE = {"headroom", "maxPodsPerNode"}


def _kind(rule: Mapping[str, Any], kinds: Mapping[str, Any]) -> str:
    found = [k for k in kinds if k in rule]
    if len(found) != 1:
        raise ValueError(f"rule {rule.get('id')!r}: expected one of {list(kinds)}, "
                         f"found {found}")
    return found[0]


def _same_topology(spec: Mapping[str, Any], pod: Pod, info: NodeInfo,
                   nodes: Sequence[NodeInfo]) -> bool | None:
    """Every node's pods searched for the pod's group mates (the plain way, not the
    cluster's group index)."""
    group = group_key(pod)
    if group is None:
        return None
    key = spec["key"]
    domains = {n.node.labels[key] for n in nodes for p in n.pods.values()
               if p.uid != pod.uid and group_key(p) == group and key in n.node.labels}
    value = info.node.labels.get(key)
    return value is not None and (not domains or value in domains)


def filter_node(doc: Mapping[str, Any], pod: Pod, info: NodeInfo,
                nodes: Sequence[NodeInfo] = ()) -> list[tuple[str, bool]] | None:
    """None when the policy does not apply; else the failing rules as
    (message, unresolvable), in rule order. `nodes`: every node with its pods, for
    the rules that read other nodes (sameTopology)."""
    if not applies(doc, pod):
        return None
    out: list[tuple[str, bool]] = []
    for rule in doc["spec"].get("filters") or []:
        kind = _kind(rule, {**_FILTERS, **_CLUSTER_FILTERS})
        if kind in _CLUSTER_FILTERS:
            passes = _CLUSTER_FILTERS[kind](rule[kind], pod, info, nodes)
        else:
            passes = _FILTERS[kind](rule[kind], doc, pod, info)
        if passes is False:
            out.append((rule["message"], kind not in _RESOLVABLE))
    return out


_CLUSTER_FILTERS["sameTopology"] = _same_topology


def _number(v: Any) -> Fraction | None:
    """Exact value of a number or a string holding a JSON number (its decimal text, not
    the float); None for anything else and for numbers beyond float64's range."""
    text = v if isinstance(v, str) else None
    if text is not None:
        # json.loads is the grammar, minus its extensions (NaN, Infinity) and the
        # whitespace it allows around a document.
        if text != text.strip(" \t\n\r"):
            return None
        try:
            v = json.loads(text, parse_constant=_not_a_number)
        except ValueError:
            return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    try:
        if not math.isfinite(v):
            return None
    except OverflowError:  # an integer beyond float64
        return None
    return Fraction(text if text is not None else str(v))


def _not_a_number(name: str) -> Any:
    raise ValueError(name)


def _metric(m: Mapping[str, Any], pod: Pod, info: NodeInfo,
            metrics: MetricsReader | None) -> Fraction | None:
    snap = metrics.snapshot(m["name"]) if metrics is not None else None
    entry = snap.values.get(info.node.name) if snap is not None else None
    if snap is None or entry is None or metrics is None \
            or metrics.now() - entry[1] > snap.max_age:
        return None
    return _number(entry[0])


def _label_value(lv: Mapping[str, Any], pod: Pod, info: NodeInfo,
                 metrics: MetricsReader | None) -> Fraction | None:
    default = Fraction(str(lv.get("default", 0)))
    v = info.node.labels.get(lv["label"])
    if v is None or v not in lv["values"]:
        return default
    return Fraction(str(lv["values"][v]))


def _numeric(n: Mapping[str, Any], pod: Pod, info: NodeInfo,
             metrics: MetricsReader | None) -> Fraction | None:
    source = info.node.labels if "label" in n else info.node.annotations
    return _number(source.get(n.get("label", n.get("annotation"))))


def _allocation(a: Mapping[str, Any], pod: Pod, info: NodeInfo,
                metrics: MetricsReader | None) -> Fraction | None:
    resources = a.get("resources") or [{"name": "cpu"}, {"name": "memory"}]
    total = 0
    wsum = 0
    for r in resources:
        name, w = r["name"], r.get("weight", 1)
        alloc = info.node.allocatable.get(name, 0)
        if alloc == 0:
            continue
        if name in ("cpu", "memory"):
            req = info.non_zero_requested.get(name, 0) + pod_requests(
                pod, non_zero=True).get(name, 0)
        else:
            req = info.requested.get(name, 0) + pod_requests(pod).get(name, 0)
        if a["strategy"] == "most":
            s = min(req, alloc) * 100 // alloc
        else:
            s = 0 if req > alloc else (alloc - req) * 100 // alloc
        total += s * w
        wsum += w
    return Fraction(total // wsum) if wsum else Fraction(0)


def _jmespath_score(expr: str, pod: Pod, info: NodeInfo,
                    metrics: MetricsReader | None) -> Fraction | None:
    try:
        return _number(_search(expr, {"pod": pod.raw, "node": info.node.raw}))
    except Exception:
        return None


def _cel_score(expr: str, pod: Pod, info: NodeInfo,
               metrics: MetricsReader | None) -> Fraction | None:
    try:
        v = _cel(expr, pod, info)
    except Exception:
        return None
    # Numbers only: a string result is missing even when it holds a number.
    return None if isinstance(v, str) else _number(v)


# Per score kind: the node's raw value (None: missing).
_SCORES: dict[str, Callable[[Any, Pod, NodeInfo, MetricsReader | None], Fraction | None]] = {
    "labelValue": _label_value,
    "numeric": _numeric,
    "allocation": _allocation,
    "jmespath": _jmespath_score,
    "metric": _metric,
    "cel": _cel_score,
}


# The largest magnitude a raw value may have (docs/policy-language.md, "Numbers and
# quantities"): beyond it the value is missing.
_MAX_RAW = 2**53


def _raw(rule: Mapping[str, Any], pod: Pod, info: NodeInfo,
         metrics: MetricsReader | None = None) -> Fraction | None:
    kind = _kind(rule, _SCORES)
    v = _SCORES[kind](rule[kind], pod, info, metrics)
    # The bound is on the value as a float64 holds it (the nearest double), which is
    # what the scheduler reads: 2^53 + 1 is 2^53 there, and counts.
    if v is not None and not abs(float(v)) <= _MAX_RAW:
        return None
    return v


def _clamp(x: Fraction) -> int:
    return max(0, min(100, math.floor(x)))


def _reverse(rule: Mapping[str, Any]) -> bool:
    if "numeric" in rule:
        return bool(rule["numeric"].get("prefer") == "lowest")
    if "metric" in rule:
        return bool(rule["metric"].get("prefer") == "lowest")
    return bool(rule.get("reverse", False))


def _normalized(rule: Mapping[str, Any], raws: list[Fraction | None]) -> list[int]:
    rev = _reverse(rule)
    method = rule["normalize"]
    present = [v for v in raws if v is not None]
    out: list[int] = []
    missing = rule["metric"].get("missing", "worst") if "metric" in rule else "worst"
    for v in raws:
        if v is None:
            out.append(50 if missing == "neutral" else 0)
            continue
        if method == "none":
            s = _clamp(v)
        elif method == "max":
            hi = max(max(present), Fraction(0))
            s = _clamp(max(v, Fraction(0)) * 100 / hi) if hi > 0 else 0
        else:
            lo, hi = min(present), max(present)
            if hi == lo:
                out.append(100)
                continue
            s = _clamp((v - lo) * 100 / (hi - lo))
        out.append(100 - s if rev else s)
    return out


def scores(doc: Mapping[str, Any], pod: Pod, infos: Sequence[NodeInfo],
           metrics: MetricsReader | None = None) -> list[int] | None:
    """The policy's final 0..100 score per node, or None when it does not score.
    `metrics`: where `metric` rules read values (None: every value missing)."""
    rules = doc["spec"].get("scores") or []
    if not rules or not applies(doc, pod):
        return None
    raws = [[_raw(r, pod, i, metrics) for i in infos] for r in rules]
    per_rule = [_normalized(r, raw) for r, raw in zip(rules, raws, strict=True)]
    out = []
    for i in range(len(infos)):
        # A `missing: skip` metric rule does not count on a node without a value.
        counted = [k for k, r in enumerate(rules)
                   if not ("metric" in r and r["metric"].get("missing") == "skip"
                           and raws[k][i] is None)]
        wsum = sum(rules[k]["weight"] for k in counted)
        out.append(sum(rules[k]["weight"] * per_rule[k][i] for k in counted) // wsum
                   if wsum else 0)
    return out
