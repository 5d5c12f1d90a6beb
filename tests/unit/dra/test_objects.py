"""Decoding resource.k8s.io/v1 objects: the fields the allocator reads, the API's
defaults, and one clear error (object, field path, what is wrong) for bad input."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.dra.objects import (
    Attribute,
    Quantity,
    decode_device_class,
    decode_resource_claim,
    decode_resource_slice,
)
from policyd.errors import InvalidObjectError
from policyd.model.quantity import nano_value
from tests.unit.dra.dra_fixtures import (
    claim,
    device,
    device_class,
    first_available,
    request,
    resource_slice,
    sub,
)


def test_slice_fields() -> None:
    raw = resource_slice(
        "s", device("d", {"a": 1, "b": True, "c": "x", "v": {"version": "1.2.3"},
                          "l": {"list": [1]}},
                    {"mem": "1Gi", "bw": {"value": "10", "requestPolicy": {
                        "default": "1", "validValues": ["1", "2"],
                        "validRange": {"min": "1", "max": "5", "step": "2"}}}},
                    taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}],
                    bindingConditions=["ready"], allowMultipleAllocations=True),
        generation=3, count=2)
    s = decode_resource_slice(raw, nano_value)
    assert (s.name, s.driver, s.pool, s.generation, s.resource_slice_count, s.node_name) \
        == ("s", "driver-a", "pool-1", 3, 2, "node-1")
    (d,) = s.devices
    assert d.attributes == {"a": Attribute("int", 1), "b": Attribute("bool", True),
                            "c": Attribute("string", "x"), "v": Attribute("version", "1.2.3"),
                            "l": Attribute("", None)}
    assert d.capacity["mem"].value == Quantity(2**30 * 10**9, "1Gi")
    policy = d.capacity["bw"].request_policy
    assert policy is not None and policy.valid_range is not None
    assert policy.default == Quantity(10**9, "1")
    assert [q.text for q in policy.valid_values or ()] == ["1", "2"]
    assert policy.valid_range.step == Quantity(2 * 10**9, "2")
    assert [(t.key, t.effect) for t in d.taints] == [("k", "NoSchedule")]
    assert d.binding_conditions == ("ready",) and d.binding_failure_conditions is None
    assert d.allow_multiple_allocations is True
    assert d.raw is raw["spec"]["devices"][0]


def test_claim_defaults_and_status() -> None:
    raw = claim("c", request("plain"), request("all", mode="All"),
                first_available("fa", sub("s1"), sub("s2", count=2)),
                constraints=[{"requests": ["plain"], "matchAttribute": "x/y"}],
                config=[{"requests": ["plain"], "opaque": {"driver": "x"}}],
                allocation={"devices": {"results": [
                    {"request": "plain", "driver": "x", "pool": "p", "device": "d",
                     "shareID": "u", "consumedCapacity": {"bw": "1"}}]}})
    raw["status"]["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "1"}]
    c = decode_resource_claim(raw, nano_value)
    assert (c.key, c.uid) == ("default/c", "uid-c")
    plain, every, fa = c.requests
    assert plain.exactly is not None and (plain.exactly.allocation_mode,
                                          plain.exactly.count) == ("ExactCount", 1)
    assert every.exactly is not None and (every.exactly.allocation_mode,
                                          every.exactly.count) == ("All", 0)
    assert [(s.name, s.count, s.admin_access) for s in fa.first_available] \
        == [("s1", 1, None), ("s2", 2, None)]
    assert c.constraints[0].match_attribute == "x/y"
    assert c.config[0].configuration == {"opaque": {"driver": "x"}}
    assert c.allocated is not None
    assert c.allocated[0].share_id == "u"
    assert c.allocated[0].consumed_capacity == {"bw": Quantity(10**9, "1")}
    assert c.reserved_for[0].name == "p"


def test_class_selectors_and_config() -> None:
    raw = device_class("gpu", "driver-a", "true", config=[{"opaque": {"driver": "x"}}])
    raw["spec"]["selectors"].append({"future": {}})
    raw["spec"]["extendedResourceName"] = "example.com/gpu"
    c = decode_device_class(raw)
    assert [s.expression for s in c.selectors] == ["driver=driver-a", "true", None]
    assert c.config == ({"opaque": {"driver": "x"}},)
    assert c.extended_resource_name == "example.com/gpu"


def _bad_slice(**spec: Any) -> dict[str, Any]:
    raw = resource_slice("s", device("d"))
    raw["spec"].update(spec)
    return raw


@pytest.mark.parametrize(("raw", "where", "message"), [
    pytest.param([], "<unnamed>", ": must be an object, not list", id="not-an-object"),
    pytest.param({"metadata": {}}, "<unnamed>", "metadata.name: is required", id="no-name"),
    pytest.param(_bad_slice(driver=None), "s", "spec.driver: is required", id="no-driver"),
    pytest.param(_bad_slice(devices={}), "s", "spec.devices: must be a list, not an object",
                 id="devices-not-a-list"),
    pytest.param(_bad_slice(devices=[{"name": 3}]), "s",
                 "spec.devices[0].name: must be a string, not a number", id="device-name"),
    pytest.param(_bad_slice(devices=[device("d", capacity={"m": "1Q"})]), "s",
                 "spec.devices[0].capacity.m.value: invalid quantity",
                 id="bad-quantity"),
    pytest.param(_bad_slice(devices=[device("d", {"a": {"int": "1"}})]), "s",
                 "spec.devices[0].attributes.a.int: must be an integer", id="attribute-type"),
    pytest.param(_bad_slice(pool={"name": "p", "generation": "1"}), "s",
                 "spec.pool.generation: must be an integer, not a string", id="generation"),
    pytest.param(_bad_slice(nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "k", "operator": "In", "values": "x"}]}]}), "s",
                 "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values: must be "
                 "a list, not a string", id="selector-values"),
    pytest.param(_bad_slice(allNodes="yes"), "s",
                 "spec.allNodes: must be a boolean, not a string", id="all-nodes"),
])
def test_slice_errors(raw: Any, where: str, message: str) -> None:
    with pytest.raises(InvalidObjectError) as raised:
        decode_resource_slice(raw, nano_value)
    assert raised.value.where == f"ResourceSlice {where}"
    assert str(raised.value.message).startswith(message)


@pytest.mark.parametrize(("edit", "message"), [
    pytest.param(lambda c: c["spec"]["devices"]["requests"][0].update(name=None),
                 "spec.devices.requests[0].name: is required", id="request-name"),
    pytest.param(lambda c: c["spec"]["devices"]["requests"][0]["exactly"].update(count=1.5),
                 "spec.devices.requests[0].exactly.count: must be an integer, not a number",
                 id="count"),
    pytest.param(lambda c: c["spec"]["devices"]["requests"][0]["exactly"].update(
        capacity={"requests": {"bw": "x"}}),
                 "spec.devices.requests[0].exactly.capacity.requests.bw: invalid quantity",
                 id="capacity"),
    pytest.param(lambda c: c["spec"]["devices"]["requests"][0]["exactly"].update(
        selectors=[{"cel": {"expression": 1}}]),
                 "spec.devices.requests[0].exactly.selectors[0].cel.expression: must be a "
                 "string", id="expression"),
    pytest.param(lambda c: c.update(status={"allocation": {"devices": {"results": [{}]}}}),
                 "status.allocation.devices.results[0].driver: is required",
                 id="result-driver"),
])
def test_claim_errors(edit: Any, message: str) -> None:
    raw = claim("c", request("r"))
    edit(raw)
    with pytest.raises(InvalidObjectError) as raised:
        decode_resource_claim(raw, nano_value)
    assert raised.value.where == "ResourceClaim default/c"
    assert raised.value.message.startswith(message)
