"""The DRA objects the DynamicResources plugin reads (resource.k8s.io/v1 DeviceClasses,
ResourceSlices and ResourceClaims), as raw JSON, with kube-scheduler's claim tracker.

The same container serves the daemon (fed by informers) and the offline commands (fed
by a snapshot or PolicyTest file), as `policyd.model.storage` does for volumes: objects
stay raw, each reader decodes the fields it needs once per object version
(`DraObjects.decoded`), and the indexes below are kept up to date on every change, so
a cycle never scans every slice or claim to find the few it needs.

ResourceClaims go through `ClaimCache`, upstream's claim tracker
(pkg/scheduler/framework/plugins/dynamicresources/dra_manager.go over
pkg/scheduler/util/assumecache): what the API server showed last, what the scheduler
assumes it will show after its own write (PreBind's status update), and the
allocations decided in Reserve whose write has not been made yet ("in flight"), so the
next pod's cycle does not take the same devices. Every change of a claim as the
scheduler sees it (an informer version, an assumption, a restore) is told to the
cache's listeners, as upstream's assume cache tells its event handlers: that is where
the daemon's ResourceClaim cluster events come from.
"""

from __future__ import annotations

import itertools
from collections import Counter, deque
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from policyd.model.storage import DecodeMemo, StaleObjectError, resource_version

T = TypeVar("T")
K = TypeVar("K")
Obj = dict[str, Any]

# Kinds held here, as they appear in snapshot files and `kind:` fields.
DEVICE_CLASS = "DeviceClass"
RESOURCE_SLICE = "ResourceSlice"
RESOURCE_CLAIM = "ResourceClaim"
DRA_KINDS = (DEVICE_CLASS, RESOURCE_SLICE, RESOURCE_CLAIM)
NAMESPACED_KINDS = frozenset({RESOURCE_CLAIM})
API_VERSION = "resource.k8s.io/v1"
# Every DeviceClass also serves the extended resource named after it with this prefix
# (resourceapi.ResourceDeviceClassPrefix), besides its spec.extendedResourceName.
DEVICE_CLASS_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"

# (driver, pool, device): one device of one pool, as the allocator names it.
DeviceID = tuple[str, str, str]
# (driver, pool, device, shareID): one share of a device with consumable capacity.
SharedDeviceID = tuple[str, str, str, str]
# Pool changes the claim cache remembers (ClaimCache.pool_changes_since): many more
# than the allocations made between two cycles.
POOL_CHANGE_LOG = 65536
# What a listener is told: (old, new), old None for an add, new None for a delete.
ClaimListener = Callable[[Obj | None, Obj | None], None]


def dra_key(kind: str, obj: Obj) -> str:
    """`namespace/name` for claims (upstream's MetaNamespaceKeyFunc), `name` for the
    cluster-scoped kinds."""
    meta = _dict(obj.get("metadata"))
    name = _str(meta.get("name"))
    if kind in NAMESPACED_KINDS:
        return f"{_str(meta.get('namespace')) or 'default'}/{name}"
    return name


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# -- what the indexes read from an object ------------------------------------------------
# Defensive on purpose: an informer hands over whatever the API server (or a proxy)
# sent, and a malformed field must leave the object out of an index, never raise.

@dataclass(frozen=True, slots=True)
class Consumer:
    """One entry of a claim's status.reservedFor."""

    api_group: str
    resource: str
    name: str
    uid: str

    @property
    def is_pod(self) -> bool:
        return self.resource == "pods" and self.api_group == ""


def reserved_for(claim: Obj) -> tuple[Consumer, ...]:
    """The claim's status.reservedFor entries (malformed ones left out)."""
    out = []
    for entry in _list(_dict(claim.get("status")).get("reservedFor")):
        if isinstance(entry, dict):
            out.append(Consumer(_str(entry.get("apiGroup")), _str(entry.get("resource")),
                                _str(entry.get("name")), _str(entry.get("uid"))))
    return tuple(out)


def claim_uid(claim: Obj) -> str:
    return _str(_dict(claim.get("metadata")).get("uid"))


def allocation_results(claim: Obj) -> Iterator[dict[str, Any]]:
    """status.allocation.devices.results, each a dict (malformed ones left out)."""
    allocation = _dict(claim.get("status")).get("allocation")
    if not isinstance(allocation, dict):
        return
    for result in _list(_dict(allocation.get("devices")).get("results")):
        if isinstance(result, dict):
            yield result


