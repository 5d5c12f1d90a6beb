"""DRA device selectors: `compile_device_selector` and `DeviceSelector.matches`, as
k8s.io/dynamic-resource-allocation/cel (v0.36.3) compiles and evaluates them for
kube-scheduler's allocator.

The expression sees one variable, `device`, with the fields of upstream's
`kubernetes.DRADevice` (the v1.36 stored-expressions environment, consumable capacity
on): `device.driver` (string), `device.allowMultipleAllocations` (bool),
`device.attributes` (domain -> name -> bool, int, string or semver) and
`device.capacity` (domain -> name -> quantity). An attribute or capacity name without
a "domain/" prefix belongs to the driver's domain. Looking up a domain the device does
not have gives an empty map, as upstream's map wrapper does, so
`device.attributes["other.example.com"].model` fails with "no such key: model".

How it maps onto cel-expr-python: the four fields are declared as the qualified
variables `device.driver`, ... (the checker resolves `device.attributes` to one
variable), so type checking is upstream's for every field an expression can use; an
unknown field is reported as upstream's "undefined field" (`messages.py`). Upstream's empty-map
default cannot be given to cel-cpp as a map, so the compiled tree is read once
(`_view_of`): when the domain maps are only indexed with constant domains
(`device.attributes["gpu.example.com"]`, `device.attributes.gpu`, `has(...)`), each
such domain the device lacks is added as an empty map, which is exactly upstream's
result (and the domains it never names are left out of its input: they cannot be
observed, and converting them is most of an evaluation's cost). When an expression
also uses a domain map whole (`"x" in device.attributes`,
`.size()`, a macro over it, `cel.bind` of it), nothing is added, so enumeration
stays right, and a lookup of a missing domain fails with "no such key: <domain>"
where upstream would go on with an empty map: the one known difference.

Cost: upstream stops an evaluation at a runtime cost of 1,000,000; cel-cpp counts no
cost, so policyd estimates the worst case at compile time (`cost.py`) and refuses to
evaluate a selector whose estimate passes the limit, with upstream's runtime text. The
API server refuses such selectors when they are created, so only objects read from
files can be refused here.

The cache (`compile_device_selector`) keeps one DeviceSelector per distinct
expression, bounded, thread safe, compiling each expression once even when threads
ask at the same time, as upstream's cel.Cache. Unlike upstream it also keeps
failures (their text is the same every time), and it holds 1024 entries where
kube-scheduler's holds 10: a difference of speed only.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cel_expr_python import cel

from policyd.cel import environment, messages, results, values
from policyd.cel import semver as semver_text
from policyd.cel.checked_ast import CheckedAst, Node
from policyd.cel.cost import Shape, estimate
from policyd.cel.errors import CelCompileError, CelRuntimeError
from policyd.cel.library import QUANTITY
from policyd.cel.quantity import QuantityParseError

# k8s.io/api/resource/v1 limits the environment is declared with.
CEL_SELECTOR_MAX_COST = 1_000_000  # CELSelectorExpressionMaxCost
DRIVER_NAME_MAX_LENGTH = 63
DEVICE_MAX_DOMAIN_LENGTH = 63
DEVICE_MAX_ID_LENGTH = 32
DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH = 64
MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE = 32
CACHE_SIZE = 1024

_DRIVER = "device.driver"
_MULTI = "device.allowMultipleAllocations"
_ATTRIBUTES = "device.attributes"
_CAPACITY = "device.capacity"
_FIELDS = frozenset({"driver", "allowMultipleAllocations", "attributes", "capacity"})

_M = cel.Type.Map
_VARIABLES = {
    _DRIVER: cel.Type.STRING,
    _MULTI: cel.Type.BOOL,
    _ATTRIBUTES: _M(cel.Type.STRING, _M(cel.Type.STRING, cel.Type.DYN)),
    _CAPACITY: _M(cel.Type.STRING, _M(cel.Type.STRING, QUANTITY)),
}
_DOMAIN_KEY = Shape(DEVICE_MAX_DOMAIN_LENGTH)
_ID_KEY = Shape(DEVICE_MAX_ID_LENGTH)
_SHAPES = {
    _DRIVER: Shape(DRIVER_NAME_MAX_LENGTH),
    _MULTI: Shape(1),
    _ATTRIBUTES: Shape(MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE,
                       Shape(MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE,
                             Shape(DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH), _ID_KEY), _DOMAIN_KEY),
    _CAPACITY: Shape(MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE,
                     Shape(MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE, Shape(1), _ID_KEY),
                     _DOMAIN_KEY),
}
_COST_LIMIT_EXCEEDED = "operation cancelled: actual cost limit exceeded"

_env_lock = threading.Lock()
_env: Any = None


def _device_env() -> Any:
    global _env
    with _env_lock:
        if _env is None:
            _env = environment.new_env(_VARIABLES)
        return _env


class DeviceDataError(CelRuntimeError):
    """The device object itself is malformed (not what the API server would store);
    the message names the attribute or capacity and what is wrong with it."""


# What of one domain map (attributes or capacity) an expression can observe: nothing
# (None), the whole map (_WHOLE: it is enumerated, tested with `in`, bound, ...), or
# only the constant domains it looks up, each padded to an empty map when missing.
_WHOLE = "whole"
_MapView = frozenset[str] | str | None
# Per selector: whether it reads device.driver and device.allowMultipleAllocations,
# and its view of the two maps. Selectors with the same view share a device's
# converted input (DeviceInput.activation).
_View = tuple[bool, bool, _MapView, _MapView]


@dataclass(frozen=True, slots=True)
class DeviceInput:
    """A device as selectors see it, built once and reusable across selectors and
    scheduling cycles (while its ResourceSlice is unchanged): it keeps the library's
    converted form of each view selectors took of it, which is most of an
    evaluation's cost, and each selector's verdict."""

    driver: str
    allow_multiple_allocations: bool
    attributes: Mapping[str, Mapping[str, Any]]
    capacity: Mapping[str, Mapping[str, Any]]
    _per_thread: threading.local = field(default_factory=threading.local, compare=False,
                                         repr=False)
    # Each selector's verdict on this device, by expression: a selector is a pure
    # function of the device, so the verdict (or the error's text) never changes.
    _verdicts: dict[str, bool | str] = field(default_factory=dict, compare=False, repr=False)

    def activation(self, view: _View) -> Any:
        """The library's input for selectors with this view, built on first use. One
        per thread, kept in thread-local storage that ends with its thread: an
        Activation evaluated in another thread than the one that built it fails once
        its builder has ended ("No PyCelArena found for google::protobuf::Arena"), and
        thread ids are reused."""
        activations: dict[_View, Any] | None = getattr(self._per_thread, "activations", None)
        if activations is None:
            activations = {}
            self._per_thread.activations = activations
        found = activations.get(view)
        if found is None:
            uses_driver, uses_multi, attributes, capacity = view
            data: dict[str, Any] = {}
            if uses_driver:
                data[_DRIVER] = self.driver
            if uses_multi:
                data[_MULTI] = self.allow_multiple_allocations
            if attributes is not None:
                data[_ATTRIBUTES] = _visible(self.attributes, attributes)
            if capacity is not None:
                data[_CAPACITY] = _visible(self.capacity, capacity)
            found = _device_env().Activation(data)
            activations[view] = found
        return found


def prepare_device(driver: str, device: Mapping[str, Any]) -> DeviceInput:
    """The selector's view of a resource.k8s.io/v1 Device (JSON): attribute values
    converted as upstream's getAttributeValue (first of int, bool, string, version; a
    version parsed strictly), names split into domain and ID, capacities parsed.

    Raises CelRuntimeError with upstream's text for an attribute it cannot use
    ("attribute gpu: unsupported attribute value") and DeviceDataError for input no
    API server would hold (a capacity that is not a quantity, a value of the wrong
    JSON type)."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, attribute in _mapping(device.get("attributes"), "attributes").items():
        domain, ident = _split_name(name, driver)
        attributes.setdefault(domain, {})[ident] = _attribute_value(name, attribute)
    capacity: dict[str, dict[str, Any]] = {}
    for name, entry in _mapping(device.get("capacity"), "capacity").items():
        domain, ident = _split_name(name, driver)
        capacity.setdefault(domain, {})[ident] = _capacity_value(name, entry)
    multi = device.get("allowMultipleAllocations")
    if multi is not None and not isinstance(multi, bool):
        raise DeviceDataError(f"allowMultipleAllocations: expected a bool, got {multi!r}", "")
    return DeviceInput(driver, bool(multi), attributes, capacity)


