"""Checks the JSON Schema cannot express: Kubernetes name syntax, JMESPath, quantities,
rules that can never match, duplicates, and case traps.

Runs on documents that may also have schema errors, so every access checks its type and
skips what the schema already reports. Each check yields `Problem`s with a rule id:

- `label-key`, `label-value`, `annotation-key`, `namespace`, `resource-name`: what the
  Kubernetes API server would reject;
- `jmespath`: parse errors (with the column inside the expression) and unknown
  functions;
- `cel`: compile errors (at their line and column inside the expression), a result
  type the rule cannot use (a filter needs bool, a score int, uint or double), and a
  worst-case cost over `celexpr.MAX_COST` (a warning);
- `quantity`: quantities that do not parse or are negative;
- `never-matches`: requirements that contradict each other (In a and NotIn a; Gt 5 and
  Lt 6; DoesNotExist and Exists), or a policy that can apply to no pod;
- `duplicate-id`, `duplicate-name`, `duplicate-plugin-name`, `builtin-plugin-name` (a
  built-in plugin's name, or any other kube-scheduler v1.36 plugin's);
- `key-case` (warning): a label key equal to another used key or a well-known
  Kubernetes key except for case;
- `score-range` (warning): points that `normalize: none` will clamp, or normalization
  that stretches values already in 0..100;
- `number`: infinities and NaN (`.inf`, `.nan`);
- `useless-policy` (warning): neither filters nor scores;
- `audit-scores` (warning): scores on a policy in Audit mode, which never count;
- `message`: a filter message with a line break (error), with ", " or leading or
  trailing whitespace (warnings): each breaks the one-line FailedScheduling text.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from policyd.clock import REAL_CLOCK
from policyd.model import k8snames
from policyd.model.int64 import parse_int64
from policyd.model.quantity import parse_quantity
from policyd.model.spelling import show_value
from policyd.plugins import names as builtin
from policyd.policy import celexpr, jmes
from policyd.policy.policy_schema import AUDIT
from policyd.policy.scopes import ALL_RULES, parse_expiry
from policyd.problems import ERROR, WARNING, Problem
from policyd.sourcefile import JsonPath, SourceDocument

# Everything str.splitlines() breaks at: any of them splits a one-line message.
_LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"


@dataclass(frozen=True, slots=True)
class KeyUse:
    """A label key used by a policy, for the cross-file case check."""

    doc: SourceDocument
    path: JsonPath
    key: str
    at_key: bool = False  # the label key is a mapping key (matchLabels): point at it


def check_document(doc: SourceDocument, key_uses: list[KeyUse]) -> list[Problem]:
    """Semantic problems of one SchedulingPolicy document; appends its label keys."""
    c = _Checker(doc, key_uses)
    c.run()
    return c.problems


class _Checker:
    def __init__(self, doc: SourceDocument, key_uses: list[KeyUse]) -> None:
        self.doc = doc
        self.key_uses = key_uses
        self.problems: list[Problem] = []
        # appliesTo.labelSelector's well-formed requirements, which an exception's
        # podSelector must be able to meet together with.
        self.applies_labels: list[tuple[JsonPath, str, str, list[str]]] = []

    def add(self, path: JsonPath, rule: str, message: str, *, level: str = ERROR,
            key: bool = False, detail: tuple[str, ...] = (),
            at: tuple[int, int] | None = None) -> None:
        self.problems.append(self.doc.problem(path, rule, message, level=level, key=key,
                                              detail=detail, at=at))

    # -- name checks --------------------------------------------------------------
    def label_key(self, path: JsonPath, key: Any, *, key_pos: bool = False) -> None:
        if not isinstance(key, str):
            return
        for msg in k8snames.qualified_name(key):
            self.add(path, "label-key", f"invalid label key {key!r}: {msg}", key=key_pos)
        # Pod and node label keys alike: `App` next to `app` is a trap either way.
        self.key_uses.append(KeyUse(self.doc, path, key, key_pos))

    def label_value(self, path: JsonPath, value: Any) -> None:
        if not isinstance(value, str):
            return
        for msg in k8snames.label_value(value):
            self.add(path, "label-value", f"invalid label value {value!r}: {msg}")

    def annotation_key(self, path: JsonPath, key: Any, *, key_pos: bool = False) -> None:
        if not isinstance(key, str):
            return
        # The API server validates annotation keys lowercased (ValidateAnnotations).
        for msg in k8snames.qualified_name(key.lower()):
            self.add(path, "annotation-key", f"invalid annotation key {key!r}: {msg}",
                     key=key_pos)

    def expression(self, path: JsonPath, source: Any) -> None:
        if not isinstance(source, str):
            return
        for err in jmes.check(source):
            at = self.doc.column_in_scalar(path, err.offset) if "\n" not in source else None
            self.add(path, "jmespath", err.message, detail=err.caret(), at=at)

    def cel(self, path: JsonPath, source: Any, wanted: frozenset[str], what: str) -> None:
        if not isinstance(source, str):
            return
        for err in celexpr.check(source, wanted, what):
            at = self.doc.column_in_scalar(path, err.offset()) \
                if err.line and "\n" not in source else None
            self.add(path, "cel", err.message, detail=err.caret(), at=at,
                     level=WARNING if err.warning else ERROR)

    def quantity(self, path: JsonPath, value: Any) -> None:
        # Other types are schema errors, .inf and .nan `finite_numbers` errors: one each.
        if value is None or isinstance(value, bool) or not isinstance(value, str | int | float) \
                or (isinstance(value, float) and not math.isfinite(value)):
            return

        try:
            q = parse_quantity(value)
        except ValueError as exc:
            self.add(path, "quantity", str(exc))
            return
        if q < 0:
            self.add(path, "quantity", f"quantity {show_value(value)} must not be negative")

    # -- requirements -------------------------------------------------------------
    def requirements(self, path: JsonPath, selector: Any, *,
                     annotations: bool = False) -> list[tuple[JsonPath, str, str, list[str]]]:
        """Check matchLabels/matchExpressions; return (path, key, op, values) triples."""
        out: list[tuple[JsonPath, str, str, list[str]]] = []
        if not isinstance(selector, Mapping):
            return out
        labels_field = "matchAnnotations" if annotations else "matchLabels"
        match_labels = selector.get(labels_field)
        if isinstance(match_labels, Mapping):
            for k, v in match_labels.items():
                p = (*path, labels_field, k)
                if annotations:
                    self.annotation_key(p, k, key_pos=True)
                else:
                    self.label_key(p, k, key_pos=True)
                    self.label_value(p, v)
                if isinstance(v, str):
                    out.append((p, str(k), "In", [v]))
        exprs = selector.get("matchExpressions")
        if isinstance(exprs, list):
            for i, e in enumerate(exprs):
                p = (*path, "matchExpressions", i)
                if not isinstance(e, Mapping):
                    continue
                key, op, values = e.get("key"), e.get("operator"), e.get("values")
                if annotations:
                    self.annotation_key((*p, "key"), key)
                else:
                    self.label_key((*p, "key"), key)
                vals = [v for v in values if isinstance(v, str)] \
                    if isinstance(values, list) else []
                if op in ("In", "NotIn"):
                    if not vals:
                        self.add((*p, "values"), "schema",
                                 f"operator {op} needs at least one value", key=True)
                    if not annotations:
                        for j, v in enumerate(vals):
                            self.label_value((*p, "values", j), v)
                elif op in ("Exists", "DoesNotExist"):
                    if vals:
                        self.add((*p, "values"), "schema",
                                 f"operator {op} takes no values", key=True)
                elif op in ("Gt", "Lt"):
                    if len(vals) != 1:
                        self.add((*p, "values"), "schema",
                                 f"operator {op} takes exactly one integer value", key=True)
                    elif not _is_int(vals[0]):
                        self.add((*p, "values", 0), "label-value",
                                 f"operator {op} compares integers; {show_value(vals[0])} "
                                 "is not one")
                # Only well-formed requirements take part in the contradiction check:
                # a malformed one is reported above, once.
                well_formed = (op in ("In", "NotIn") and vals) or (
                    op in ("Exists", "DoesNotExist") and not vals) or (
                    op in ("Gt", "Lt") and len(vals) == 1 and _is_int(vals[0]))
                if isinstance(key, str) and well_formed:
                    out.append((p, key, str(op), vals))
        return out

    def never_matches(self, reqs: list[tuple[JsonPath, str, str, list[str]]],
                      what: str) -> None:
        for path, message in contradictions(reqs):
            self.add(path, "never-matches", f"{what} can never match: {message}")

    # -- the document -------------------------------------------------------------
    def run(self) -> None:
        data = self.doc.data
        if not isinstance(data, Mapping):
            return
        self.finite_numbers(data)
        spec = data.get("spec")
        if not isinstance(spec, Mapping):
            return
        self.applies_to(spec.get("appliesTo"))
        ids: dict[str, JsonPath] = {}
        filters = spec.get("filters")
        scores = spec.get("scores")
        if isinstance(filters, list):
            for i, rule in enumerate(filters):
                if isinstance(rule, Mapping):
                    self.rule_id(("spec", "filters", i), rule, ids)
                    self.filter_rule(("spec", "filters", i), rule)
        if isinstance(scores, list):
            for i, rule in enumerate(scores):
                if isinstance(rule, Mapping):
                    self.rule_id(("spec", "scores", i), rule, ids)
                    self.score_rule(("spec", "scores", i), rule)
        if spec.get("mode") == AUDIT and isinstance(scores, list) and scores:
            # Audit mode judges filters only: weights and rules here change nothing
            # until the policy is enforced, which a reader of the file would not guess.
            self.add(("spec", "scores"), "audit-scores",
                     "the policy is in Audit mode: its scores do not count (only its "
                     "filters are audited) until spec.mode is Enforce", level=WARNING)
        self.scopes(spec, [r.get("id") for r in filters or () if isinstance(r, Mapping)])
        if not filters and not scores and "filters" not in spec and "scores" not in spec:
            self.add(("spec",), "useless-policy",
                     "the policy has neither filters nor scores, so it does nothing",
                     level=WARNING)

    def scopes(self, spec: Mapping[str, Any], filter_ids: list[Any]) -> None:
        """spec.scopedModes and spec.exceptions (policy/scopes.py): what the schema
        cannot say."""
        applies = spec.get("appliesTo")
        spaces_of = applies.get("namespaces") if isinstance(applies, Mapping) else None
        include, exclude = ((spaces_of.get("include"), spaces_of.get("exclude"))
                            if isinstance(spaces_of, Mapping) else (None, None))
        seen_globs: set[str] = set()
        for i, entry in enumerate(spec.get("scopedModes") or ()):
            if not isinstance(entry, Mapping):
                continue
            globs = [g for g in entry.get("namespaces") or () if isinstance(g, str)]
            if globs and all(g in seen_globs or any(fnmatchcase(g, s) for s in seen_globs)
                             for g in globs):
                self.add(("spec", "scopedModes", i, "namespaces"), "scoped-mode-shadowed",
                         f"every namespace of this entry ({', '.join(globs)}) is taken by an "
                         "earlier entry: the first that matches decides, so this one never "
                         "does", level=WARNING)
            elif globs:
                self.outside_applied(("spec", "scopedModes", i, "namespaces"), globs,
                                     include, exclude, "scoped-mode-matches-nothing",
                                     "this entry decides no pod's mode")
            seen_globs.update(globs)
        names: set[str] = set()
        for i, e in enumerate(spec.get("exceptions") or ()):
            if not isinstance(e, Mapping):
                continue
            path: JsonPath = ("spec", "exceptions", i)
            name = e.get("name")
            if isinstance(name, str):
                if name in names:
                    self.add((*path, "name"), "exception-duplicate",
                             f"another exception of this policy is named {name!r}")
                names.add(name)
            for j, rule in enumerate(e.get("rules") or ()):
                if isinstance(rule, str) and rule != ALL_RULES and rule not in filter_ids:
                    known = ", ".join(str(r) for r in filter_ids) or "none"
                    self.add((*path, "rules", j), "exception-unknown-rule",
                             f"the policy has no filter rule {rule!r} (its filter rules: "
                             f"{known}; \"*\" for all)")
            expires = e.get("expires")
            if isinstance(expires, str):
                at = parse_expiry(expires)
                if at is None:
                    self.add((*path, "expires"), "exception-expiry",
                             f"{expires!r} is not an RFC 3339 time with a zone, such as "
                             "2027-01-31T00:00:00Z")
                elif at <= (now := REAL_CLOCK.wall()):
                    self.add((*path, "expires"), "exception-expired",
                             f"the exception expired at {expires}: it exempts nothing any "
                             "more (remove it, or extend it with a reason)", level=WARNING)
                elif at - now <= EXPIRING_SOON_DAYS * 86400:
                    # Said before it lapses, so the owner renews it or fixes the
                    # workload before its pods start being rejected.
                    self.add((*path, "expires"), "exception-expiring",
                             f"the exception expires at {expires}, within "
                             f"{EXPIRING_SOON_DAYS} days: then its pods are held to the "
                             "rule again", level=WARNING)
            match = e.get("match")
            if isinstance(match, Mapping):
                if not match:
                    self.add((*path, "match"), "exception-empty-match",
                             "match names no namespaces, workloads or podSelector: the "
                             "exception would exempt every pod; say which")
                spaces = match.get("namespaces")
                if isinstance(spaces, list) and spaces:
                    self.outside_applied((*path, "match", "namespaces"),
                                         [g for g in spaces if isinstance(g, str)],
                                         include, exclude, "exception-matches-nothing",
                                         "this exception matches no pod")
                if isinstance(match.get("podSelector"), Mapping):
                    selector = (*path, "match", "podSelector")
                    self.exception_labels(selector,
                                          self.requirements(selector, match["podSelector"]))

    def exception_labels(self, path: JsonPath,
                         reqs: list[tuple[JsonPath, str, str, list[str]]]) -> None:
        """An exception's podSelector that no pod's labels meet, alone or together with
        appliesTo.labelSelector (which every pod the policy asks must meet), matches no
        pod. A labelSelector that is itself impossible is never-matches' error."""
        for _, message in contradictions(reqs):
            self.add(path, "exception-matches-nothing",
                     f"the podSelector can never match: {message}", level=WARNING)
            return
        if any(contradictions(self.applies_labels)):
            return
        for _, message in contradictions(self.applies_labels + reqs):
            self.add(path, "exception-matches-nothing",
                     "no pod the policy applies to has these labels (with "
                     f"spec.appliesTo.labelSelector, {message}), so it matches no pod",
                     level=WARNING)
            return

    def outside_applied(self, path: JsonPath, globs: list[str], include: Any,
                        exclude: Any, rule: str, effect: str) -> None:
        """Namespaces (globs) the policy never applies in (appliesTo.namespaces: include
        and exclude are names): an exception or a scopedModes entry naming only those
        has no pod to act on; `effect` says what that means for it."""
        excluded = {n for n in exclude or () if isinstance(n, str)} \
            if isinstance(exclude, list) else set()
        if isinstance(include, list) and include:
            kept = [n for n in include if isinstance(n, str) and n not in excluded]
            if not any(fnmatchcase(n, g) for g in globs for n in kept):
                self.add(path, rule,
                         f"the policy applies only in {', '.join(kept) or 'no namespace'}: "
                         f"no namespace named here is among them, so {effect}",
                         level=WARNING)
        elif globs and all(not _is_glob(g) and g in excluded for g in globs):
            self.add(path, rule,
                     f"appliesTo.namespaces.exclude leaves out {', '.join(globs)}: the "
                     f"policy never applies there, so {effect}", level=WARNING)

    def finite_numbers(self, data: Any) -> None:
        """YAML can spell infinity and NaN (.inf, .nan); no policy field means them, and
        they would poison score arithmetic, so they are errors wherever they appear."""
        stack: list[tuple[JsonPath, Any]] = [((), data)]
        while stack:
            path, value = stack.pop()
            if isinstance(value, float) and not math.isfinite(value):
                self.add(path, "number", f"{show_value(value)} is not a finite number (YAML "
                                         "reads numbers beyond ±1.8e308 as ±.inf)")
            elif isinstance(value, int) and not isinstance(value, bool) \
                    and value.bit_length() > 1023:
                self.add(path, "number", f"{show_value(value)} is beyond ±1.8e308, the "
                                         "largest number a policy can use")
            elif isinstance(value, Mapping):
                stack.extend(((*path, k), v) for k, v in value.items())
            elif isinstance(value, list):
                stack.extend(((*path, i), v) for i, v in enumerate(value))

    def rule_id(self, path: JsonPath, rule: Mapping[str, Any], ids: dict[str, JsonPath]) -> None:
        rid = rule.get("id")
        if not isinstance(rid, str):
            return
        if rid in ids:
            line = self.doc.position(ids[rid])[0]
            self.add((*path, "id"), "duplicate-id",
                     f"rule id {rid!r} is already used at line {line}; ids must be unique "
                     "within a policy")
        else:
            ids[rid] = (*path, "id")

    def applies_to(self, applies: Any) -> None:
        if not isinstance(applies, Mapping):
            return
        base = ("spec", "appliesTo")
        ns = applies.get("namespaces")
        if isinstance(ns, Mapping):
            include = [n for n in ns.get("include") or [] if isinstance(n, str)] \
                if isinstance(ns.get("include"), list) else []
            exclude = [n for n in ns.get("exclude") or [] if isinstance(n, str)] \
                if isinstance(ns.get("exclude"), list) else []
            for field, names in (("include", include), ("exclude", exclude)):
                for i, n in enumerate(names):
                    for msg in k8snames.dns1123_label(n):
                        self.add((*base, "namespaces", field, i), "namespace",
                                 f"invalid namespace {n!r}: {msg}")
            if include and all(n in exclude for n in include):
                self.add((*base, "namespaces", "include"), "never-matches",
                         "the policy can never apply: every included namespace is also "
                         "excluded")
        reqs = self.requirements((*base, "labelSelector"), applies.get("labelSelector"))
        self.never_matches(reqs, "labelSelector")
        self.applies_labels = reqs
        areqs = self.requirements((*base, "annotationSelector"),
                                  applies.get("annotationSelector"),
                                  annotations=True)
        self.never_matches(areqs, "annotationSelector")
        self.expression((*base, "condition"), applies.get("condition"))

    def filter_message(self, path: JsonPath, message: Any) -> None:
        """The message becomes one reason of kube-scheduler's one-line FailedScheduling
        text (`0/3 nodes are available: 2 <message>, 1 Insufficient cpu.`)."""
        if not isinstance(message, str):
            return
        if any(c in message for c in _LINE_BREAKS):
            self.add(path, "message", "message contains a line break: the "
                     "FailedScheduling event and `kubectl describe pod` show every reason "
                     "on one line")
            return
        if ", " in message:
            self.add(path, "message", 'message contains ", ": kube-scheduler joins the '
                     'reasons of a FailedScheduling event with ", ", so this one reads as '
                     "two reasons", level=WARNING)
        if message != message.strip():
            self.add(path, "message", "message has leading or trailing whitespace, which "
                     "shows in the FailedScheduling text", level=WARNING)

    def filter_rule(self, path: JsonPath, rule: Mapping[str, Any]) -> None:
        self.filter_message((*path, "message"), rule.get("message"))
        a2l = rule.get("annotationToNodeLabel")
        if isinstance(a2l, Mapping):
            p = (*path, "annotationToNodeLabel")
            self.annotation_key((*p, "annotation"), a2l.get("annotation"))
            self.label_key((*p, "label"), a2l.get("label"))
            self.label_value((*p, "labelValue"), a2l.get("labelValue"))
            use = a2l.get("useAnnotationValue") is True
            has_value = "labelValue" in a2l
            if use and has_value:
                self.add((*p, "useAnnotationValue"), "schema",
                         "set either labelValue or useAnnotationValue: true, not both",
                         key=True)
            elif not use and not has_value:
                self.add(p, "schema", "set labelValue, or useAnnotationValue: true",
                         key=True)
            if use and isinstance(a2l.get("value"), str):
                self.label_value((*p, "value"), a2l.get("value"))
        node_labels = rule.get("nodeLabels")
        if isinstance(node_labels, Mapping):
            p = (*path, "nodeLabels")
            if not node_labels.get("matchLabels") and not node_labels.get("matchExpressions"):
                self.add(p, "schema", "nodeLabels needs matchLabels or matchExpressions",
                         key=True)
            reqs = self.requirements(p, node_labels)
            self.never_matches(reqs, "this rule")
        headroom = rule.get("headroom")
        if isinstance(headroom, Mapping):
            p = (*path, "headroom")
            self.resource((*p, "resource"), headroom.get("resource"))
            self.quantity((*p, "quantity"), headroom.get("quantity"))
        ext = rule.get("requireExtendedResource")
        if isinstance(ext, Mapping):
            p = (*path, "requireExtendedResource")
            name = ext.get("name")
            self.resource((*p, "name"), name)
            if isinstance(name, str) and not k8snames.is_extended_resource(name):
                self.add((*p, "name"), "resource-name",
                         f"{name!r} is not an extended resource (those are named "
                         "<domain>/<name> outside kubernetes.io, e.g. example.com/gpu); "
                         "use headroom for native resources", level=WARNING)
            self.quantity((*p, "quantity"), ext.get("quantity"))
        self.expression((*path, "jmespath"), rule.get("jmespath"))
        self.cel((*path, "cel"), rule.get("cel"), celexpr.FILTER_TYPES, "a filter")

    def resource(self, path: JsonPath, name: Any) -> None:
        if isinstance(name, str):
            for msg in k8snames.resource_name(name):
                self.add(path, "resource-name", f"invalid resource name {name!r}: {msg}")

    def score_rule(self, path: JsonPath, rule: Mapping[str, Any]) -> None:
        normalize = rule.get("normalize")
        lv = rule.get("labelValue")
        if isinstance(lv, Mapping):
            p = (*path, "labelValue")
            self.label_key((*p, "label"), lv.get("label"))
            values = lv.get("values")
            points: list[float] = []
            if isinstance(values, Mapping):
                for k, v in values.items():
                    self.label_value((*p, "values", k), k)
                    points.append(_float_or_inf(v))
            points.append(_float_or_inf(lv.get("default", 0)))
            if normalize == "none" and any(x > 100 for x in points):
                self.add((*path, "normalize"), "score-range",
                         "points above 100 are clamped to 100 with normalize: none; "
                         "use normalize: max to scale them, or keep points in 0..100",
                         level=WARNING)
        num = rule.get("numeric")
        if isinstance(num, Mapping):
            p = (*path, "numeric")
            if "label" in num:
                self.label_key((*p, "label"), num.get("label"))
            if "annotation" in num:
                self.annotation_key((*p, "annotation"), num.get("annotation"))
            if "reverse" in rule:
                self.add((*path, "reverse"), "schema",
                         "numeric rules choose their direction with prefer: highest|lowest, "
                         "not reverse", key=True)
        if isinstance(rule.get("metric"), Mapping) and "reverse" in rule:
            self.add((*path, "reverse"), "schema",
                     "metric rules choose their direction with prefer: highest|lowest, "
                     "not reverse", key=True)
        alloc = rule.get("allocation")
        if isinstance(alloc, Mapping):
            p = (*path, "allocation")
            seen: set[str] = set()
            resources = alloc.get("resources")
            if isinstance(resources, list):
                for i, r in enumerate(resources):
                    if not isinstance(r, Mapping) or not isinstance(r.get("name"), str):
                        continue
                    name = r["name"]
                    self.resource((*p, "resources", i, "name"), name)
                    if name in seen:
                        self.add((*p, "resources", i, "name"), "duplicate-id",
                                 f"resource {name!r} is listed twice")
                    seen.add(name)
            if normalize in ("minmax", "max"):
                self.add((*path, "normalize"), "score-range",
                         f"allocation scores are already 0..100; normalize: {normalize} "
                         "stretches small differences between nodes to the full range "
                         "(use none to keep them proportional)", level=WARNING)
        self.expression((*path, "jmespath"), rule.get("jmespath"))
        self.cel((*path, "cel"), rule.get("cel"), celexpr.SCORE_TYPES, "a score")


