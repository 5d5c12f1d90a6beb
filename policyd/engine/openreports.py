"""An audit as OpenReports objects (`openreports.io/v1alpha1` Report and ClusterReport),
the format Kyverno and Kubewarden write and Policy Reporter reads.

One Report per namespace (named `policyd`, scoped to the Namespace), and one
ClusterReport for what concerns no namespace; each result is one (pod, policy, rule):

- `fail`: an Enforce-mode policy's filter rule rejects the node the bound pod runs on
  (the scheduler would not place it there now); `warn`: the same of an Audit-mode
  policy; `pass`: a rule asked of the pod that accepts its node. A rule that does not
  apply to a pod (`bind` gave no check) is not reported for it.
- the rule's rejection message as the result's message; the node, the policy's
  plugin name and mode in `properties`; the pod as the result's resource (`resources`,
  with its uid).
- `skip`: a rule a policy exception exempts the pod from (not asked), with the
  exception's name, reason and expiry in `properties`.
- devices a bound pod holds that today's allocator would not give it (`warn`, policy
  `DynamicResources`, rule the finding's kind) go in the pod's namespace; node label
  keys that differ from a policy's only by case (`warn`, rule `node-label-key-case`,
  the Node as resource) in the ClusterReport.

Bounded: a report keeps at most `max_results` results (its `configuration.limits.
maxResults` says so), and no more than MAX_RESULTS_BYTES of them (etcd refuses an
object over 1.5 MiB, so a report of long messages would never be written), the most
severe first (fail, warn, skip, pass), then by pod, policy and rule; a message or
property longer than MAX_TEXT is cut. The summary counts the results kept, and the
annotation `policyd.io/results-dropped` how many were left out. Every object has the same name and
the label `app.kubernetes.io/managed-by: policyd`, so whoever writes them (the daemon's
leader, `kubectl apply` of `policyd audit -o openreports`) updates the same objects.

`Finding.key` names a result apart from its timestamp: the daemon keeps the time each
was first seen, so an unchanged report is written once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from policyd.engine.audit import AuditResult

API_VERSION = "openreports.io/v1alpha1"
GROUP = "openreports.io"
REPORT_NAME = "policyd"
SOURCE = "policyd"
MANAGED_BY = ("app.kubernetes.io/managed-by", "policyd")
DROPPED_ANNOTATION = "policyd.io/results-dropped"
DEFAULT_MAX_RESULTS = 1000
# The results' JSON a report holds at most: under etcd's default 1.5 MiB request limit
# with room for the rest of the object (metadata, managedFields, summary).
MAX_RESULTS_BYTES = 1 << 20
# A result's message or property value is cut to this many characters (a policy
# message may be 32,768, an exception's reason has no limit).
MAX_TEXT = 1024
CATEGORY = "Scheduling"

FAIL, WARN, ERROR, SKIP, PASS = "fail", "warn", "error", "skip", "pass"
RESULTS = (FAIL, WARN, ERROR, SKIP, PASS)  # most severe first: the order kept when bounded
LABEL_CASE_RULE = "node-label-key-case"
DEVICES_POLICY = "DynamicResources"
ENFORCE = "Enforce"  # policyd.policy.policy_schema.ENFORCE (the engine does not import it)


@dataclass(frozen=True, slots=True)
class Finding:
    """One result, before it has a timestamp."""

    namespace: str  # "" for the ClusterReport
    result: str  # one of RESULTS
    policy: str
    rule_id: str  # the rule's id (the report's `rule`)
    message: str
    resource: Mapping[str, str]  # an ObjectReference
    properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> tuple[Any, ...]:
        """Everything but the time: a result whose key is unchanged is the same one."""
        return (self.namespace, self.result, self.policy, self.rule_id, self.message,
                tuple(sorted(self.resource.items())), tuple(sorted(self.properties.items())))

    def order(self) -> tuple[int, str, str, str]:
        return (RESULTS.index(self.result), self.resource.get("name", ""), self.policy,
                self.rule_id)


def _pod_ref(key: str, uid: str) -> dict[str, str]:
    namespace, _, name = key.partition("/")
    ref = {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name}
    if uid:
        ref["uid"] = uid
    return ref


def findings(result: AuditResult) -> list[Finding]:
    """Every result of an audit, pass ones included (see the module's mapping)."""
    out: list[Finding] = []
    violated: dict[tuple[str, str, str], str] = {}  # (pod, policy, rule) -> message
    for v in result.violations:
        violated[(v.pod, v.policy, v.rule)] = v.message
        out.append(Finding(
            v.pod.partition("/")[0], FAIL if v.mode == ENFORCE else WARN, v.policy, v.rule,
            v.message, _pod_ref(v.pod, result.uids.get(v.pod, "")),
            {"node": v.node, "plugin": v.plugin, "mode": v.mode}))
    for checks in result.policies:
        for (pod, node), rules in zip(checks.pods, checks.rules, strict=True):
            for rule in rules:
                if (pod, checks.policy, rule) in violated:
                    continue
                out.append(Finding(
                    pod.partition("/")[0], PASS, checks.policy, rule,
                    f"node {node} passes the rule", _pod_ref(pod, result.uids.get(pod, "")),
                    {"node": node, "plugin": checks.plugin, "mode": checks.mode}))
    for e in result.exempted:
        out.append(Finding(
            e.pod.partition("/")[0], SKIP, e.policy, e.rule,
            f"exempted by exception {e.exception}: {e.reason} (expires {e.expires})",
            _pod_ref(e.pod, result.uids.get(e.pod, "")),
            {"node": e.node, "plugin": e.plugin, "exception": e.exception,
             "reason": e.reason, "expires": e.expires}))
    for d in result.devices:
        props = {"node": d.node, "claim": d.claim}
        if d.request:
            props["request"] = d.request
        if d.device:
            props["device"] = d.device
        out.append(Finding(d.pod.partition("/")[0], WARN, DEVICES_POLICY, d.kind, d.message,
                           _pod_ref(d.pod, result.uids.get(d.pod, "")), props))
    for m in result.label_case:
        out.append(Finding("", WARN, m.policy, LABEL_CASE_RULE, m.describe(),
                           {"apiVersion": "v1", "kind": "Node", "name": m.node},
                           {"plugin": m.plugin, "nodeKey": m.node_key,
                            "policyKey": m.policy_key}))
    return out


def _timestamp(seconds: float) -> dict[str, int]:
    return {"seconds": int(seconds), "nanos": 0}


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 1] + "…"


