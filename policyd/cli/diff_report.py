"""`policyd diff`'s output: the summary counts first, then the details, as text, as a
JSON document (yaml: the same document), and as markdown for a pull-request comment
(a summary table, each list of details in a collapsible block).

Every format renders one `DiffResult` with the versions' labels, the notes and the
warnings; the registry `DIFF_FORMATS` is `-o`'s choice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from policyd.cli.options import yaml_text

if TYPE_CHECKING:  # the engine loads only when the command runs
    from policyd.engine.audit import Violation
    from policyd.engine.diff import DiffResult, GroupChange, Outcome, PodChange
    from policyd.engine.pod_group import GroupSummary

# A group's nodes named per side in text and markdown (JSON names them all).
MAX_NODES = 5
# The version of the JSON output's shape; bumped only on an incompatible change.
JSON_VERSION = 1
# Text and markdown list this many entries per section; JSON lists all.
MAX_LISTED = 50
# A pull-request comment holds at most 65,536 characters (GitHub; GitLab's notes are
# larger): markdown stays under this, leaving room for a bot's own lines around it,
# and cuts a cell longer than MAX_CELL (a policy message may be 32,768 characters).
MARKDOWN_LIMIT = 60_000
MAX_CELL = 300


@dataclass(frozen=True, slots=True)
class DiffReport:
    """What every format renders."""

    result: DiffResult
    old: str  # the versions' labels: a path, or the git ref and commit
    new: str
    notes: Sequence[str] = ()
    warnings: Sequence[str] = ()


def summary_rows(r: DiffResult) -> list[tuple[str, int]]:
    """(what, count) in the order every format shows them."""
    from policyd.engine.diff import MOVES, SAME, STARTS_FITTING, STILL_UNFIT, STOPS_FITTING, TIE

    pending = r.pending
    rows = [
        ("bound pods that become violations", len(r.new_violations)),
        ("bound pods' violations fixed", len(r.fixed_violations)),
        ("pending pods that start fitting", sum(c.change == STARTS_FITTING for c in pending)),
        ("pending pods that stop fitting", sum(c.change == STOPS_FITTING for c in pending)),
        ("placements that move", sum(c.change == MOVES for c in pending)),
        ("placements that may move (best nodes overlap)", sum(c.change == TIE for c in pending)),
        ("pending pods placed the same", sum(c.change == SAME for c in pending)),
        ("pending pods that fit in neither", sum(c.change == STILL_UNFIT for c in pending)),
        ("bound pods judged", r.bound_checked),
        ("bound pods not judged", len(r.skipped)),
    ]
    if r.groups:
        groups = r.groups
        rows += [
            ("pod groups compared (their pending pods as one)", len(groups)),
            ("pod groups that start fitting", sum(g.change == STARTS_FITTING for g in groups)),
            ("pod groups that stop fitting", sum(g.change == STOPS_FITTING for g in groups)),
            ("pod groups placed on other nodes (may move)", sum(g.change == TIE for g in groups)),
        ]
    if r.rescored:
        rows.append(("bound pods rescheduled (sample)", len(r.rescored)))
        rows.append(("of which would move", sum(c.change == MOVES for c in r.rescored)))
    return rows


def _policies_line(r: DiffResult) -> str:
    if not r.policies:
        return "policies: none added, removed or changed"
    return "policies: " + ", ".join(f"{c.policy} {c.change}" for c in r.policies)


def _where(o: Outcome) -> str:
    if o.node is None:
        return o.status
    score = f" (total {o.total})" if o.total is not None else ""
    tie = f", tied with {o.tied - 1} other node(s)" if o.tied > 1 else ""
    return f"{o.node}{score}{tie}"


def describe_change(c: PodChange) -> str:
    """One line per pod: `default/web-1: moves node-a (total 310) -> node-b (total
    340), the old node now 290`."""
    from policyd.engine.diff import STARTS_FITTING, STOPS_FITTING

    pod = c.pod + (f" (on {c.bound_to})" if c.bound_to else "")
    if c.change == STOPS_FITTING:
        return f"{pod}: stops fitting (was {_where(c.old)}): {c.new.message}"
    if c.change == STARTS_FITTING:
        return f"{pod}: starts fitting on {_where(c.new)} (was: {c.old.message})"
    now = ("" if c.old_node_now is None else f"; {c.old.node} now totals {c.old_node_now}")
    return f"{pod}: {c.change}: {_where(c.old)} -> {_where(c.new)}{now}"


def _group_side(summary: GroupSummary, whole: bool) -> str:
    fit = f"{len(summary.fitted)} of {summary.tried} fit"
    if not whole:
        return f"{fit}, each alone (not placed as one group)"
    if summary.error:
        return f"{fit}; the cycle failed: {summary.error}"
    if summary.placed:
        nodes = summary.nodes
        return f"placed on {len(nodes)} node{'s' if len(nodes) != 1 else ''} " \
               f"({', '.join(nodes[:MAX_NODES])}{', ...' if len(nodes) > MAX_NODES else ''})"
    return f"held ({fit})"


def _group_why(g: GroupChange) -> str:
    """Why the group is held: under the old version when it starts fitting, else under
    the new one; nothing when it is placed under both."""
    from policyd.engine.diff import STARTS_FITTING

    summary = g.old if g.change == STARTS_FITTING else g.new
    if summary.placed:
        return ""
    return "; ".join(f"{count} pod(s): {reason}" for reason, count in summary.missing)


def describe_group(g: GroupChange) -> str:
    """One line per group: `pod group ml/train (16 pending): stops fitting: placed on 4
    nodes (...) -> held (12 of 16 fit): 4 pod(s): 0/6 nodes are available: ...`."""
    why = _group_why(g)
    return (f"pod group {g.group} ({g.pods} pending): {g.change}: "
            f"{_group_side(g.old, g.old_whole)} -> {_group_side(g.new, g.new_whole)}"
            + (f": {why}" if why else ""))


def _violation(v: Violation) -> str:
    what = f"policy {v.policy} ({v.mode}), rule {v.rule}" if v.policy else f"plugin {v.plugin}"
    return f"{v.pod} on {v.node}: {what}: {v.message}"


def _listed(lines: list[str], title: str, entries: Sequence[str]) -> None:
    if not entries:
        return
    lines.append(f"{title} ({len(entries)}):")
    lines.extend(f"  {e}" for e in entries[:MAX_LISTED])
    if len(entries) > MAX_LISTED:
        lines.append(f"  ... and {len(entries) - MAX_LISTED} more (-o json lists them all)")


def diff_text(report: DiffReport) -> str:
    r = report.result
    lines = [f"policyd diff: {report.old} -> {report.new}", _policies_line(r)]
    width = max(len(what) for what, _ in summary_rows(r))
    lines += [f"  {what:<{width}}  {count}" for what, count in summary_rows(r)]
    _listed(lines, "bound pods that become violations", [_violation(v) for v in
                                                         r.new_violations])
    _listed(lines, "violations fixed", [_violation(v) for v in r.fixed_violations])
    _listed(lines, "pending pods", [describe_change(c) for c in r.changed(r.pending)])
    _listed(lines, "pod groups", [describe_group(g) for g in _changed_groups(r)])
    _listed(lines, "rescheduled bound pods", [describe_change(c) for c in r.rescored])
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines) + "\n"


def _outcome_json(o: Outcome) -> dict[str, Any]:
    return {"status": o.status, "node": o.node, "total": o.total, "tied": o.tied,
            "best": list(o.best), "feasible": o.feasible, "message": o.message}


def _change_json(c: PodChange) -> dict[str, Any]:
    return {"pod": c.pod, "boundTo": c.bound_to or None, "change": c.change,
            "old": _outcome_json(c.old), "new": _outcome_json(c.new),
            "oldNodeNow": c.old_node_now, "shift": c.shift}


def _changed_groups(r: DiffResult) -> list[GroupChange]:
    from policyd.engine.diff import CHANGES

    return [g for g in r.groups if g.change in CHANGES]


def _group_json(summary: GroupSummary, whole: bool) -> dict[str, Any]:
    return {"asGroup": whole, "minCount": summary.min_count, "scheduledBefore": summary.before,
            "tried": summary.tried, "placed": summary.placed,
            "fitted": [{"pod": pod, "node": node} for pod, node in summary.fitted],
            "nodes": summary.nodes,
            "missing": [{"reason": reason, "pods": count} for reason, count in summary.missing],
            "error": summary.error or None}


def _group_change_json(g: GroupChange) -> dict[str, Any]:
    return {"group": g.group, "pending": g.pods, "change": g.change,
            "old": _group_json(g.old, g.old_whole), "new": _group_json(g.new, g.new_whole)}


def _violation_json(v: Violation) -> dict[str, Any]:
    return {"pod": v.pod, "node": v.node, "policy": v.policy or None, "plugin": v.plugin,
            "rule": v.rule or None, "mode": v.mode, "message": v.message}


def diff_json(report: DiffReport) -> dict[str, Any]:
    """The documented shape (version 1): `summary` counts, `policies` changed,
    `placements` (pending pods whose answer changes), `podGroups` (every pod group
    whose pending pods were compared as one, changed or not), `rescored`, `newViolations` and
    `fixedViolations` (bound pods; `policy` and `rule` null for a built-in plugin's),
    `skipped` bound pods, `notes`, `warnings`."""
    r = report.result
    return {
        "version": JSON_VERSION,
        "old": report.old, "new": report.new,
        "summary": {
            "newViolations": len(r.new_violations),
            "fixedViolations": len(r.fixed_violations),
            "pending": len(r.pending),
            "pendingNotServed": r.pending_skipped,
            **{_camel(k): v for k, v in sorted(r.counts.items())},
            "boundChecked": r.bound_checked,
            "boundSkipped": len(r.skipped),
            "builtinFiltersCompared": r.builtins_checked,
            "rescored": len(r.rescored),
            "podGroups": len(r.groups),
            **{"podGroups" + _camel("-" + k): n for k, n in sorted(_group_counts(r).items())},
        },
        "policies": [{"policy": c.policy, "change": c.change} for c in r.policies],
        "placements": [_change_json(c) for c in r.changed(r.pending)],
        "podGroups": [_group_change_json(g) for g in r.groups],
        "rescored": [_change_json(c) for c in r.rescored],
        "newViolations": [_violation_json(v) for v in r.new_violations],
        "fixedViolations": [_violation_json(v) for v in r.fixed_violations],
        "skipped": [{"pod": s.pod, "node": s.node, "kind": s.kind, "reason": s.reason}
                    for s in r.skipped],
        "notes": list(report.notes),
        "warnings": list(report.warnings),
    }


def _group_counts(r: DiffResult) -> dict[str, int]:
    counts: dict[str, int] = {}
    for g in r.groups:
        counts[g.change] = counts.get(g.change, 0) + 1
    return counts


def _camel(name: str) -> str:
    first, *rest = name.split("-")
    return first + "".join(w.capitalize() for w in rest)


def _cell(text: str) -> str:
    """Text in a markdown table cell or note: at most MAX_CELL characters, escaped."""
    return _escape(text if len(text) <= MAX_CELL else text[:MAX_CELL - 1] + "…")


def _escape(text: str) -> str:
    """Markdown text: pipes escaped, on one line, HTML not taken."""
    return (text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
            .replace(">", "&gt;").replace("\n", " "))


class _Markdown:
    """The comment's lines, and the tables' rows kept within MARKDOWN_LIMIT: a table
    whose rows would pass it lists those that fit and says how many more there are."""

    # The closing lines of one table and its "... and N more" line, kept free.
    RESERVE = 200

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.size = sum(len(line) + 1 for line in lines)

    def add(self, *lines: str) -> None:
        self.lines += lines
        self.size += sum(len(line) + 1 for line in lines)

    def details(self, title: str, header: Sequence[str],
                rows: Sequence[Sequence[str]]) -> None:
        if not rows:
            return
        self.add("", f"<details><summary>{_cell(title)} ({len(rows)})</summary>", "",
                 "| " + " | ".join(header) + " |", "|" + "---|" * len(header))
        shown = 0
        for row in rows[:MAX_LISTED]:
            line = "| " + " | ".join(_cell(c) for c in row) + " |"
            if self.size + len(line) + 1 + self.RESERVE > MARKDOWN_LIMIT:
                break
            self.add(line)
            shown += 1
        if len(rows) > shown:
            cut = "" if shown == MAX_LISTED else ", the comment's length limit"
            self.add("", f"... and {len(rows) - shown} more (`-o json` lists them all"
                         f"{cut})")
        self.add("", "</details>")


def diff_markdown(report: DiffReport) -> str:
    r = report.result
    fails = bool(r.new_violations)
    lines = [f"### policyd diff: `{_escape(report.old)}` → `{_escape(report.new)}`", "",
             ("**Bound pods would become violations.**" if fails else
              "No bound pod becomes a violation."), "", _escape(_policies_line(r)), "",
             "| | pods |", "|---|---:|"]
    lines += [f"| {what} | {count} |" for what, count in summary_rows(r)]
    md = _Markdown(lines)
    violation_rows = [[v.pod, v.node, v.policy or "", v.plugin, v.rule, v.mode, v.message]
                      for v in r.new_violations]
    md.details("Bound pods that become violations",
               ["pod", "node", "policy", "plugin", "rule", "mode", "message"], violation_rows)
    md.details("Violations fixed",
               ["pod", "node", "policy", "plugin", "rule", "mode", "message"],
               [[v.pod, v.node, v.policy or "", v.plugin, v.rule, v.mode, v.message]
                for v in r.fixed_violations])

    def placement_rows(changes: Sequence[PodChange]) -> list[list[str]]:
        return [[c.pod, c.change, _where(c.old), _where(c.new),
                 "" if c.shift is None else f"{c.shift:+d}",
                 c.new.message if c.new.node is None else c.old.message]
                for c in changes]

    header = ["pod", "change", "old", "new", "total shift", "why not"]
    md.details("Pending pods", header, placement_rows(r.changed(r.pending)))
    md.details("Pod groups", ["group", "pending", "change", "old", "new", "why not"],
               [[g.group, str(g.pods), g.change, _group_side(g.old, g.old_whole),
                 _group_side(g.new, g.new_whole),
                 _group_why(g)]
                for g in _changed_groups(r)])
    md.details("Rescheduled bound pods (sample)", header, placement_rows(r.rescored))
    if report.notes:
        md.add("", *(f"> note: {_cell(n)}" for n in report.notes))
    return "\n".join(md.lines) + "\n"


DIFF_FORMATS: dict[str, Callable[[DiffReport], str]] = {
    "text": diff_text,
    "json": lambda report: json.dumps(diff_json(report), indent=2) + "\n",
    "yaml": lambda report: yaml_text(diff_json(report)),
    "markdown": diff_markdown,
    "html": lambda report: _html(report),
}


def _html(report: DiffReport) -> str:
    from policyd.cli.html_page import html_page

    return html_page("diff", diff_json(report))
