"""Malformed DRA objects: decoding succeeds or raises InvalidObjectError, and whatever
decodes can be allocated with only a result, None or an AllocationError coming out."""

from __future__ import annotations

import copy
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from policyd.dra.errors import AllocationError
from policyd.dra.objects import decode_device_class, decode_resource_claim, decode_resource_slice
from policyd.errors import InvalidObjectError
from policyd.model.quantity import nano_value
from tests.gen.mutate import mutate
from tests.unit.dra.dra_fixtures import (
    Scene,
    build,
    claim,
    device,
    device_class,
    first_available,
    opaque,
    request,
    resource_slice,
    sub,
)

JUNK = [None, 0, -1, 1.5, True, "", "x", "1Gi", "-1", "All", "ExactCount", "NoSchedule",
        [], {}, [1], {"a": 1}, ["x"], {"string": "x"}, {"value": "1"}, "99999999999999999999"]


def _mutate(obj: dict[str, Any], rng: random.Random, n: int) -> dict[str, Any]:
    return mutate(obj, rng, n, JUNK)


SELECTOR = {"nodeSelectorTerms": [{"matchExpressions": [
    {"key": "region", "operator": "In", "values": ["r1"]}]}]}
SLICES = [
    resource_slice("s1", device("d1", {"numa": 1, "kind": "x"}, {"bw": "10Gi"},
                                allowMultipleAllocations=True,
                                taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}],
                                consumesCounters=[{"counterSet": "set", "counters": {
                                    "c": {"value": "1"}}}]),
                   device("d2", {"numa": 2}), count=2),
    resource_slice("s2", sharedCounters=[{"name": "set", "counters": {"c": {"value": "2"}}}],
                   count=2),
    resource_slice("s3", device("d3", nodeSelector=SELECTOR, bindingConditions=["ok"]),
                   node=None, pool="p2", perDeviceNodeSelection=True),
    resource_slice("s4", device("d4"), node=None, pool="p3", nodeSelector=SELECTOR),
]
CLAIMS = [
    claim("c0", request("r0", count=2, tolerations=[{"key": "k", "operator": "Exists"}]),
          first_available("r1", sub("a", mode="All"), sub("b", capacity={"bw": "1Gi"})),
          constraints=[{"matchAttribute": "driver-a/numa"},
                       {"requests": ["r1/b"], "distinctAttribute": "driver-a/kind"}],
          config=[{"requests": ["r0"], **opaque("driver-a", x=1)}]),
    claim("c1", request("r0", admin=True, mode="All", selectors=["attr:kind=x"])),
]
CLASSES = [device_class(config=[opaque("driver-a", y=2)])]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 4), st.integers(0, 2))
def test_mutated_objects_decode_or_fail_cleanly_and_never_crash_the_allocator(
        seed: int, mutations: int, which: int) -> None:
    rng = random.Random(seed)
    slices, claims, classes = (copy.deepcopy(x) for x in (SLICES, CLAIMS, CLASSES))
    group: list[dict[str, Any]] = (slices, claims, classes)[which]
    index = rng.randrange(len(group))
    group[index] = _mutate(group[index], rng, mutations)
    try:
        for s in slices:
            decode_resource_slice(s, nano_value)
        for c in claims:
            decode_resource_claim(c, nano_value)
        for c in classes:
            decode_device_class(c)
    except InvalidObjectError as err:
        assert err.field is not None
        return
    scene = Scene(claims, slices, classes)
    try:
        allocator = build(scene)
        decoded = [decode_resource_claim(c, nano_value) for c in claims]
        allocator.allocate(scene.node, decoded)
    except AllocationError:
        pass