def is_allocated(claim: Obj | None) -> bool:
    return claim is not None and isinstance(_dict(claim.get("status")).get("allocation"),
                                            dict)


def allocated_devices(claim: Obj) -> tuple[list[DeviceID], list[SharedDeviceID]]:
    """The devices a claim's allocation takes, as upstream's foreachAllocatedDevice
    sees them: results with admin access take nothing; a result with a shareID takes
    one share of its device (dedicated instead when consumable capacity is off, which
    the reader decides: `ClaimCache.allocated_device_ids`)."""
    dedicated: list[DeviceID] = []
    shared: list[SharedDeviceID] = []
    for result in allocation_results(claim):
        if result.get("adminAccess") is True:
            continue
        device = (_str(result.get("driver")), _str(result.get("pool")),
                  _str(result.get("device")))
        share = result.get("shareID")
        if isinstance(share, str):
            shared.append((*device, share))
        else:
            dedicated.append(device)
    return dedicated, shared


def slice_node_name(slice_: Obj) -> str:
    """spec.nodeName, "" for a slice whose devices are not all on one named node
    (nodeSelector, allNodes or perDeviceNodeSelection)."""
    return _str(_dict(slice_.get("spec")).get("nodeName"))


def slice_pool(slice_: Obj) -> tuple[str, str]:
    """(driver, pool name) of a slice."""
    spec = _dict(slice_.get("spec"))
    return _str(spec.get("driver")), _str(_dict(spec.get("pool")).get("name"))


def _creation_time(obj: Obj) -> float:
    """metadata.creationTimestamp as seconds; 0 when absent or unreadable (upstream's
    zero time compares before every real one)."""
    text = _dict(obj.get("metadata")).get("creationTimestamp")
    if not isinstance(text, str):
        return 0.0
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


# -- claims ------------------------------------------------------------------------------