# An exception this close to its expiry is said in lint (exception-expiring).
EXPIRING_SOON_DAYS = 14


def _is_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def _is_int(value: str) -> bool:
    # As the API server validates Gt/Lt values: strconv.ParseInt, not Python's int().
    return parse_int64(value) is not None


def contradictions(
    reqs: list[tuple[JsonPath, str, str, list[str]]],
) -> Iterator[tuple[JsonPath, str]]:
    """ANDed requirements on the same key that no label set can satisfy.

    Yields (path of the requirement that makes it impossible, explanation).
    """
    by_key: dict[str, list[tuple[JsonPath, str, list[str]]]] = {}
    for path, key, op, values in reqs:
        by_key.setdefault(key, []).append((path, op, values))
    for key, items in by_key.items():
        if found := _contradiction(key, items):
            yield found


def _contradiction(key: str, items: list[tuple[JsonPath, str, list[str]]]
                   ) -> tuple[JsonPath, str] | None:
    """The first reason the requirements on one key cannot all hold, whatever their
    order (a NotIn before the In it empties counts as one after it)."""
    allowed: set[str] | None = None  # values every In requirement allows
    excluded: set[str] = set()
    exists_path = absent_path = None
    gt: int | None = None
    lt: int | None = None
    for path, op, values in items:
        if op == "In":
            allowed = set(values) if allowed is None else allowed & set(values)
            if not allowed:
                return path, f"no value of {key!r} is in every In list"
        elif op == "NotIn":
            excluded |= set(values)
        elif op == "DoesNotExist":
            absent_path = absent_path or path
        elif op in ("Gt", "Lt"):
            n = parse_int64(values[0]) if values else None
            if n is not None:
                if op == "Gt":
                    gt = n if gt is None else max(gt, n)
                else:
                    lt = n if lt is None else min(lt, n)
                if gt is not None and lt is not None and lt - gt <= 1:
                    return path, f"no integer is > {gt} and < {lt} for {key!r}"
        if op in ("In", "Exists", "Gt", "Lt"):
            exists_path = exists_path or path
        if exists_path is not None and absent_path is not None:
            return (absent_path if op == "DoesNotExist" else path), \
                f"{key!r} must both exist and not exist"
    if allowed is not None and excluded and not allowed - excluded:
        path = next(p for p, op, _ in reversed(items) if op == "NotIn")
        return path, f"NotIn {sorted(excluded)} excludes every value the In " \
                     f"requirement on {key!r} allows"
    if allowed is not None and (gt is not None or lt is not None):
        numbers = [n for n in map(parse_int64, allowed - excluded) if n is not None]
        if not [n for n in numbers if (gt is None or n > gt) and (lt is None or n < lt)]:
            return items[-1][0], f"no value In the list for {key!r} satisfies the Gt/Lt " \
                                 "bounds"
    return None