class DeviceSelector:
    """One compiled selector. `matches` is safe to call from several threads."""

    __slots__ = ("_program", "_view", "expression", "max_cost", "output_type")

    def __init__(self, expression: str, compiled: environment.Compiled) -> None:
        self.expression = expression
        self._program = compiled.program
        self.output_type = compiled.output_type
        self.max_cost = estimate(compiled.ast, _SHAPES)
        self._view = _view_of(compiled.ast)

    def __repr__(self) -> str:
        return f"DeviceSelector({self.expression!r})"

    def matches(self, driver: str, device: Mapping[str, Any]) -> bool:
        """Whether the device (resource.k8s.io/v1 Device JSON, of `driver`) is
        selected; CelRuntimeError with upstream's text when evaluation fails."""
        try:
            prepared = prepare_device(driver, device)
        except CelRuntimeError as e:
            e.expression = self.expression
            raise
        return self.matches_input(prepared)

    def matches_input(self, device: DeviceInput) -> bool:
        """`matches` for a device already prepared (`prepare_device`). The verdict is
        kept on the device, so asking again (the next pod, the next cycle) costs a
        dict lookup."""
        verdict = device._verdicts.get(self.expression)
        if verdict is None:
            try:
                verdict = self._evaluate(device)
            except CelRuntimeError as e:
                verdict = e.message
            device._verdicts[self.expression] = verdict
        if isinstance(verdict, str):
            raise CelRuntimeError(verdict, self.expression)
        return verdict

    def _evaluate(self, device: DeviceInput) -> bool:
        if self.max_cost > CEL_SELECTOR_MAX_COST:
            raise CelRuntimeError(_COST_LIMIT_EXCEEDED, self.expression)
        try:
            result = self._program.eval(device.activation(self._view))
        except RuntimeError as e:  # the binding refuses a value or fails internally
            raise CelRuntimeError(messages.runtime(str(e)), self.expression) from None
        return results.as_bool(result, self.expression)