def report_object(namespace: str, found: Iterable[Finding], when: Callable[[Finding], float],
                  max_results: int = DEFAULT_MAX_RESULTS) -> dict[str, Any]:
    """The Report of `namespace` ("" : the ClusterReport) holding `found`, bounded."""
    ordered = sorted(found, key=Finding.order)
    summary = {r: 0 for r in (PASS, FAIL, WARN, ERROR, SKIP)}
    results = []
    size = 0
    for f in ordered[:max_results]:
        entry: dict[str, Any] = {
            "source": SOURCE, "policy": f.policy, "rule": f.rule_id, "category": CATEGORY,
            "result": f.result, "scored": True, "timestamp": _timestamp(when(f)),
            "message": _cut(f.message), "resources": [dict(f.resource)],
        }
        if f.properties:
            entry["properties"] = {k: _cut(v) for k, v in f.properties.items()}
        size += len(json.dumps(entry, separators=(",", ":"))) + 1
        if size > MAX_RESULTS_BYTES:
            break
        summary[f.result] += 1
        results.append(entry)
    dropped = len(ordered) - len(results)
    metadata: dict[str, Any] = {"name": REPORT_NAME, "labels": dict([MANAGED_BY])}
    if namespace:
        metadata["namespace"] = namespace
    if dropped:
        metadata["annotations"] = {DROPPED_ANNOTATION: str(dropped)}
    obj: dict[str, Any] = {
        "apiVersion": API_VERSION, "kind": "Report" if namespace else "ClusterReport",
        "metadata": metadata, "source": SOURCE,
        "configuration": {"limits": {"maxResults": max_results}},
        "summary": summary, "results": results,
    }
    if namespace:
        obj["scope"] = {"apiVersion": "v1", "kind": "Namespace", "name": namespace}
    return obj


def reports(found: Iterable[Finding], when: Callable[[Finding], float],
            max_results: int = DEFAULT_MAX_RESULTS) -> dict[str, dict[str, Any]]:
    """namespace ("" for the ClusterReport) -> its report; only scopes with results."""
    by_scope: dict[str, list[Finding]] = {}
    for f in found:
        by_scope.setdefault(f.namespace, []).append(f)
    return {ns: report_object(ns, fs, when, max_results)
            for ns, fs in sorted(by_scope.items())}


def report_list(objects: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The reports as one `v1` List (`kubectl apply -f -` takes it)."""
    return {"apiVersion": "v1", "kind": "List", "items": list(objects.values())}
