"""CEL device selectors as the allocator sees them: compiled once per expression.

The CEL library is a `CelBackend`: `KUBERNETES_CEL` is policyd.cel's
(`compile_device_selector(expression) -> DeviceSelector` raising CelCompileError and
`DeviceSelector.matches(driver, device)` raising CelRuntimeError, with Kubernetes'
environment and error texts); the allocator only needs those two calls and the two
error types, so tests can also give it a small fake of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from policyd.cel import CelCompileError, CelRuntimeError, compile_device_selector


class DeviceSelector(Protocol):
    def matches(self, driver: str, device: Mapping[str, Any]) -> bool: ...


@dataclass(frozen=True, slots=True)
class CelBackend:
    compile: Callable[[str], DeviceSelector]
    compile_error: type[Exception]
    runtime_error: type[Exception]


# Kubernetes' CEL environment for DRA (policyd.cel): what the plugin allocates with.
KUBERNETES_CEL = CelBackend(compile_device_selector, CelCompileError, CelRuntimeError)


@dataclass(frozen=True, slots=True)
class Compiled:
    """One expression compiled, or the text of its compile error."""

    selector: DeviceSelector | None
    error: str | None


class SelectorCache:
    """Compiled expressions by text, errors included, as upstream's cel.Cache: an
    expression that does not compile fails each allocation that reaches it, without
    being compiled again. One cache may serve many allocations (the plugin keeps one);
    it grows with the distinct expressions of classes and claims, which are few."""

    __slots__ = ("_backend", "_compiled")

    def __init__(self, backend: CelBackend) -> None:
        self._backend = backend
        self._compiled: dict[str, Compiled] = {}

    @property
    def runtime_error(self) -> type[Exception]:
        return self._backend.runtime_error

    def get(self, expression: str) -> Compiled:
        found = self._compiled.get(expression)
        if found is None:
            try:
                found = Compiled(self._backend.compile(expression), None)
            except self._backend.compile_error as err:
                found = Compiled(None, str(err))
            self._compiled[expression] = found
        return found
