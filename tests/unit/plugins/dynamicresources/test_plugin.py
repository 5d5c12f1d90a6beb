"""DynamicResources, plugin by extension point: upstream's behaviour for pods without
resource claims (kube-scheduler v1.36 dynamicresources.go), and for pods whose claims
cannot be found (test_allocation.py has pods whose claims exist)."""

from __future__ import annotations

import numpy as np
import pytest

from policyd.framework import Code, CycleState
from policyd.framework.events import (
    DEVICE_CLASS,
    NODE,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    ActionType,
)
from policyd.framework.fit_error import Diagnosis
from policyd.framework.interfaces import extension_points
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod
from policyd.plugins.dynamicresources.plugin import (
    DEFAULT_WEIGHT,
    NO_CLAIMS_TO_DEALLOCATE,
    STATE_NOT_FOUND,
    new,
)
from tests.builders import PodBuilder, make_node, make_pod


def _pre_filtered(pod: Pod) -> tuple[CycleState, Code | None]:
    state = CycleState()
    names_, status = new().pre_filter(state, pod, [])
    assert names_ is None  # never narrows the nodes
    return state, None if status is None else status.code


def test_upstreams_extension_points_and_weight() -> None:
    # Every point upstream's plugin implements.
    assert extension_points(new()) == {
        "preEnqueue", "preFilter", "filter", "postFilter", "score", "reserve", "preBind"}
    assert DEFAULT_WEIGHT == 2  # applyDynamicResources in v1.36's default_plugins.go


def test_skips_pod_without_claims() -> None:
    _, code = _pre_filtered(make_pod().obj())
    assert code is Code.SKIP


@pytest.mark.parametrize(("pod", "reason"), [
    # No DRA objects in the cycle's cluster: each claim is missing (upstream's claim
    # tracker's text), the first one named.
    (make_pod().resource_claim("gpu", claim="shared-gpu"),
     'could not find ResourceClaim "default/shared-gpu"'),
    (make_pod("job").resource_claim("gpu", template="single-gpu"),
     'pod "default/job": ResourceClaim not created yet'),
    # The claim controller created the template's claim: its generated name is used.
    (make_pod("job").resource_claim("gpu", template="single-gpu").set(
        "status.resourceClaimStatuses", [{"name": "gpu", "resourceClaimName": "job-gpu-x7"}]),
     'could not find ResourceClaim "default/job-gpu-x7"'),
    (make_pod().resource_claim("a", claim="first").resource_claim("b", template="t"),
     'could not find ResourceClaim "default/first"'),
])
def test_refuses_pod_whose_claim_is_missing(pod: PodBuilder, reason: str) -> None:
    obj = pod.obj()
    _, status = new().pre_filter(CycleState(), obj, [])
    assert status is not None
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == (reason,)
    # PreEnqueue holds the pod back for the same reason, as Unschedulable (upstream's
    # statusUnschedulable), before any cycle.
    gated = new().pre_enqueue(obj, ClusterState())
    assert gated is not None
    assert (gated.code, gated.reasons) == (Code.UNSCHEDULABLE, (reason,))


def test_container_claims_alone_are_not_pod_claims() -> None:
    # resources.claims only refers to spec.resourceClaims; without them nothing to do.
    pod = make_pod().set("spec.containers", [{"name": "c", "resources": {
        "claims": [{"name": "gpu"}]}}]).obj()
    _, code = _pre_filtered(pod)
    assert code is Code.SKIP


def test_filter_passes_a_pod_without_claims() -> None:
    node = ClusterState([make_node("n1").obj()]).node_infos()[0]
    assert new().filter(CycleState(), make_pod().obj(), node) is None


def test_every_node_scores_zero_in_both_forms() -> None:
    cluster = ClusterState([make_node(f"n{i}").obj() for i in range(3)])
    pod = make_pod().obj()
    plugin = new()
    assert [plugin.score(CycleState(), pod, n) for n in cluster.node_infos()] == [0, 0, 0]
    table = cluster.table()
    idx = np.arange(len(table.names))
    scores = plugin.score_vector(CycleState(), pod, table, idx)
    assert scores is not None
    assert scores.tolist() == [0, 0, 0] and scores.dtype == np.int64


@pytest.mark.parametrize("pod", [
    make_pod().obj(),
    # Refused by its own PreFilter: like upstream after its PreFilter refused a pod,
    # no claim was recorded, so there is none to free either.
    make_pod().resource_claim("gpu", claim="c1").obj(),
])
def test_post_filter_after_pre_filter_has_no_claims_to_deallocate(pod: Pod) -> None:
    state, _ = _pre_filtered(pod)
    result, status = new().post_filter(state, pod, Diagnosis())
    assert result is None
    assert status.code is Code.UNSCHEDULABLE
    assert status.reasons == (NO_CLAIMS_TO_DEALLOCATE,) == ("no new claims to deallocate",)


def test_post_filter_without_its_pre_filter_errs_as_upstream() -> None:
    # An earlier PreFilter refused the pod as unresolvable, so this one never ran:
    # upstream's PostFilter cannot read its state (fwk.ErrNotFound, "not found").
    result, status = new().post_filter(CycleState(), make_pod().obj(), Diagnosis())
    assert result is None
    assert status.code is Code.ERROR
    assert status.reasons == (STATE_NOT_FOUND,) == ("not found",)


def test_reserve_and_pre_bind_do_nothing() -> None:
    state, _ = _pre_filtered(make_pod().obj())
    plugin, pod = new(), make_pod().obj()
    assert plugin.reserve(state, pod, "n1") is None
    plugin.unreserve(state, pod, "n1")
    assert plugin.pre_bind(state, pod, "n1", handle=None) is None  # type: ignore[arg-type]


def test_pre_bind_pre_flight_skips_a_pod_without_claims_as_upstream() -> None:
    # So a pod policyd binds is never nominated before PreBind on this plugin's account.
    state, _ = _pre_filtered(make_pod().obj())
    plugin, pod = new(), make_pod().obj()
    status = plugin.pre_bind_pre_flight(state, pod, "n1")
    assert status is not None and status.code is Code.SKIP
    missing = plugin.pre_bind_pre_flight(CycleState(), pod, "n1")
    assert missing is not None and missing.code is Code.ERROR
    assert missing.reasons == (STATE_NOT_FOUND,)


def test_events_are_upstreams() -> None:
    add_or_update = ActionType.ADD | ActionType.UPDATE
    registered = [(e.event.resource, e.event.action, e.hint is not None)
                  for e in new().events_to_register()]
    assert registered == [
        # SchedulerQueueingHints is GA: no UpdateNodeTaint.
        (NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL
         | ActionType.UPDATE_NODE_ALLOCATABLE, False),
        (RESOURCE_CLAIM, add_or_update, True),
        (POD, ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM, True),
        (DEVICE_CLASS, add_or_update, False),
        (RESOURCE_SLICE, add_or_update, False),
    ]