class ClaimCache:
    """ResourceClaims by `namespace/name`: upstream's assume cache of claims and its
    in-flight allocations.

    `upsert` (the informer) replaces the stored object only with a strictly newer
    resourceVersion than the one the scheduler sees now (the assumed one, if any):
    the informer delivering the very version PreBind assumed changes nothing, an
    older one is ignored. `assume` takes a claim the scheduler wrote as the version
    to see until a newer one arrives, refused when older than what is stored;
    `restore` goes back to the API server's version. Objects without a numeric
    resourceVersion (a snapshot file) always replace what is stored.

    In-flight allocations are kept by claim uid with a count of the pods sharing
    them (`signal_pending_allocation` in Reserve, `remove_pending_allocation` once
    PreBind wrote it or Unreserve gave it up), apart from the objects, as upstream
    keeps them: the next cycle counts their devices as taken.

    Not thread-safe by itself: in the daemon every change is made under the
    scheduling state's lock, the lock its listener takes to move pods."""

    def __init__(self, memo: DecodeMemo) -> None:
        self._memo = memo
        self._api: dict[str, Obj] = {}
        self._latest: dict[str, Obj] = {}
        self._in_flight: dict[str, tuple[Obj, int]] = {}  # claim uid -> (claim, sharers)
        self._listeners: list[ClaimListener] = []
        # pod uid -> claim keys whose (latest) status.reservedFor names that pod.
        self._reserved: dict[str, set[str]] = {}
        # Devices of the latest versions' allocations, counted per claim holding them.
        self._dedicated: Counter[DeviceID] = Counter()
        self._shared: Counter[SharedDeviceID] = Counter()
        # Bumped on every change, so caches derived from the claims can tell staleness.
        self.generation = 0
        # Every pool whose taken devices may have changed, one entry per change: a
        # claim naming one of its devices in its allocation stored, replaced or
        # removed, or such an allocation put in flight or withdrawn. A cache of what
        # one node can allocate reads the changes since it last looked
        # (`pool_changes_since`; DynamicResources' allocation memo). Only the latest
        # POOL_CHANGE_LOG are kept: a reader further behind starts afresh.
        self._pool_changes: deque[tuple[str, str]] = deque(maxlen=POOL_CHANGE_LOG)
        self.pool_changes_total = 0
        # Devices and shares of the allocations in flight, counted per allocation.
        self._in_flight_dedicated: Counter[DeviceID] = Counter()
        self._in_flight_shared: Counter[SharedDeviceID] = Counter()

    # -- reading --------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._latest)

    def __contains__(self, key: str) -> bool:
        return key in self._latest

    def get(self, key: str) -> Obj | None:
        """The assumed version when there is one, else the API server's."""
        return self._latest.get(key)

    def api_object(self, key: str) -> Obj | None:
        return self._api.get(key)

    def values(self) -> Iterator[Obj]:
        """Every claim, assumed versions in place of the API server's."""
        return iter(list(self._latest.values()))

    def is_assumed(self, key: str) -> bool:
        latest = self._latest.get(key)
        return latest is not None and latest is not self._api.get(key)

    def reserved_for_pod(self, pod_uid: str) -> frozenset[str]:
        """Keys of the claims whose status.reservedFor names the pod (by uid)."""
        return frozenset(self._reserved.get(pod_uid, ()))

    def allocated_device_ids(self, *, consumable_capacity: bool = True) -> set[DeviceID]:
        """Devices no other claim may take: those of every allocated claim and of every
        allocation in flight (upstream's ListAllAllocatedDevices / GatherAllocatedState's
        AllocatedDevices). With consumable capacity off, a share takes its whole device."""
        ids = {d for d, n in self._dedicated.items() if n > 0}
        if not consumable_capacity:
            ids.update(s[:3] for s, n in self._shared.items() if n > 0)
        for claim, _ in self._in_flight.values():
            dedicated, shared = allocated_devices(claim)
            ids.update(dedicated)
            if not consumable_capacity:
                ids.update(s[:3] for s in shared)
        return ids

    def pool_changes_since(self, seen: int) -> list[tuple[str, str]] | None:
        """The (driver, pool) of every change after the first `seen` of
        `pool_changes_total`, oldest first; None when some are no longer kept."""
        missed = self.pool_changes_total - seen
        if missed < 0 or missed > len(self._pool_changes):
            return None
        if missed == 0:
            return []
        # From the newest end: a deque is walked from an end, and the log is long.
        newest_first = list(itertools.islice(reversed(self._pool_changes), missed))
        newest_first.reverse()
        return newest_first

    def has_shares(self) -> bool:
        """Whether any allocated claim or allocation in flight takes a share of a
        device (a result with a shareID)."""
        return bool(self._shared) or bool(self._in_flight_shared)

    def taken_devices(self) -> TakenDevices:
        """The devices taken whole by allocated claims and allocations in flight, as
        a live view (see TakenDevices); `allocated_device_ids` as a set."""
        return TakenDevices(self._dedicated, self._in_flight_dedicated)

    def allocated_shares(self) -> set[SharedDeviceID]:
        """Shares of devices with consumable capacity taken by allocated claims and
        allocations in flight (AllocatedSharedDeviceIDs)."""
        shares = {s for s, n in self._shared.items() if n > 0}
        for claim, _ in self._in_flight.values():
            shares.update(allocated_devices(claim)[1])
        return shares

    # -- listeners ------------------------------------------------------------------------

    def subscribe(self, listener: ClaimListener) -> None:
        """Call `listener(old, new)` after every change the scheduler sees."""
        self._listeners.append(listener)

    def _changed(self, key: str, old: Obj | None, new: Obj | None) -> None:
        self.generation += 1
        if old is not None:
            self._touch_pools(old)
            self._unindex(key, old)
            if old is not self._api.get(key):
                self._memo.forget(old)
        if new is not None:
            self._touch_pools(new)
            self._index(key, new)
        for listener in self._listeners:
            listener(old, new)

    def _touch_pools(self, claim: Obj) -> None:
        """Log a change of every pool the claim's allocation names a device of,
        admin access included: a superset of the pools whose taken devices change."""
        for result in allocation_results(claim):
            self._pool_changes.append((_str(result.get("driver")), _str(result.get("pool"))))
            self.pool_changes_total += 1

    def _index(self, key: str, claim: Obj) -> None:
        for consumer in reserved_for(claim):
            if consumer.is_pod and consumer.uid:
                self._reserved.setdefault(consumer.uid, set()).add(key)
        dedicated, shared = allocated_devices(claim)
        self._dedicated.update(dedicated)
        self._shared.update(shared)

    def _unindex(self, key: str, claim: Obj) -> None:
        for consumer in reserved_for(claim):
            keys = self._reserved.get(consumer.uid)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._reserved[consumer.uid]
        dedicated, shared = allocated_devices(claim)
        _subtract(self._dedicated, dedicated)
        _subtract(self._shared, shared)

    # -- the informer ---------------------------------------------------------------------

    def upsert(self, obj: Obj) -> bool:
        """The informer (or a snapshot) shows `obj`; False when it is not newer than
        the version the scheduler sees, which then stays (upstream's assume cache)."""
        key = dra_key(RESOURCE_CLAIM, obj)
        old = self._latest.get(key)
        if old is not None:
            new_rv, stored_rv = resource_version(obj), resource_version(old)
            if new_rv >= 0 and stored_rv >= 0 and new_rv <= stored_rv:
                return False
        previous_api = self._api.get(key)
        self._api[key] = obj
        self._latest[key] = obj
        if previous_api is not None and previous_api is not old:
            self._memo.forget(previous_api)
        self._changed(key, old, obj)
        return True

    def delete(self, key: str) -> None:
        api = self._api.pop(key, None)
        old = self._latest.pop(key, None)
        if api is not None:
            self._memo.forget(api)
        if old is not None:
            self._changed(key, old, None)

    # -- the scheduler's own writes -------------------------------------------------------

    def assume(self, obj: Obj) -> None:
        """Take `obj` (a claim the scheduler wrote) as the claim's version until the
        API server shows a newer one. Raises `StaleObjectError` when the claim is not
        known or `obj` is older than the version stored (upstream's texts)."""
        key = dra_key(RESOURCE_CLAIM, obj)
        current = self._latest.get(key)
        if current is None:
            raise StaleObjectError(f'could not find ResourceClaim "{key}"')
        new_rv, stored_rv = resource_version(obj), resource_version(current)
        if new_rv < stored_rv:
            raise StaleObjectError(f'ResourceClaim "{key}" is out of sync (stored: '
                                   f"{stored_rv}, assume: {new_rv})")
        self._latest[key] = obj
        self._changed(key, current, obj)

    def restore(self, key: str) -> None:
        """Drop the assumption on `key`: the API server's version counts again."""
        current, api = self._latest.get(key), self._api.get(key)
        if current is None or api is None or current is api:
            return
        self._latest[key] = api
        self._changed(key, current, api)

    # -- allocations in flight ------------------------------------------------------------

    def signal_pending_allocation(self, uid: str, allocated: Obj) -> None:
        """Reserve decided `allocated` (the claim with its status.allocation) for a pod;
        a second pod sharing the claim while it is in flight adds a share."""
        entry = self._in_flight.get(uid)
        self._in_flight[uid] = (allocated, 1) if entry is None else (entry[0], entry[1] + 1)
        if entry is None:
            self._touch_pools(allocated)
            dedicated, shared = allocated_devices(allocated)
            self._in_flight_dedicated.update(dedicated)
            self._in_flight_shared.update(shared)
        self.generation += 1

    def pending_allocation(self, uid: str) -> Obj | None:
        """The in-flight claim (with its allocation) of that uid, if any."""
        entry = self._in_flight.get(uid)
        return entry[0] if entry is not None else None

    def remove_pending_allocation(self, uid: str, *, force: bool = False) -> bool:
        """One sharer fewer (all of them with `force`); True when the allocation is no
        longer in flight because of this call."""
        entry = self._in_flight.get(uid)
        if entry is None:
            return False
        if force or entry[1] <= 1:
            del self._in_flight[uid]
            self._touch_pools(entry[0])
            dedicated, shared = allocated_devices(entry[0])
            _subtract(self._in_flight_dedicated, dedicated)
            _subtract(self._in_flight_shared, shared)
            self.generation += 1
            return True
        self._in_flight[uid] = (entry[0], entry[1] - 1)
        return False

    def pending_allocations(self) -> Iterator[Obj]:
        return iter([claim for claim, _ in self._in_flight.values()])


