"""Pod (anti-)affinity terms compiled once per pod, as kube-scheduler's `PodInfo` holds them.

InterPodAffinity matches every existing pod's terms against each incoming pod, so the
terms of a pod are parsed once and kept in `pod.cache` (a label or spec update decodes
a new Pod record, so the memo can never go stale). Semantics follow upstream v1.36:

- A term's namespaces default to the pod's own namespace when both `namespaces` and
  `namespaceSelector` are unset; a nil `namespaceSelector` matches no namespace, an
  empty one (`{}`) matches every namespace.
- `matchLabelKeys` / `mismatchLabelKeys` (MatchLabelKeysInPodAffinity, on by default)
  become `key In (value)` / `key NotIn (value)` requirements taken from the pod's own
  labels. Upstream the API server merges them into `labelSelector` when the pod is
  created and the scheduler only reads `labelSelector`; policyd also reads pods that
  never went through an API server (snapshot files), so it merges them here too, and
  skips a `matchLabelKeys` key the selector already constrains (the API server's merge
  is then already there: validation forbids users from constraining such a key) and
  a `mismatchLabelKeys` requirement already present. Known difference: a label
  added to a running pod after creation (the API server merged nothing for it) is
  merged here with its current value.
- The incoming pod's `namespaceSelector` is resolved against the cluster's namespaces
  into plain namespace names (`resolve_namespaces`, upstream's
  `mergeAffinityTermNamespacesIfNotEmpty`); an existing pod's `namespaceSelector` is
  matched against the labels of the incoming pod's namespace.
- Equal terms are one interned object (`affinity_term`), compared by identity.
- Terms that fail to parse: the incoming pod is rejected with the error (upstream
  "parsing pod: ..."); for an existing pod the broken list of terms is ignored, as
  upstream's NodeInfo keeps whatever parsed.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policyd.model.records import Pod
from policyd.model.selectors import (
    MATCH_NOTHING,
    LabelSelector,
    SelectorError,
    compile_label_selector,
)

_CACHE_KEY = "InterPodAffinity/terms"
_EMPTY_LABELS: Mapping[str, str] = {}

# apimachinery's label value syntax (validation.IsValidLabelValue): upstream rejects a
# selector whose In/NotIn value could never be a label value while parsing the pod.
_LABEL_VALUE_RE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_LABEL_VALUE_MAX = 63


@dataclass(frozen=True, slots=True, eq=False, weakref_slot=True)
class AffinityTerm:
    """A parsed v1.PodAffinityTerm (upstream fwk.AffinityTerm).

    Interned (build them with `affinity_term`): equal terms are one object, so they
    compare and hash by identity, which keeps the many dict operations InterPodAffinity
    does per term cheap (a value hash walks every requirement of both selectors).
    """

    namespaces: frozenset[str]
    selector: LabelSelector
    namespace_selector: LabelSelector  # MATCH_NOTHING when the term has none
    topology_key: str

    def matches(self, pod: Pod, namespace_labels: Mapping[str, str] | None) -> bool:
        """Whether `pod` is one of the pods this term selects (topology aside).

        `namespace_labels` are the labels of `pod`'s namespace; None (or a namespace
        nobody knows) counts as no labels, as upstream's nil labels.Set.
        """
        if pod.namespace in self.namespaces or self.namespace_selector.matches(
            namespace_labels if namespace_labels is not None else _EMPTY_LABELS
        ):
            return self.selector.matches(pod.labels)
        return False


_interned: weakref.WeakValueDictionary[tuple[Any, ...], AffinityTerm] = (
    weakref.WeakValueDictionary())


def affinity_term(namespaces: frozenset[str], selector: LabelSelector,
                  namespace_selector: LabelSelector, topology_key: str) -> AffinityTerm:
    """The one AffinityTerm with these fields (kept while any pod's terms use it)."""
    key = (namespaces, selector, namespace_selector, topology_key)
    term = _interned.get(key)
    if term is None:
        term = AffinityTerm(namespaces, selector, namespace_selector, topology_key)
        _interned[key] = term
    return term


@dataclass(frozen=True, slots=True)
class WeightedAffinityTerm:
    term: AffinityTerm
    weight: int


@dataclass(frozen=True, slots=True)
class PodAffinityTerms:
    """Everything InterPodAffinity needs from one pod's spec.affinity."""

    required_affinity: tuple[AffinityTerm, ...]
    required_anti_affinity: tuple[AffinityTerm, ...]
    preferred_affinity: tuple[WeightedAffinityTerm, ...]
    preferred_anti_affinity: tuple[WeightedAffinityTerm, ...]
    # spec.affinity has a podAffinity or podAntiAffinity at all (NodeInfo.PodsWithAffinity)
    has_pod_affinity: bool
    # Parse problems, "<list>[i].<field>: message"; empty when everything parsed.
    errors: tuple[str, ...] = ()

    @property
    def has_required(self) -> bool:
        return bool(self.required_affinity or self.required_anti_affinity)


NO_TERMS = PodAffinityTerms((), (), (), (), False)


def has_pod_affinity(pod: Pod) -> bool:
    """Cheap check on the raw spec, so pods without affinity are never compiled."""
    aff = pod.affinity
    return bool(aff) and (
        aff.get("podAffinity") is not None or aff.get("podAntiAffinity") is not None
    )


def pod_affinity_terms(pod: Pod) -> PodAffinityTerms:
    """The pod's compiled terms, memoized in `pod.cache`."""
    cached = pod.cache.get(_CACHE_KEY)
    if cached is None:
        cached = _compile(pod) if has_pod_affinity(pod) else NO_TERMS
        pod.cache[_CACHE_KEY] = cached
    return cached


def resolve_namespaces(
    terms: tuple[AffinityTerm, ...], namespace_labels: Mapping[str, Mapping[str, str]] | None
) -> tuple[AffinityTerm, ...]:
    """Unroll each non-empty namespaceSelector into the namespaces it selects now.

    For the incoming pod only: afterwards a term matches an existing pod by namespace
    name alone. An empty selector (`{}`) stays: it matches every namespace, even one
    with no Namespace object. With no namespace labels known (None or {}), a selector
    selects no namespace, and only the listed `namespaces` count.
    """
    if not any(_needs_resolving(t) for t in terms):
        return terms
    known = namespace_labels or {}
    out = []
    for t in terms:
        if _needs_resolving(t):
            selected = {ns for ns, labels in known.items() if t.namespace_selector.matches(labels)}
            t = affinity_term(t.namespaces | selected, t.selector, MATCH_NOTHING, t.topology_key)
        out.append(t)
    return tuple(out)


def resolve_weighted_namespaces(
    terms: tuple[WeightedAffinityTerm, ...],
    namespace_labels: Mapping[str, Mapping[str, str]] | None,
) -> tuple[WeightedAffinityTerm, ...]:
    if not any(_needs_resolving(w.term) for w in terms):
        return terms
    resolved = resolve_namespaces(tuple(w.term for w in terms), namespace_labels)
    return tuple(WeightedAffinityTerm(t, w.weight) for t, w in zip(resolved, terms, strict=True))


def _needs_resolving(t: AffinityTerm) -> bool:
    # MATCH_NOTHING (nil selector) selects nothing to add; an empty one matches all.
    return not t.namespace_selector.match_nothing and not t.namespace_selector.is_empty


def _compile(pod: Pod) -> PodAffinityTerms:
    aff = pod.affinity
    errors: list[str] = []
    pa = aff.get("podAffinity")
    paa = aff.get("podAntiAffinity")
    pa = pa if isinstance(pa, Mapping) else {}
    paa = paa if isinstance(paa, Mapping) else {}
    req = "requiredDuringSchedulingIgnoredDuringExecution"
    pref = "preferredDuringSchedulingIgnoredDuringExecution"
    return PodAffinityTerms(
        required_affinity=_terms(pod, pa.get(req), "requiredAffinityTerms", errors),
        required_anti_affinity=_terms(pod, paa.get(req), "requiredAntiAffinityTerms", errors),
        preferred_affinity=_weighted(pod, pa.get(pref), "preferredAffinityTerms", errors),
        preferred_anti_affinity=_weighted(
            pod, paa.get(pref), "preferredAntiAffinityTerms", errors),
        has_pod_affinity=True,
        errors=tuple(errors),
    )


def _terms(pod: Pod, raw: Any, path: str, errors: list[str]) -> tuple[AffinityTerm, ...]:
    """One list of terms; on any error the whole list is dropped (upstream getAffinityTerms)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        errors.append(f"{path}: must be a list")
        return ()
    try:
        return tuple(_term(pod, t, f"{path}[{i}]") for i, t in enumerate(raw))
    except SelectorError as e:
        errors.append(str(e))
        return ()


def _weighted(
    pod: Pod, raw: Any, path: str, errors: list[str]
) -> tuple[WeightedAffinityTerm, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        errors.append(f"{path}: must be a list")
        return ()
    out = []
    try:
        for i, w in enumerate(raw):
            if not isinstance(w, Mapping):
                raise SelectorError(f"{path}[{i}]", "must be an object")
            weight = w.get("weight")
            if isinstance(weight, bool) or not isinstance(weight, int):
                raise SelectorError(f"{path}[{i}].weight", "must be an integer")
            term = _term(pod, w.get("podAffinityTerm"), f"{path}[{i}].podAffinityTerm")
            out.append(WeightedAffinityTerm(term, weight))
    except SelectorError as e:
        errors.append(str(e))
        return ()
    return tuple(out)


def _term(pod: Pod, raw: Any, path: str) -> AffinityTerm:
    if not isinstance(raw, Mapping):
        raise SelectorError(path, "must be an object")
    topology_key = raw.get("topologyKey") or ""
    if not isinstance(topology_key, str):
        raise SelectorError(f"{path}.topologyKey", "must be a string")
    raw_namespaces = raw.get("namespaces") or []
    if not isinstance(raw_namespaces, list) or not all(
            isinstance(n, str) for n in raw_namespaces):
        raise SelectorError(f"{path}.namespaces", "must be a list of strings")
    ns_selector_raw = raw.get("namespaceSelector")
    # getNamespacesFromPodAffinityTerm: no namespaces and no selector -> the pod's own.
    if not raw_namespaces and ns_selector_raw is None:
        namespaces = frozenset((pod.namespace,))
    else:
        namespaces = frozenset(raw_namespaces)
    selector_raw = _merge_label_keys(raw, pod.labels, path)
    return affinity_term(
        namespaces,
        _selector(selector_raw, f"{path}.labelSelector"),
        _selector(ns_selector_raw, f"{path}.namespaceSelector"),
        topology_key,
    )


def _selector(raw: Any, path: str) -> LabelSelector:
    try:
        selector = compile_label_selector(raw)
    except SelectorError as e:
        raise SelectorError(f"{path}.{e.path}" if e.path else path, e.message) from None
    for r in selector.requirements:
        if r.operator in ("In", "NotIn"):
            for v in sorted(r.values):
                if len(v) > _LABEL_VALUE_MAX or not _LABEL_VALUE_RE.fullmatch(v):
                    raise SelectorError(
                        path, f"invalid label value {v!r} for key {r.key!r}: a label value "
                        "must be at most 63 characters of alphanumerics, '-', '_' or '.', "
                        "starting and ending with an alphanumeric (or empty)")
    return selector


def _string_list(raw: Any, path: str) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(k, str) for k in raw):
        raise SelectorError(path, "must be a list of strings")
    return raw


def _merge_label_keys(term: Mapping[str, Any], labels: Mapping[str, str], path: str) -> Any:
    """labelSelector with matchLabelKeys/mismatchLabelKeys merged in (see module doc)."""
    selector = term.get("labelSelector")
    match_keys = _string_list(term.get("matchLabelKeys"), f"{path}.matchLabelKeys")
    mismatch_keys = _string_list(term.get("mismatchLabelKeys"), f"{path}.mismatchLabelKeys")
    # A nil selector matches nothing, and stays so (as the API server leaves it).
    if selector is None or not isinstance(selector, Mapping) or not (match_keys or mismatch_keys):
        return selector
    exprs_raw = selector.get("matchExpressions") or []
    match_labels = selector.get("matchLabels") or {}
    if not isinstance(exprs_raw, list) or not isinstance(match_labels, Mapping):
        return selector  # compile_label_selector reports the malformed selector
    exprs: list[Any] = list(exprs_raw)
    constrained = set(match_labels) | {
        e.get("key") for e in exprs if isinstance(e, Mapping)}
    for key in match_keys:
        if key in labels and key not in constrained:
            exprs.append({"key": key, "operator": "In", "values": [labels[key]]})
    for key in mismatch_keys:
        if key in labels:
            expr = {"key": key, "operator": "NotIn", "values": [labels[key]]}
            if expr not in exprs:
                exprs.append(expr)
    return {**selector, "matchExpressions": exprs}

