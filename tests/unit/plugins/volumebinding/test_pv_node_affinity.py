"""A PV's node affinity is judged as component-helpers' CheckNodeAffinity judges it: on a
Node built from the labels alone, so a term's matchFields are skipped, terms are ORed,
empty terms select nothing and a malformed term fails alone (issue 33)."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.framework.interfaces import Verdict
from policyd.plugins.helper.volumes import VolumeObjectError, volume_fits_node
from policyd.plugins.volumebinding.plugin import new
from tests.builders import make_pod
from tests.unit.plugins.volumebinding.storage import (
    HOSTNAME,
    ZONE,
    cluster,
    cycle,
    info,
    node,
    pv,
    pvc,
)

NODES = (node("n1", "a"), node("n7", "b"), node("n9", "c"))


def _name_is(value: str, op: str = "In") -> dict[str, Any]:
    return {"key": "metadata.name", "operator": op, "values": [value]}


def _host(*values: str, op: str = "In") -> dict[str, Any]:
    return {"key": HOSTNAME, "operator": op, "values": list(values)}


def _affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"required": {"nodeSelectorTerms": list(terms)}}


def _fitting(affinity: dict[str, Any]) -> set[str]:
    """The nodes of NODES the PV fits; a VolumeObjectError as "error"."""
    volume = pv("v", affinity=affinity)
    storage = cluster(*NODES, objects=(volume,)).storage
    out = set()
    for n in NODES:
        try:
            if volume_fits_node(storage, volume, n):
                out.add(n.name)
        except VolumeObjectError:
            out.add(f"{n.name}:error")
    return out


ALL = {"n1", "n7", "n9"}


@pytest.mark.parametrize(("terms", "fits"), [
    # matchFields alone: skipped on the nameless node, so the term admits every node.
    pytest.param([{"matchFields": [_name_is("n7")]}], ALL, id="fields-in"),
    pytest.param([{"matchFields": [_name_is("n7", "NotIn")]}], ALL, id="fields-notin"),
    # beside label expressions only the labels count (n7 too: the old code fit none).
    pytest.param([{"matchFields": [_name_is("n1")], "matchExpressions": [_host("n7")]}],
                 {"n7"}, id="fields-and-hostname"),
    pytest.param([{"matchFields": [_name_is("n7")],
                   "matchExpressions": [_host("n7", op="NotIn")]}],
                 {"n1", "n9"}, id="fields-and-notin"),
    pytest.param([{"matchFields": [_name_is("n7")],
                   "matchExpressions": [{"key": ZONE, "operator": "Exists"}]}],
                 ALL, id="fields-and-exists"),
    pytest.param([{"matchFields": [_name_is("n7")],
                   "matchExpressions": [{"key": ZONE, "operator": "DoesNotExist"}]}],
                 set(), id="fields-and-doesnotexist"),
    # terms are ORed; an empty one selects nothing and is not an error.
    pytest.param([{"matchExpressions": [_host("n1")]},
                  {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["c"]}]}],
                 {"n1", "n9"}, id="two-terms"),
    pytest.param([{"matchExpressions": [_host("n1")]}, {"matchFields": [_name_is("n1")]}],
                 ALL, id="term-or-fields-only-term"),
    pytest.param([{}, {"matchExpressions": [], "matchFields": []}], set(), id="empty-terms"),
    pytest.param([{}, {"matchExpressions": [_host("n9")]}], {"n9"}, id="empty-and-host"),
    pytest.param([], set(), id="no-terms"),
    # a field key the node never has is not compared either (the API server refuses
    # it; upstream's matcher would not notice).
    pytest.param([{"matchFields": [{"key": "spec.unschedulable", "operator": "In",
                                    "values": ["x"]}]}], ALL, id="fields-other-key"),
])
def test_terms(terms: list[dict[str, Any]], fits: set[str]) -> None:
    assert _fitting(_affinity(*terms)) == fits


BAD_OPERATOR = {"matchExpressions": [{"key": ZONE, "operator": "Near", "values": ["a"]}]}
BAD_FIELD = {"matchFields": [{"key": "metadata.name", "operator": "In",
                              "values": ["n1", "n7"]}]}
BAD_NUMBER = {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["x"]}]}


@pytest.mark.parametrize("bad", [BAD_OPERATOR, BAD_FIELD, BAD_NUMBER],
                         ids=["operator", "field-values", "gt-value"])
def test_a_malformed_term_fails_alone(bad: dict[str, Any]) -> None:
    """Upstream's errors are lazy: a term that does not parse matches no node, another
    term still can, and the error counts (as a mismatch) only where none matched."""
    assert _fitting(_affinity(bad)) == {"n1:error", "n7:error", "n9:error"}
    assert _fitting(_affinity(bad, {"matchExpressions": [_host("n7")]})) == \
        {"n1:error", "n7", "n9:error"}


def test_the_error_names_the_first_malformed_term() -> None:
    volume = pv("v", affinity=_affinity({"matchExpressions": [_host("n9")]}, BAD_FIELD,
                                        BAD_OPERATOR))
    storage = cluster(*NODES, objects=(volume,)).storage
    with pytest.raises(VolumeObjectError) as exc:
        volume_fits_node(storage, volume, NODES[0])
    assert str(exc.value) == ("PersistentVolume v: spec.nodeAffinity.required."
                              "nodeSelectorTerms[1].matchFields[0].values: must have "
                              "exactly one value")


def test_terms_that_are_not_a_list_fail_everywhere() -> None:
    volume = pv("v", affinity={"required": {"nodeSelectorTerms": {"a": 1}}})
    storage = cluster(*NODES, objects=(volume,)).storage
    with pytest.raises(VolumeObjectError, match="nodeSelectorTerms: must be a list"):
        volume_fits_node(storage, volume, NODES[0])


FIELDS_AND_HOST = _affinity({"matchFields": [_name_is("n7")],
                             "matchExpressions": [_host("n1", "n7")]})


def test_an_unbound_claim_takes_a_fields_pinned_pv_on_other_nodes() -> None:
    """FindMatchingVolume: a WaitForFirstConsumer claim binds a PV pinned by matchFields
    on any node its label expressions admit, the named node or not."""
    state = cluster(*NODES, objects=(pvc("data"), pv("v", affinity=FIELDS_AND_HOST)))
    plugin = new()
    cs = cycle(state)
    pod = make_pod("p").pvc("data").obj()
    plugin.pre_filter(cs, pod, cs.all_nodes)
    feasible = {n.name for n in NODES if plugin.filter(cs, pod, info(state, n.name)) is None}
    assert feasible == {"n1", "n7"}
    assert plugin.verdicts(cs, pod, info(state, "n1")) == (
        Verdict("default/data", True, "binds PersistentVolume v"),)


def test_a_bound_claim_fits_where_its_pv_labels_admit() -> None:
    state = cluster(*NODES, objects=(
        pvc("data", volume="v", bound=True),
        pv("v", affinity=FIELDS_AND_HOST, phase="Bound")))
    plugin = new()
    cs = cycle(state)
    pod = make_pod("p").pvc("data").obj()
    plugin.pre_filter(cs, pod, cs.all_nodes)
    assert plugin.filter(cs, pod, info(state, "n7")) is None
    assert plugin.filter(cs, pod, info(state, "n1")) is None
    refused = plugin.filter(cs, pod, info(state, "n9"))
    assert refused is not None
    assert refused.reasons == ("node(s) didn't match PersistentVolume's node affinity",)
    assert plugin.verdicts(cs, pod, info(state, "n7")) == (
        Verdict("default/data", True, "is bound to PersistentVolume v"),)


def test_explain_names_a_malformed_term_only_where_no_term_matched() -> None:
    state = cluster(*NODES, objects=(
        pvc("data"), pv("v", affinity=_affinity(BAD_OPERATOR,
                                                {"matchExpressions": [_host("n7")]}))))
    plugin = new()
    cs = cycle(state)
    pod = make_pod("p").pvc("data").obj()
    plugin.pre_filter(cs, pod, cs.all_nodes)
    # No Filter ran: explain's own per-claim verdict (explain.py) says it.
    assert plugin.verdicts(cs, pod, info(state, "n7")) == (
        Verdict("default/data", True, "can bind PersistentVolume v"),)
    assert plugin.verdicts(cs, pod, info(state, "n1")) == (
        Verdict("default/data", False,
                "no available PersistentVolume fits the claim and the node (ignored: "
                "PersistentVolume v: spec.nodeAffinity.required.nodeSelectorTerms[0]."
                "matchExpressions[0].operator: 'Near' is not a valid operator, expected "
                "one of In, NotIn, Exists, DoesNotExist, Gt, Lt), and StorageClass wait "
                "does not provision"),)