def _subtract(counts: Counter[K], items: list[K]) -> None:
    """One fewer of each item; an item at zero leaves the counter (so that
    membership means: held at least once)."""
    counts.subtract(items)
    for item in items:
        if counts[item] <= 0:
            del counts[item]


class TakenDevices(AbstractSet[DeviceID]):
    """Devices taken whole, read live from the claim tracker's counts: membership
    costs a lookup, not a set built from every claim per cycle. It follows every
    change, so a reader must not hold it across one (the scheduler reads it within
    a cycle, under the lock every change is made under)."""

    __slots__ = ("_allocated", "_in_flight")

    def __init__(self, allocated: Counter[DeviceID], in_flight: Counter[DeviceID]) -> None:
        self._allocated = allocated
        self._in_flight = in_flight

    def __contains__(self, device: object) -> bool:
        return device in self._allocated or device in self._in_flight

    def __iter__(self) -> Iterator[DeviceID]:
        return iter(set(self._allocated) | set(self._in_flight))

    def __len__(self) -> int:
        return len(set(self._allocated) | set(self._in_flight))


# -- slices ------------------------------------------------------------------------------

class SliceIndex:
    """ResourceSlices by name, and by what the allocator looks them up by: the node
    they are local to, and their (driver, pool)."""

    def __init__(self, memo: DecodeMemo) -> None:
        self._memo = memo
        self._slices: dict[str, Obj] = {}
        self._by_node: dict[str, set[str]] = {}  # "" holds the node-independent ones
        self._by_pool: dict[tuple[str, str], set[str]] = {}
        self.generation = 0

    def __len__(self) -> int:
        return len(self._slices)

    def __contains__(self, name: str) -> bool:
        return name in self._slices

    def get(self, name: str) -> Obj | None:
        return self._slices.get(name)

    def values(self) -> Iterator[Obj]:
        return iter(list(self._slices.values()))

    def on_node(self, node_name: str) -> list[Obj]:
        """Slices whose spec.nodeName is `node_name`, by name."""
        return [self._slices[n] for n in sorted(self._by_node.get(node_name, ()))]

    def node_independent(self) -> list[Obj]:
        """Slices without spec.nodeName (nodeSelector, allNodes, per-device node
        selection): each pod's cycle checks them against every node."""
        return self.on_node("")

    def in_pool(self, driver: str, pool: str) -> list[Obj]:
        """Every slice of one pool (all its generations), by name."""
        return [self._slices[n] for n in sorted(self._by_pool.get((driver, pool), ()))]

    def pools(self) -> list[tuple[str, str]]:
        return sorted(self._by_pool)

    def upsert(self, obj: Obj) -> Obj | None:
        """Store `obj`; returns the version it replaced."""
        name = dra_key(RESOURCE_SLICE, obj)
        old = self._remove(name)
        self._slices[name] = obj
        self._by_node.setdefault(slice_node_name(obj), set()).add(name)
        self._by_pool.setdefault(slice_pool(obj), set()).add(name)
        self.generation += 1
        return old

    def delete(self, name: str) -> Obj | None:
        old = self._remove(name)
        if old is not None:
            self.generation += 1
        return old

    def _remove(self, name: str) -> Obj | None:
        old = self._slices.pop(name, None)
        if old is None:
            return None
        self._memo.forget(old)
        _discard(self._by_node, slice_node_name(old), name)
        _discard(self._by_pool, slice_pool(old), name)
        return old