# --- compile and cache ----------------------------------------------------------------

_cache: OrderedDict[str, DeviceSelector | CelCompileError] = OrderedDict()
_cache_lock = threading.Lock()


def compile_device_selector(expression: str) -> DeviceSelector:
    """The compiled selector for `expression`, from the cache when it was compiled
    before (the same object). Raises CelCompileError with upstream's text
    ("compilation failed: ERROR: <input>:1:1: ...", "must evaluate to bool or the
    unknown type, not int")."""
    with _cache_lock:
        cached = _cache.get(expression)
        if cached is None:
            # Compiling under the lock: one compile per expression even when threads
            # race (upstream's per-expression mutex); the GIL serializes them anyway.
            cached = _compile_uncached(expression)
            _cache[expression] = cached
            if len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
        else:
            _cache.move_to_end(expression)
    if isinstance(cached, CelCompileError):
        # A fresh exception per call: one raised instance would collect every caller's
        # traceback and context.
        raise CelCompileError(cached.message, cached.expression, cached.line, cached.column)
    return cached


def _compile_uncached(expression: str) -> DeviceSelector | CelCompileError:
    try:
        compiled = environment.compile_expression(_device_env(), expression,
                                                  prefix="compilation failed: ",
                                                  objects={"device": _FIELDS})
    except CelCompileError as e:
        return e
    output = compiled.output_type
    explicit_dyn = compiled.ast.root.kind == "call" and compiled.ast.root.name == "dyn"
    if output != "bool" and (output != "dyn" or explicit_dyn):
        # Attribute values are declared dyn here, AnyType (google.protobuf.Any) upstream,
        # which accepts one as a result; an explicit dyn() it refuses.
        if output.startswith("map("):
            output = output.replace("dyn", "google.protobuf.Any")
        return CelCompileError(f"must evaluate to bool or the unknown type, not {output}",
                               expression)
    return DeviceSelector(expression, compiled)


