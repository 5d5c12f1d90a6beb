"""Consumable capacity arithmetic (request policies) on its own."""

from __future__ import annotations

import pytest

from policyd.dra.capacity import binary_si, consumed_for, fits, violates_policy
from policyd.dra.objects import DeviceCapacity, Quantity, RequestPolicy, ValidRange
from policyd.model.quantity import nano_value


def q(text: str) -> Quantity:
    return Quantity(nano_value(text), text)


@pytest.mark.parametrize(("value", "text"), [
    (0, "0"), (1000, "1000"), (1023, "1023"), (1024, "1Ki"), (1536, "1536"),
    (2**20, "1Mi"), (3 * 2**30, "3Gi"), (2**60, "1Ei"), (2**61, "2Ei"), (-2048, "-2Ki"),
])
def test_binary_si(value: int, text: str) -> None:
    assert binary_si(value) == text


RANGE = RequestPolicy(None, None, ValidRange(q("1Gi"), q("8Gi"), q("1Gi")))


def test_range_policy() -> None:
    cap = DeviceCapacity(q("10Gi"), RANGE)
    assert consumed_for(q("100Mi"), cap) == q("1Gi")
    assert consumed_for(q("3Gi"), cap) == q("3Gi")
    assert consumed_for(q("2049Mi"), cap).text == "3Gi"
    assert violates_policy(q("9Gi"), RANGE)
    assert violates_policy(q("1536Mi"), RANGE)
    assert not violates_policy(q("8Gi"), RANGE)


def test_default_is_never_a_violation() -> None:
    policy = RequestPolicy(q("3"), None, ValidRange(q("2"), None, q("2")))
    assert not violates_policy(q("3"), policy)
    assert violates_policy(q("5"), policy)


def test_fits_adds_allocated_and_allocating() -> None:
    capacity = {"bw": DeviceCapacity(q("10"))}
    assert fits({"bw": nano_value("4")}, {"bw": q("3")}, capacity, {"bw": nano_value("3")})
    assert not fits({"bw": nano_value("4")}, {"bw": q("3")}, capacity,
                    {"bw": nano_value("4")})
    assert not fits(None, {"other": q("1")}, capacity, None)
    assert fits(None, None, {}, None)
