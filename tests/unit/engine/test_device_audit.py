"""`audit_devices`: a bound pod's allocated devices asked today's questions (still
published, no untolerated NoExecute/NoSchedule taint, class present and selecting)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from policyd.engine.device_audit import (
    CLAIM_MISSING,
    CLASS_GONE,
    DEVICE_GONE,
    EVICTING_TAINT,
    NOT_ALLOCATED,
    NOT_SELECTED,
    SCHEDULING_TAINT,
    audit_devices,
)
from policyd.model.records import Pod
from tests.unit.plugins.dynamicresources.scene import (
    DRIVER,
    allocation,
    claim,
    cluster,
    exact,
    first_available,
    gpu_class,
    gpu_slice,
    nodes,
    pod_using,
)

Obj = dict[str, Any]
DEVICE = f"{DRIVER}/n1/g0"


def _slice(**device: Any) -> Obj:
    s = gpu_slice("n1", "g0", "g1", attributes={"model": {"string": "a100"}})
    s["spec"]["devices"][0].update(device)
    return s


def _bound(name: str = "p", *claims: str) -> Pod:
    return pod_using(name, *(claims or ("c1",))).set("spec.nodeName", "n1").obj()


def _audit(*, classes: list[Obj] | None = None, slices: list[Obj] | None = None,
           claims: list[Obj] | None = None, pods: list[Pod] | None = None
           ) -> list[tuple[str, str, str, str]]:
    state = cluster(nodes("n1"),
                    classes=[gpu_class()] if classes is None else classes,
                    slices=[_slice()] if slices is None else slices,
                    claims=[claim("c1", status={"allocation": allocation("n1", "g0")})]
                    if claims is None else claims)
    return [(f.pod, f.kind, f.device, f.message)
            for f in audit_devices(state, pods if pods is not None else [_bound()])]


def test_a_device_still_given_today_is_no_finding() -> None:
    assert _audit() == []


def _kinds(found: list[tuple[str, str, str, str]]) -> list[str]:
    return [kind for _, kind, _, _ in found]


def _tainted(effect: str, toleration: Obj | None = None) -> Callable[[], list[str]]:
    def run() -> list[str]:
        request = exact("gpu", tolerations=[toleration]) if toleration else exact("gpu")
        return _kinds(_audit(
            slices=[_slice(taints=[{"key": "health", "value": "bad", "effect": effect}])],
            claims=[claim("c1", request,
                          status={"allocation": allocation("n1", "g0")})]))
    return run


@pytest.mark.parametrize(("run", "kinds"), [
    (_tainted("NoExecute"), [EVICTING_TAINT]),
    (_tainted("NoSchedule"), [SCHEDULING_TAINT]),
    (_tainted("None"), []),  # an effect that does not prevent allocation
    (_tainted("NoExecute", {"key": "health", "operator": "Exists"}), []),
    (_tainted("NoExecute", {"key": "health", "operator": "Equal", "value": "ok"}),
     [EVICTING_TAINT]),
])
def test_taints(run: Callable[[], list[str]], kinds: list[str]) -> None:
    assert run() == kinds


def test_the_taint_is_named_and_what_it_means() -> None:
    [(_, _, device, message)] = _audit(slices=[_slice(taints=[
        {"key": "health", "value": "bad", "effect": "NoExecute"}])])
    assert device == DEVICE
    assert message == (f"device {DEVICE} has taint health=bad:NoExecute, which request gpu "
                       "does not tolerate: the device taint eviction evicts the pod")


def test_a_device_no_longer_published() -> None:
    renamed = gpu_slice("n1", "g9")
    newer = copy.deepcopy(_slice())
    newer["metadata"]["name"] = "n1-gpus-2"
    newer["spec"]["pool"]["generation"] = 2
    newer["spec"]["devices"] = [d for d in newer["spec"]["devices"] if d["name"] != "g0"]
    for slices in ([], [renamed], [_slice(), newer]):
        found = _audit(slices=slices)
        assert _kinds(found) == [DEVICE_GONE], slices
        assert found[0][3] == f"device {DEVICE} is no longer published in a ResourceSlice"


def test_the_class_gone_or_no_longer_selecting() -> None:
    assert _kinds(_audit(classes=[])) == [CLASS_GONE]
    tightened = gpu_class("gpu", 'device.attributes["gpu.example.com"].model == "h100"')
    [(_, kind, _, message)] = _audit(classes=[tightened])
    assert kind == NOT_SELECTED
    assert message.startswith(f"device {DEVICE}: class gpu: selector #1: no longer selects")
    # The request's own selectors too, and a sub-request's.
    picky = {"cel": {"expression": 'device.attributes["gpu.example.com"].model == "v100"'}}
    sub = first_available("gpu", ("big", "gpu", 1))
    sub["firstAvailable"][0]["selectors"] = [picky]
    found = _audit(claims=[claim("c1", sub, status={
        "allocation": allocation("n1", "g0", request="gpu/big")})])
    assert _kinds(found) == [NOT_SELECTED]
    assert "request gpu/big: selector #0" in found[0][3]


def test_claims_missing_or_not_allocated_and_pods_not_audited() -> None:
    assert _kinds(_audit(claims=[])) == [CLAIM_MISSING]
    assert _kinds(_audit(claims=[claim("c1")])) == [NOT_ALLOCATED]
    pending = pod_using("q", "c1").obj()
    done = pod_using("f", "c1").set("spec.nodeName", "n1").set("status.phase",
                                                                "Succeeded").obj()
    assert _audit(claims=[], pods=[pending, done]) == []


def test_each_pod_sharing_a_claim_is_told() -> None:
    found = _audit(slices=[_slice(taints=[{"key": "k", "effect": "NoExecute"}])],
                   pods=[_bound("a"), _bound("b")])
    assert [(pod, kind) for pod, kind, _, _ in found] == [
        ("default/a", EVICTING_TAINT), ("default/b", EVICTING_TAINT)]
    assert "has taint k:NoExecute" in found[0][3]