def _discard(index: dict[K, set[str]], value: K, name: str) -> None:
    """Take `name` out of `index[value]`, and the entry once it is empty."""
    names = index.get(value)
    if names is not None:
        names.discard(name)
        if not names:
            del index[value]


# -- device classes ----------------------------------------------------------------------

class DeviceClasses:
    """DeviceClasses by name, and which class serves each extended resource name
    (DRA-backed extended resources), kept as upstream's extendedresourcecache keeps
    it, change by change: of two classes naming one extended resource, the one
    created last wins (the smaller name when created together); every class serves
    `deviceclass.resource.kubernetes.io/<its name>`."""

    def __init__(self, memo: DecodeMemo) -> None:
        self._memo = memo
        self._classes: dict[str, Obj] = {}
        self._by_resource: dict[str, Obj] = {}
        self.generation = 0

    def __len__(self) -> int:
        return len(self._classes)

    def __contains__(self, name: str) -> bool:
        return name in self._classes

    def get(self, name: str) -> Obj | None:
        return self._classes.get(name)

    def values(self) -> Iterator[Obj]:
        return iter(list(self._classes.values()))

    def for_extended_resource(self, resource_name: str) -> Obj | None:
        """The class that serves an extended resource name, or None."""
        return self._by_resource.get(resource_name)

    def extended_resource_of(self, class_name: str) -> str:
        """The class's spec.extendedResourceName ("" when it names none)."""
        cls = self._classes.get(class_name)
        return _extended_resource_name(cls) if cls is not None else ""

    def upsert(self, obj: Obj) -> Obj | None:
        name = dra_key(DEVICE_CLASS, obj)
        old = self._classes.get(name)
        if old is not None:
            self._memo.forget(old)
        self._classes[name] = obj
        self._map_resources(obj, old)
        self.generation += 1
        return old

    def delete(self, name: str) -> Obj | None:
        old = self._classes.pop(name, None)
        if old is None:
            return None
        self._memo.forget(old)
        # As upstream: both names go, even if another class had won the explicit one.
        self._by_resource.pop(DEVICE_CLASS_RESOURCE_PREFIX + name, None)
        if explicit := _extended_resource_name(old):
            self._by_resource.pop(explicit, None)
        self.generation += 1
        return old

    def _map_resources(self, new: Obj, old: Obj | None) -> None:
        explicit = _extended_resource_name(new)
        holder = self._by_resource.get(explicit) if explicit else None
        if holder is not None:
            # A class created before the holder (or at the same time with a name not
            # smaller) leaves every mapping as it is, its own default one included:
            # upstream returns before touching any.
            new_t, holder_t = _creation_time(new), _creation_time(holder)
            if new_t < holder_t or (new_t == holder_t and dra_key(DEVICE_CLASS, new)
                                    >= dra_key(DEVICE_CLASS, holder)):
                return
        if old is not None:
            self._by_resource.pop(DEVICE_CLASS_RESOURCE_PREFIX + dra_key(DEVICE_CLASS, old),
                                  None)
            if old_explicit := _extended_resource_name(old):
                self._by_resource.pop(old_explicit, None)
        if explicit:
            self._by_resource[explicit] = new
        self._by_resource[DEVICE_CLASS_RESOURCE_PREFIX + dra_key(DEVICE_CLASS, new)] = new