# --- upstream's empty map for a missing domain ----------------------------------------

def _view_of(ast: CheckedAst) -> _View:
    idents: set[str] = set()
    domains: dict[str, set[str]] = {_ATTRIBUTES: set(), _CAPACITY: set()}
    whole: set[str] = set()
    stack: list[tuple[Node, Node | None]] = [(ast.root, None)]
    while stack:
        node, parent = stack.pop()
        stack.extend((child, node) for child in node.children())
        if node.kind != "ident":
            continue
        idents.add(node.name)
        if node.name not in domains:
            continue
        if (parent is not None and parent.kind == "call" and parent.name == "_[_]"
                and len(parent.args) == 2 and parent.args[0] is node
                and parent.args[1].kind == "const" and isinstance(parent.args[1].value, str)):
            domains[node.name].add(parent.args[1].value)
        elif parent is not None and parent.kind == "select" and parent.operand is node:
            domains[node.name].add(parent.name)
        else:
            whole.add(node.name)

    def map_view(variable: str) -> _MapView:
        if variable not in idents:
            return None
        return _WHOLE if variable in whole else frozenset(domains[variable])

    return (_DRIVER in idents, _MULTI in idents, map_view(_ATTRIBUTES), map_view(_CAPACITY))


def _visible(maps: Mapping[str, Mapping[str, Any]], view: _MapView) -> Mapping[str, Any]:
    if view == _WHOLE or not isinstance(view, frozenset):
        return maps
    # Upstream's map answers every domain it lacks with an empty map; domains the
    # expression never names cannot be observed, so they are left out.
    return {domain: maps.get(domain, {}) for domain in view}


# --- device JSON ----------------------------------------------------------------------

def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DeviceDataError(f"{where}: expected an object, got {type(value).__name__}", "")
    return value


def _split_name(name: str, driver: str) -> tuple[str, str]:
    """parseQualifiedName: "domain/id", or the driver's domain for a bare id."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def _attribute_value(name: str, attribute: Any) -> Any:
    if not isinstance(attribute, Mapping):
        raise DeviceDataError(f"attribute {name}: expected an object, got "
                              f"{type(attribute).__name__}", "")
    # getAttributeValue's order: int, bool, string, version; anything else (a list
    # value, with DRAListTypeAttributes off as in v1.36) is unsupported.
    if attribute.get("int") is not None:
        value = attribute["int"]
        if isinstance(value, bool) or not isinstance(value, int) \
                or not -(2**63) <= value < 2**63:
            raise DeviceDataError(f"attribute {name}: int: expected a 64-bit integer, "
                                  f"got {value!r}", "")
        return value
    if attribute.get("bool") is not None:
        value = attribute["bool"]
        if not isinstance(value, bool):
            raise DeviceDataError(f"attribute {name}: bool: expected a bool, got {value!r}",
                                  "")
        return value
    if attribute.get("string") is not None:
        value = attribute["string"]
        if not isinstance(value, str):
            raise DeviceDataError(f"attribute {name}: string: expected a string, got "
                                  f"{value!r}", "")
        return value
    if attribute.get("version") is not None:
        value = attribute["version"]
        if not isinstance(value, str):
            raise DeviceDataError(f"attribute {name}: version: expected a string, got "
                                  f"{value!r}", "")
        try:
            return values.semver_from_text(value)
        except semver_text.SemverParseError as e:
            raise CelRuntimeError(f"attribute {name}: parse semantic version: {e}",
                                  "") from None
    raise CelRuntimeError(f"attribute {name}: unsupported attribute value", "")


def _capacity_value(name: str, entry: Any) -> Any:
    value = entry.get("value") if isinstance(entry, Mapping) else None
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)  # JSON numbers are quantities too
    if not isinstance(value, str):
        raise DeviceDataError(f"capacity {name}: expected {{\"value\": <quantity>}}, got "
                              f"{entry!r}", "")
    try:
        return values.quantity_from_text(value)
    except QuantityParseError as e:
        raise DeviceDataError(f"capacity {name}: invalid quantity {value!r}: {e}", "") \
            from None
