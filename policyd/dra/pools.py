"""The resource pools a node can allocate from, in the order the search tries them.

A pool is a driver's named set of slices; only the slices of its newest generation
count. A pool is incomplete while fewer slices of that generation exist than the
pool says it has (the driver is publishing; allocation does not use it, and a request
for all devices fails), invalid when a device name repeats or counters are
inconsistent (not used; reported only when nothing else fits). Pools are sorted by
driver then pool name, those with binding conditions after all others, and slices by
name: the search is first fit, so this order decides which devices are chosen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from policyd.dra.features import AllocatorFeatures
from policyd.dra.nodes import Node, NodeSelectorError, node_matches
from policyd.dra.objects import CounterSet, ResourceSlice


@dataclass(slots=True, eq=False)
class Pool:
    driver: str
    name: str
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    # The pool's slices with devices for this node, sorted by name.
    slices: tuple[ResourceSlice, ...] = ()
    # Its other slices: their devices cannot be allocated here but their allocated
    # devices consume the pool's shared counters.
    other_slices: tuple[ResourceSlice, ...] = ()
    counter_sets: Mapping[str, CounterSet] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.name}"


class PoolError(Exception):
    """A slice whose node selection cannot be evaluated (upstream fails the whole
    allocation with it)."""


def gather_pools(slices_for_node: Sequence[ResourceSlice], node: Node,
                 features: AllocatorFeatures,
                 all_slices: Sequence[ResourceSlice]) -> list[Pool]:
    by_pool: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in slices_for_node:
        if not features.partitionable_devices and (
                s.per_device_node_selection is not None or s.shared_counters):
            continue
        if _relevant(s, node):
            _add_slice(by_pool, s)

    pools: list[Pool] = []
    with_binding_conditions: list[Pool] = []
    for (driver, name), found in by_pool.items():
        generation = found[0].generation
        expected = found[0].resource_slice_count
        pool: Pool | None
        if len(found) == expected:
            pool = _build(driver, name, found, features, None)
        else:
            # Some slices may have been left out above because they serve other
            # nodes: count the whole generation before calling the pool incomplete.
            obsolete, whole = _slices_of_generation(all_slices, driver, name, generation)
            if obsolete:
                continue  # the driver is replacing this generation
            if len(whole) != expected:
                pools.append(Pool(driver, name, incomplete=True))
                continue
            pool = _build(driver, name, found, features, whole)
        if _has_binding_conditions(pool):
            with_binding_conditions.append(pool)
        else:
            pools.append(pool)
    pools.sort(key=lambda p: (p.driver, p.name))
    with_binding_conditions.sort(key=lambda p: (p.driver, p.name))
    return pools + with_binding_conditions


def _relevant(s: ResourceSlice, node: Node) -> bool:
    try:
        if s.shared_counters:
            return True  # a pool's counters are needed whichever nodes it serves
        if s.node_name or s.all_nodes or s.node_selector is not None:
            return node_matches(node, s.node_name or "", bool(s.all_nodes), s.node_selector)
        if s.per_device_node_selection:
            for device in s.devices:
                try:
                    if node_matches(node, device.node_name or "", bool(device.all_nodes),
                                    device.node_selector):
                        return True
                except NodeSelectorError as err:
                    raise PoolError(
                        f"failed to perform node selection for device {device.name} in "
                        f"slice {s.name}: {_selector_text(err)}") from None
            return False
    except NodeSelectorError as err:
        raise PoolError(f"failed to perform node selection for slice {s.name}: "
                        f"{_selector_text(err)}") from None
    # None of the known ways to name nodes: a future extension this version cannot
    # read, skipped so other pools stay usable.
    return False


def _selector_text(err: NodeSelectorError) -> str:
    return f"failed to parse node selector: {err}"


def _add_slice(by_pool: dict[tuple[str, str], list[ResourceSlice]],
               s: ResourceSlice) -> None:
    key = (s.driver, s.pool)
    found = by_pool.get(key)
    if found is None or s.generation > found[0].generation:
        by_pool[key] = [s]
    elif s.generation == found[0].generation:
        found.append(s)
    # an older generation is out of date: ignored


def _slices_of_generation(all_slices: Sequence[ResourceSlice], driver: str, name: str,
                          generation: int) -> tuple[bool, list[ResourceSlice]]:
    """(whether a newer generation exists, the slices of this generation)."""
    out = []
    for s in all_slices:
        if s.driver != driver or s.pool != name:
            continue
        if s.generation > generation:
            return True, []
        if s.generation == generation:
            out.append(s)
    return False, out


def _build(driver: str, name: str, found: list[ResourceSlice],
           features: AllocatorFeatures, whole: list[ResourceSlice] | None) -> Pool:
    found = sorted(found, key=lambda s: s.name)
    if features.partitionable_devices:
        device_slices = [s for s in found if not s.shared_counters]
        counter_slices = [s for s in found if s.shared_counters]
    else:
        device_slices, counter_slices = found, []
    problem = _duplicate_device(device_slices)
    if problem:
        return Pool(driver, name, invalid=True, invalid_reason=problem)
    if not features.partitionable_devices:
        return Pool(driver, name, slices=tuple(device_slices))
    counter_sets: dict[str, CounterSet] = {}
    for s in counter_slices:
        for cs in s.shared_counters:
            if cs.name in counter_sets:
                return Pool(driver, name, invalid=True,
                            invalid_reason=f"duplicate counter set name {cs.name}")
            counter_sets[cs.name] = cs
    problem = _bad_consumption(counter_sets, found)
    if problem:
        return Pool(driver, name, invalid=True, invalid_reason=problem)
    if whole is None or len(found) == len(whole):
        return Pool(driver, name, slices=tuple(device_slices), counter_sets=counter_sets)
    seen = {s.name for s in found}
    others = [s for s in whole if s.name not in seen]
    # Their device names are not checked (upstream does not either), their counter
    # consumption is: it decides what the node's devices may still consume.
    problem = _bad_consumption(counter_sets, others)
    if problem:
        return Pool(driver, name, invalid=True, invalid_reason=problem)
    return Pool(driver, name, slices=tuple(device_slices), other_slices=tuple(others),
                counter_sets=counter_sets)


def _duplicate_device(slices: list[ResourceSlice]) -> str:
    names: set[str] = set()
    for s in slices:
        for d in s.devices:
            if d.name in names:
                return f"duplicate device name {d.name}"
            names.add(d.name)
    return ""


def _bad_consumption(counter_sets: Mapping[str, CounterSet],
                     slices: Sequence[ResourceSlice]) -> str:
    for s in slices:
        for d in s.devices:
            for consumption in d.consumes_counters:
                counter_set = counter_sets.get(consumption.counter_set)
                if counter_set is None:
                    return f"counter set {consumption.counter_set} not found"
                for counter in consumption.counters:
                    if counter not in counter_set.counters:
                        return (f"counter {counter} not found in counter set "
                                f"{counter_set.name}")
    return ""


def _has_binding_conditions(pool: Pool) -> bool:
    return any(d.binding_conditions is not None for s in pool.slices for d in s.devices)
