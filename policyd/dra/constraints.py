"""A claim's matchAttribute and distinctAttribute constraints, checked device by device
while the search adds and removes candidates.

Both are monotonic (once a device breaks one, adding more devices cannot mend it), so
the search may drop a candidate the moment `add` refuses it. A constraint with request
names applies only to devices of those requests (a sub-request counts under its
parent's name and under `parent/sub`); without names it applies to every device of
the claim. An attribute is looked up by its fully qualified name, or by its bare name
when the domain is the device's driver.
"""

from __future__ import annotations

from typing import Protocol

from policyd.dra.objects import Attribute, Device


class DeviceConstraint(Protocol):
    def add(self, request: str, sub_request: str, device: Device, driver: str) -> bool: ...

    def remove(self, request: str, sub_request: str, device: Device, driver: str) -> None:
        ...


def lookup_attribute(device: Device, driver: str, name: str) -> Attribute | None:
    found = device.attributes.get(name)
    if found is not None:
        return found
    domain, slash, bare = name.partition("/")
    if not slash or domain != driver:
        return None
    return device.attributes.get(bare)


class _Scoped:
    __slots__ = ("attribute_name", "requests")

    def __init__(self, requests: tuple[str, ...], attribute_name: str) -> None:
        self.requests = frozenset(requests)
        self.attribute_name = attribute_name

    def applies(self, request: str, sub_request: str) -> bool:
        if not self.requests:
            return True
        if request in self.requests:
            return True
        return bool(sub_request) and f"{request}/{sub_request}" in self.requests


class MatchAttribute(_Scoped):
    """Every device has the attribute, all with one value."""

    __slots__ = ("count", "value")

    def __init__(self, requests: tuple[str, ...], attribute_name: str) -> None:
        super().__init__(requests, attribute_name)
        self.value: Attribute | None = None
        self.count = 0

    def add(self, request: str, sub_request: str, device: Device, driver: str) -> bool:
        if not self.applies(request, sub_request):
            return True
        attribute = lookup_attribute(device, driver, self.attribute_name)
        if attribute is None:
            return False
        if self.count == 0:
            self.value = attribute
        elif not attribute.kind or attribute != self.value:
            return False
        self.count += 1
        return True

    def remove(self, request: str, sub_request: str, device: Device, driver: str) -> None:
        if self.applies(request, sub_request):
            self.count -= 1


class DistinctAttribute(_Scoped):
    """Every device has the attribute, no two with one value.

    Kept as upstream keeps it: one remembered value per request name, so two devices
    of one request are compared only with the value last added for that request (and
    removing one forgets the request's value)."""

    __slots__ = ("count", "values")

    def __init__(self, requests: tuple[str, ...], attribute_name: str) -> None:
        super().__init__(requests, attribute_name)
        self.values: dict[str, Attribute] = {}
        self.count = 0

    def add(self, request: str, sub_request: str, device: Device, driver: str) -> bool:
        if not self.applies(request, sub_request):
            return True
        attribute = lookup_attribute(device, driver, self.attribute_name)
        if attribute is None:
            return False
        if self.count > 0:
            for seen in self.values.values():
                if not attribute.kind or attribute == seen:
                    return False
        self.values[request] = attribute
        self.count += 1
        return True

    def remove(self, request: str, sub_request: str, device: Device, driver: str) -> None:
        if self.applies(request, sub_request):
            self.values.pop(request, None)
            self.count -= 1