def check_cross(docs: list[SourceDocument], key_uses: list[KeyUse]) -> list[Problem]:
    """Problems between documents: duplicate names, built-in names, case traps."""
    problems: list[Problem] = []
    builtins = {v for k, v in vars(builtin).items() if k.isupper() and isinstance(v, str)}
    seen_names: dict[str, SourceDocument] = {}
    seen_plugins: dict[str, SourceDocument] = {}
    plugins_lower: dict[str, tuple[str, SourceDocument]] = {}
    for doc in docs:
        data = doc.data if isinstance(doc.data, Mapping) else {}
        meta = data.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if isinstance(name, str):
            if name in seen_names:
                first = seen_names[name]
                where = _where(first, ("metadata", "name"))
                problems.append(doc.problem(("metadata", "name"), "duplicate-name",
                                            f"policy name {name!r} is already used at {where}"))
            else:
                seen_names[name] = doc
        spec = data.get("spec")
        plugin = spec.get("pluginName") if isinstance(spec, Mapping) else None
        if not isinstance(plugin, str):
            continue
        path = ("spec", "pluginName")
        if plugin in builtins:
            problems.append(doc.problem(path, "builtin-plugin-name",
                                        f"pluginName {plugin!r} is a built-in plugin's name"))
        elif plugin in builtin.UPSTREAM_NOT_IMPLEMENTED:
            problems.append(doc.problem(
                path, "builtin-plugin-name",
                f"pluginName {plugin!r} is reserved: it is a kube-scheduler plugin (one "
                "policyd does not implement), and profiles naming it mean that plugin; "
                "choose another name"))
        if plugin in seen_plugins:
            problems.append(doc.problem(
                path, "duplicate-plugin-name",
                f"pluginName {plugin!r} is already used at "
                f"{_where(seen_plugins[plugin], path)}"))
            continue
        seen_plugins[plugin] = doc
        other = plugins_lower.get(plugin.lower())
        if other is not None:
            problems.append(doc.problem(
                path, "key-case", f"pluginName {plugin!r} differs from {other[0]!r} "
                f"({_where(other[1], path)}) only by case; profiles match names exactly",
                level=WARNING))
        else:
            plugins_lower[plugin.lower()] = (plugin, doc)
    problems.extend(_case_problems(key_uses))
    return problems