def _extended_resource_name(cls: Obj) -> str:
    return _str(_dict(cls.get("spec")).get("extendedResourceName"))


# -- all of them -------------------------------------------------------------------------

class DraObjects:
    """DeviceClasses, ResourceSlices and ResourceClaims (`ClaimCache`), each by
    `dra_key`, with one decode memo."""

    def __init__(self) -> None:
        self._memo = DecodeMemo()
        self.classes = DeviceClasses(self._memo)
        self.slices = SliceIndex(self._memo)
        self.claims = ClaimCache(self._memo)

    @property
    def generation(self) -> int:
        """Changes with every change of any kind held here."""
        return self.classes.generation + self.slices.generation + self.claims.generation

    def decoded(self, obj: Obj, what: str, decode: Callable[[Obj], T]) -> T:
        """`decode(obj)`, computed once per stored object and `what`."""
        return self._memo.get(obj, what, decode)

    def get(self, kind: str, key: str) -> Obj | None:
        """The stored object (a claim's assumed version) of a kind by `dra_key`."""
        if kind == DEVICE_CLASS:
            return self.classes.get(key)
        if kind == RESOURCE_SLICE:
            return self.slices.get(key)
        return self.claims.get(key)

    def upsert(self, kind: str, obj: Obj) -> None:
        """Store `obj` (a claim only when newer than the version the cache has)."""
        if kind == DEVICE_CLASS:
            self.classes.upsert(obj)
        elif kind == RESOURCE_SLICE:
            self.slices.upsert(obj)
        elif kind == RESOURCE_CLAIM:
            self.claims.upsert(obj)
        else:
            raise ValueError(f"not a DRA kind: {kind!r}")

    def delete(self, kind: str, key: str) -> None:
        if kind == DEVICE_CLASS:
            self.classes.delete(key)
        elif kind == RESOURCE_SLICE:
            self.slices.delete(key)
        elif kind == RESOURCE_CLAIM:
            self.claims.delete(key)
        else:
            raise ValueError(f"not a DRA kind: {kind!r}")
