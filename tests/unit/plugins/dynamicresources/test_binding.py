"""Binding conditions of allocated claims (isClaimReadyForBinding, isClaimTimeout):
ready, failed, waiting, and late after bindingTimeout."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.framework import Code
from policyd.plugins.dynamicresources.args import parse_args
from policyd.plugins.dynamicresources.binding import binding_state, binding_timed_out
from policyd.plugins.dynamicresources.plugin import (
    DEALLOCATION_COMPLETED,
    NOT_AVAILABLE_ON_NODE,
    DynamicResources,
)
from tests.unit.plugins.dynamicresources.scene import (
    DRIVER,
    claim,
    cluster,
    gpu_class,
    nodes,
    pod_using,
    pre_filtered,
)

Obj = dict[str, Any]
T0 = "2026-01-01T00:00:00Z"
T0_SECONDS = 1767225600.0


def _claim(conditions: dict[str, str] | None, *, failure: tuple[str, ...] = ("Failed",),
           wanted: tuple[str, ...] | None = ("Attached",), stamp: str | None = T0) -> Obj:
    result: Obj = {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "g0"}
    if wanted is not None:
        result["bindingConditions"] = list(wanted)
        result["bindingFailureConditions"] = list(failure)
    allocation: Obj = {"devices": {"results": [result]}}
    if stamp is not None:
        allocation["allocationTimestamp"] = stamp
    status: Obj = {"allocation": allocation}
    if conditions is not None:
        status["devices"] = [{"driver": DRIVER, "pool": "n1", "device": "g0",
                              "conditions": [{"type": t, "status": s}
                                             for t, s in conditions.items()]}]
    return claim("c1", status=status)


@pytest.mark.parametrize(("obj", "ready", "failure"), [
    (_claim(None, wanted=None), True, None),  # no binding conditions at all
    (_claim(None), False, None),  # no device status yet
    (_claim({"Attached": "False"}), False, None),
    (_claim({"Attached": "True"}), True, None),
    # The failure's detail as upstream's ErrDeviceBindingFailed wraps it.
    (_claim({"Attached": "False", "Failed": "True"}), False,
     'claim=c1, reason=, message=""'),
    (_claim({"Attached": "True", "Failed": "False"}), True, None),
])
def test_binding_state(obj: Obj, ready: bool, failure: str | None) -> None:
    assert binding_state(obj) == (ready, failure)


@pytest.mark.parametrize(("obj", "now", "late"), [
    (_claim(None), T0_SECONDS + 599, False),
    (_claim(None), T0_SECONDS + 601, True),
    (_claim(None, stamp=None), T0_SECONDS + 10_000, False),
    (_claim(None, wanted=None), T0_SECONDS + 10_000, False),
    (_claim(None, stamp="yesterday"), T0_SECONDS + 10_000, False),
])
def test_binding_timed_out(obj: Obj, now: float, late: bool) -> None:
    assert binding_timed_out(obj, 600, now) is late


@pytest.mark.parametrize(("obj", "now"), [
    (_claim({"Failed": "True"}), T0_SECONDS),
    (_claim(None), T0_SECONDS + 601),
])
def test_a_claim_that_failed_or_waited_too_long_is_freed(obj: Obj, now: float) -> None:
    plugin = DynamicResources(parse_args(None), wall=lambda: now)
    state = cluster(nodes("n1"), classes=[gpu_class()], claims=[obj])
    cycle, pod, status = pre_filtered(state, pod_using("p", "c1"), plugin)
    assert status is None
    verdict = plugin.filter(cycle, pod, state.node_infos()[0])
    assert verdict is not None and verdict.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert verdict.reasons == (NOT_AVAILABLE_ON_NODE,)
    _, post = plugin.post_filter(cycle, pod, None)  # type: ignore[arg-type]
    assert post.reasons == (DEALLOCATION_COMPLETED,)


def test_a_claim_still_waiting_in_time_stays() -> None:
    plugin = DynamicResources(parse_args(None), wall=lambda: T0_SECONDS + 5)
    state = cluster(nodes("n1"), classes=[gpu_class()], claims=[_claim(None)])
    cycle, pod, _ = pre_filtered(state, pod_using("p", "c1"), plugin)
    assert plugin.filter(cycle, pod, state.node_infos()[0]) is None