def _where(doc: SourceDocument, path: JsonPath, key: bool = False) -> str:
    line, col = doc.position(path, key=key)
    return f"{doc.file}:{line}:{col}"


def _case_problems(key_uses: list[KeyUse]) -> Iterator[Problem]:
    well_known = {k.lower(): k for k in k8snames.WELL_KNOWN_LABELS}
    spellings: dict[str, dict[str, KeyUse]] = {}
    for use in key_uses:
        spellings.setdefault(use.key.lower(), {}).setdefault(use.key, use)
    reported: set[tuple[str, int, str]] = set()
    for use in key_uses:
        # One warning per spelling per document: the first place it is used.
        where = (use.doc.file, use.doc.index, use.key)
        if where in reported:
            continue
        reported.add(where)
        lower = use.key.lower()
        known = well_known.get(lower)
        if known is not None and known != use.key:
            yield use.doc.problem(use.path, "key-case",
                                  f"label key {use.key!r} differs from the well-known "
                                  f"{known!r} only by case; label keys are case-sensitive",
                                  level=WARNING, key=use.at_key)
            continue
        others = [k for k in spellings[lower] if k != use.key]
        if others:
            first = spellings[lower][others[0]]
            yield use.doc.problem(
                use.path, "key-case",
                f"label key {use.key!r} differs from {others[0]!r} (used at "
                f"{_where(first.doc, first.path, first.at_key)}) only by case; label keys "
                "are case-sensitive, so a node labelled one way never matches the other",
                level=WARNING, key=use.at_key)


def _float_or_inf(v: Any) -> float:
    """A rule's number for range checks: an integer beyond float64 counts as infinite
    (finite_numbers reports it), anything that is not a number as 0."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return 0.0
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf
