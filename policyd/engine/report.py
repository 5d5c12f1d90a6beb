"""Render scheduling results for people (text tables) and for programs (JSON)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from policyd.engine.cycle import AuditFinding, ScheduleResult
from policyd.engine.pod_group import GroupSummary
from policyd.engine.simulate import SimulationResult
from policyd.framework.fit_error import reason_counts
from policyd.framework.runtime import PluginScores
from policyd.framework.status import Status
from policyd.model.cluster import nominated_node_name


def _verdict(status: Status | None) -> str:
    if status is None or status.is_success:
        return "passed"
    if status.is_skip:
        return "skipped"
    return status.message


def _number(v: float | None) -> int | float | None:
    """A raw value as people write it: 3 rather than 3.0, 0.4 as is; None (missing) and
    values JSON cannot hold (inf, NaN) as null."""
    if v is None or not math.isfinite(v):
        return None
    return int(v) if float(v).is_integer() else float(v)


def _raw(p: PluginScores, i: int) -> int | float | None:
    """A plugin's raw score on node i. A policy's is its rule's raw value (null when
    it has several rules: see `rules`), not the integer its Score returns."""
    if p.rules is None:
        return p.raw[i]
    if len(p.rules) == 1:
        return _number(next(iter(p.rules.values()))[i][0])
    return None


def _plugin_json(p: PluginScores, i: int) -> dict[str, Any]:
    out: dict[str, Any] = {"raw": _raw(p, i), "normalized": p.normalized[i],
                           "weight": p.weight, "weighted": p.normalized[i] * p.weight}
    if p.rules is not None:
        out["rules"] = {rule_id: {"raw": _number(per_node[i][0]),
                                  "normalized": per_node[i][1]}
                        for rule_id, per_node in p.rules.items()}
    return out


def explain_json(result: ScheduleResult, *,
                 hints: Mapping[str, Mapping[str, Sequence[str]]] | None = None
                 ) -> dict[str, Any]:
    """The explain document: every node (in `node_order`), each with its filters'
    verdicts, its `reasons` in words (with the numbers kube-scheduler's reasons leave
    out, the nominated pods counted on it, and `hints`: node -> plugin -> lines)."""
    score_by_node: dict[str, dict[str, Any]] = {}
    totals: dict[str, int] = {}
    if result.scores is not None:
        for i, node in enumerate(result.scores.nodes):
            score_by_node[node.name] = {p.plugin: _plugin_json(p, i)
                                        for p in result.scores.plugins}
            totals[node.name] = result.scores.totals[i]
    feasible = set(result.feasible)
    nodes = []
    for name in node_order(result):
        details = result.filter_details[name]
        nodes.append({
            "name": name,
            "feasible": name in feasible,
            "chosen": name == result.node,
            "rejectedBy": (result.diagnosis.node_to_status[name].plugin
                           if name in result.diagnosis.node_to_status else None),
            "filters": {plugin: _verdict(st) for plugin, st in details.items()},
            "verdicts": {plugin: [{"subject": v.subject, "fits": v.fits,
                                   "verdict": v.verdict} for v in found]
                         for plugin, found in result.verdicts.get(name, {}).items()},
            "scores": score_by_node.get(name, {}),
            "total": totals.get(name),
            "reasons": {plugin: _reason(result, name, plugin, st, hints)
                        for plugin, st in _failed(details)},
            "nominatedPods": result.nominated_counted.get(name, []),
            "hints": [h for found in (hints or {}).get(name, {}).values() for h in found],
        })
    return {
        "pod": result.pod.key,
        "node": result.node,
        "message": result.message if result.node is None else "",
        "error": result.error.message if result.error else None,
        "feasibleNodes": result.feasible,
        "reasonCounts": reason_counts(result.diagnosis.node_to_status),
        "nominatedNode": nominated_node_name(result.pod) or None,
        "nomination": _nomination(result),
        "nodes": nodes,
        "postFilter": result.post_filter_notes,
        "audit": [_finding_json(a) for a in result.audits],
    }


def _failed(details: Mapping[str, Status | None]) -> list[tuple[str, Status]]:
    """The filters that rejected a node (not those that passed or had nothing to do)."""
    return [(pl, st) for pl, st in details.items()
            if st is not None and not st.is_success and not st.is_skip]


def node_order(result: ScheduleResult) -> list[str]:
    """The nodes as explain lists them: the chosen node, the other feasible nodes by
    total score (highest first; unscored ones after, in the cluster's order), then the
    rejected nodes grouped by reason, the most common reason first."""
    totals: dict[str, int] = {}
    if result.scores is not None:
        totals = {n.name: t for n, t in zip(result.scores.nodes, result.scores.totals,
                                            strict=True)}
    feasible = set(result.feasible)
    ok: list[str] = []
    groups: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for name, details in result.filter_details.items():
        failed = _failed(details)
        if name in feasible or not failed:
            ok.append(name)
        else:
            groups.setdefault(tuple((pl, st.message) for pl, st in failed), []).append(name)
    ok.sort(key=lambda n: (n != result.node, n not in totals, -totals.get(n, 0)))
    rejected = sorted(groups.values(), key=len, reverse=True)  # stable: first seen first
    return ok + [n for group in rejected for n in group]


def _reason(result: ScheduleResult, node: str, plugin: str, status: Status,
            hints: Mapping[str, Mapping[str, Sequence[str]]] | None) -> str:
    """Why `plugin` rejected `node`, in words: its reasons, each with the numbers the
    plugin's verdicts give for it (`Insufficient cpu (requests 2, free 0.5 of 4
    allocatable)`), the nominated pods counted there, and the hints for it."""
    detail = {v.subject: v.verdict
              for v in result.verdicts.get(node, {}).get(plugin, ()) if not v.fits}
    text = ", ".join(f"{r} ({detail[r]})" if r in detail else r
                     for r in status.reasons) or _verdict(status)
    extra = list((hints or {}).get(node, {}).get(plugin, ()))
    counted = result.nominated_counted.get(node)
    if counted:
        extra.append(f"counting {', '.join(counted)}, nominated here by preemption: a pod "
                     "of lower or equal priority may not take that room")
    return "; ".join([text, *extra])


def _nomination(result: ScheduleResult) -> str | None:
    """What the pod's own status.nominatedNodeName did in the cycle, or None."""
    own = nominated_node_name(result.pod)
    if not own:
        return None
    if own not in result.filter_details:
        return (f"nominated to node {own} (status.nominatedNodeName), which is not in the "
                "cluster: every node was tried")
    if result.node == own and result.scores is None:
        return (f"nominated to node {own} (status.nominatedNodeName): tried first, alone, "
                "as kube-scheduler does, and it fits, so it was chosen without scoring "
                "(the other nodes' verdicts are shown all the same)")
    return (f"nominated to node {own} (status.nominatedNodeName): tried first, alone, as "
            "kube-scheduler does; it does not fit there, so every node was tried")


def _finding_json(a: AuditFinding, *, nodes: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"policy": a.policy, "plugin": a.plugin, "rule": a.rule,
                           "reason": a.reason, "rejected": a.rejected,
                           "considered": a.considered, "chosenViolates": a.chosen_violates}
    if nodes:
        out["rejectedNodes"] = list(a.rejected_nodes)
    return out


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)


def explain_text(result: ScheduleResult, *, top: int = 0,
                 hints: Mapping[str, Mapping[str, Sequence[str]]] | None = None) -> str:
    """The explain answer for people: the decision, then the first `top` nodes of
    `node_order` (0: all) in a table, why each shown node was rejected (counted by
    reason for those not shown), and the per-node details of the shown nodes."""
    pod = result.pod.key
    lines = []
    if result.error is not None:
        lines.append(f"Pod {pod}: scheduling failed with an internal error: {result.message}")
    elif result.node is None:
        lines.append(f"Pod {pod} is unschedulable:")
        lines.append(f"  {result.message}")
    else:
        lines.append(f"Pod {pod} -> {result.node}")
    if (nomination := _nomination(result)) is not None:
        lines.append(f"  {nomination[0].upper()}{nomination[1:]}.")
    order = node_order(result)
    shown = order[:top] if top > 0 else order
    hidden = order[len(shown):]
    scores = result.scores
    score_plugins = [p.plugin for p in scores.plugins] if scores else []
    index = {n.name: i for i, n in enumerate(scores.nodes)} if scores else {}
    rows = [["", "NODE", "FILTERS", *score_plugins, "TOTAL"]]
    rejected: list[str] = []
    for name in shown:
        failed = _failed(result.filter_details[name])
        verdict = "passed" if not failed else "rejected by " + ", ".join(pl for pl, _ in failed)
        row = ["*" if name == result.node else "", name, verdict]
        if name in index and scores is not None:
            i = index[name]
            row += [str(p.normalized[i] * p.weight) for p in scores.plugins]
            row.append(str(scores.totals[i]))
        else:
            row += ["-"] * (len(score_plugins) + 1)
        rows.append(row)
        rejected += [f"  {name}  {pl}: {_reason(result, name, pl, st, hints)}"
                     for pl, st in failed]
    if result.filter_details:  # nothing to tabulate when the cluster has no nodes
        lines += ["", _table(rows)]
    if hidden:
        lines.append(f"... {len(hidden)} more node(s) (--top 0 shows all; -o json "
                     "lists every node)")
    hidden_counts = reason_counts({n: result.diagnosis.node_to_status.get(n, failed[0][1])
                                   for n in hidden
                                   if (failed := _failed(result.filter_details[n]))})
    if rejected or hidden_counts:
        lines += ["", "Why nodes were rejected (every filter, not only the first):", *rejected]
    if hidden_counts:
        lines.append(f"  {'and ' if rejected else ''}of the nodes not shown: " + ", ".join(
            f"{count} {reason}" for reason, count in hidden_counts.items()))
    lines += _hints_text(result, shown, hidden, hints)
    lines += _verdicts_text(result, shown)
    lines += _audit_text(result)
    for plugin, notes in result.post_filter_notes.items():
        lines += ["", f"{plugin}:", *(f"  {n}" for n in notes)]
    skipped = sorted({pl for d in result.filter_details.values() for pl, st in d.items()
                      if st is not None and st.is_skip})
    if skipped:
        lines += ["", "Filters with nothing to check for this pod: " + ", ".join(skipped)]
    if scores is not None and scores.plugins:
        weights = ", ".join(f"{p.plugin} {p.weight}" for p in scores.plugins)
        lines += ["", "Scores are normalized (0-100) x weight; the highest TOTAL wins, ties at "
                  f"random. Weights: {weights}."]
        lines += _policy_rules_text(result, shown)
    return "\n".join(lines)


def _hints_text(result: ScheduleResult, shown: Sequence[str], hidden: Sequence[str],
                hints: Mapping[str, Mapping[str, Sequence[str]]] | None) -> list[str]:
    """The hints about shown nodes that no rejection reason above carried (a node the
    plugin did not reject: a score rule that found no value there, say), and how many
    nodes not shown have any."""
    if not hints:
        return []
    out = []
    for name in shown:
        failed = {pl for pl, _ in _failed(result.filter_details[name])}
        for plugin, found in hints.get(name, {}).items():
            if plugin not in failed:
                out += [f"  {name}  {plugin}: {h}" for h in found]
    if hinted := sum(1 for n in hidden if hints.get(n)):
        out.append(f"  {'and ' if out else ''}{hinted} node(s) not shown (-o json: "
                   "each node's hints)")
    return ["", "Label keys that differ from a policy's only by case:", *out] if out else []


# Rejected nodes named per audited rule in text; json names them all.
_NODES_LISTED = 20


def _audit_text(result: ScheduleResult) -> list[str]:
    """Policies in Audit mode, apart from the tables above (they filtered and scored
    nothing): each audited rule's verdict over the feasible nodes, and the nodes it
    would have rejected."""
    if not result.audits:
        return []
    considered = result.audits[0].considered
    out = ["", f"Audited (not enforced): judged on the {considered} feasible node(s); "
           "they rejected and scored nothing:"]
    for a in result.audits:
        if a.rejected:
            out.append(f"  {a.describe(result.node)}")
            shown = a.rejected_nodes[:_NODES_LISTED]
            more = len(a.rejected_nodes) - len(shown)
            out.append(f"    would reject: {', '.join(shown)}"
                       + (f" (+{more} more: -o json lists them)" if more else ""))
        else:
            out.append(f"  policy {a.policy} (Audit), rule {a.rule}: passes all "
                       f"{a.considered} feasible node(s)")
    return out


def _verdicts_text(result: ScheduleResult, shown: Sequence[str]) -> list[str]:
    """Per shown node, the verdict on each part a plugin judges separately: which PV
    each claim takes, or why it cannot have one there. A verdict on one of the
    plugin's own reasons was said with that reason, and is not repeated."""
    by_plugin: dict[str, list[str]] = {}
    for name in shown:
        details = result.filter_details[name]
        for plugin, found in result.verdicts.get(name, {}).items():
            status = details.get(plugin)
            said = set(status.reasons) if status is not None else set()
            lines = [f"  {name}  {v.subject}: {'ok, ' if v.fits else 'no, '}{v.verdict}"
                     for v in found if v.subject not in said]
            if lines:
                by_plugin.setdefault(plugin, []).extend(lines)
    out = []
    for plugin, lines in by_plugin.items():
        out += ["", f"{plugin}, per claim on each node:", *lines]
    return out


def _policy_rules_text(result: ScheduleResult, shown: Sequence[str]) -> list[str]:
    """Each policy score rule's raw value and 0..100 score per node: the numbers behind a
    policy's column of the table above."""
    scores = result.scores
    if scores is None:
        return []
    columns = [(f"{p.plugin}/{rule_id}", per_node)
               for p in scores.plugins if p.rules for rule_id, per_node in p.rules.items()]
    if not columns:
        return []
    rows = [["NODE", *(name for name, _ in columns)]]
    index = {n.name: i for i, n in enumerate(scores.nodes)}
    for name in shown:
        if name not in index:
            continue
        i = index[name]
        cells = []
        for _, per_node in columns:
            raw, normalized = per_node[i]
            value = _number(raw)
            cells.append(f"{'missing' if value is None else value} -> {normalized}")
        rows.append([name, *cells])
    return ["", "Policy score rules, raw value -> 0..100 on each node:", _table(rows)]


def blocked_by(node_to_status: Mapping[str, Status]) -> dict[str, int]:
    """Plugin -> the nodes it rejected, most first."""
    counts = Counter((s.plugin or "PreFilter") for s in node_to_status.values())
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _placement_json(r: ScheduleResult) -> dict[str, Any]:
    """One pod's outcome; `audit` only for a pod an audited policy would have
    rejected somewhere (the findings, without node names: see explain)."""
    out: dict[str, Any] = {"pod": r.pod.key, "node": r.node,
                           "message": r.message if r.node is None else ""}
    if r.unschedulable and (blocked := blocked_by(r.diagnosis.node_to_status)):
        # Which plugin rejected how many nodes (the page's pod x plugin matrix).
        out["blockedBy"] = blocked
    if findings := r.findings:
        out["audit"] = [_finding_json(a, nodes=False) for a in findings]
    return out


def group_json(g: GroupSummary) -> dict[str, Any]:
    """A pod group's answer (simulate's `podGroups`, explain's `podGroup`)."""
    return {"podGroup": str(g.key), "api": g.key.api, "minCount": g.min_count,
            "scheduledBefore": g.before, "tried": g.tried, "placed": g.placed,
            "fits": [{"pod": pod, "node": node} for pod, node in g.fitted],
            "nodes": g.nodes,
            "notFitting": [{"reason": reason, "pods": n} for reason, n in g.missing],
            "error": g.error or None, "summary": g.describe()}


def simulate_json(sim: SimulationResult, *, notes: Sequence[str] = (),
                  warnings: Sequence[str] = ()) -> dict[str, Any]:
    return {
        "scheduled": sim.scheduled,
        "unschedulable": sum(1 for r in sim.results if r.unschedulable),
        "errors": sum(1 for r in sim.results if r.error is not None),
        "placements": [
            _placement_json(r) for r in sim.results
        ],
        "gated": [{"pod": g.pod.key, "plugin": g.plugin, "reason": g.reason}
                  for g in sim.gated],
        "skipped": [{"pod": s.pod.key, "reason": s.reason} for s in sim.skipped],
        "preemptions": [{"pod": p.pod.key, "node": p.node,
                         "evicted": [v.key for v in p.victims]} for p in sim.preemptions],
        "podGroups": [group_json(g) for g in sim.groups],
        "notes": list(notes),
        "warnings": list(warnings),
    }


def simulate_text(sim: SimulationResult, *, notes: Sequence[str] = ()) -> str:
    rows = [["POD", "NODE", "WHY NOT"]]
    for r in sim.results:
        rows.append([r.pod.key, r.node or "<none>", r.message if r.node is None else ""])
    out = [_table(rows)] if sim.results else ["no pending pods to schedule"]
    if sim.preemptions:
        out += ["", "Preemptions (pods evicted to make room, as the scheduler would):"]
        out += [f"  {p.pod.key} on {p.node}: evicted "
                f"{', '.join(v.key for v in p.victims) or 'nothing'}"
                for p in sim.preemptions]
    if sim.groups:
        out += ["", "Pod groups (each placed whole or not at all):"]
        out += [f"  {g.describe()}" for g in sim.groups]
    if sim.gated:
        out += ["", "Held out of the queue (not tried until what holds them changes):"]
        out += [f"  {g.pod.key}: {g.plugin}: {g.reason}" for g in sim.gated]
    if sim.skipped:
        out += ["", "Skipped (kube-scheduler would not try them):"]
        out += [f"  {s.pod.key}: {s.reason}" for s in sim.skipped]
    if notes:
        out += ["", *(f"note: {n}" for n in notes)]
    out.append("")
    unsched = sum(1 for r in sim.results if r.node is None)
    audited = sum(1 for r in sim.results if r.findings)
    out.append(f"{sim.scheduled} scheduled, {unsched} unschedulable"
               + (f", {audited} violating a policy in Audit mode (not enforced; "
                  "-o json lists the findings)" if audited else "")
               + (f", {len(sim.preemptions)} preempted" if sim.preemptions else "")
               + (f", {len(sim.skipped)} skipped" if sim.skipped else "")
               + (f", {len(sim.gated)} held out of the queue" if sim.gated else ""))
    return "\n".join(out)
