"""The storage objects the volume plugins read, as raw JSON, with an assume cache for
PersistentVolumes and PersistentVolumeClaims.

The same container serves the daemon (fed by informers) and the offline commands (fed
by a snapshot file). Objects stay raw JSON: each plugin decodes the fields it reads
once per object version (`StorageObjects.decoded`), so a snapshot of many claims costs
nothing until a pod asks for one.

PVs and PVCs go through an `AssumeCache`, kube-scheduler's assumecache: VolumeBinding's
Reserve writes the binding it chose (a PV's claimRef, a claim's selected-node
annotation) into the cache at once, so the next pod's cycle does not pick the same PV,
and the informer's version replaces the assumed one only when it is at least as new.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

# Kinds held here, as they appear in snapshot files and `kind:` fields.
PERSISTENT_VOLUME = "PersistentVolume"
PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
STORAGE_CLASS = "StorageClass"
CSI_NODE = "CSINode"
CSI_DRIVER = "CSIDriver"
CSI_STORAGE_CAPACITY = "CSIStorageCapacity"
VOLUME_ATTACHMENT = "VolumeAttachment"
STORAGE_KINDS = (PERSISTENT_VOLUME, PERSISTENT_VOLUME_CLAIM, STORAGE_CLASS, CSI_NODE,
                 CSI_DRIVER, CSI_STORAGE_CAPACITY, VOLUME_ATTACHMENT)
NAMESPACED_KINDS = frozenset({PERSISTENT_VOLUME_CLAIM, CSI_STORAGE_CAPACITY})


def object_key(kind: str, obj: dict[str, Any]) -> str:
    """`namespace/name` for namespaced kinds, `name` for cluster-scoped ones."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    if kind in NAMESPACED_KINDS:
        return f"{meta.get('namespace') or 'default'}/{name}"
    return name


def resource_version(obj: dict[str, Any]) -> int:
    """The object's resourceVersion as a number; -1 when absent or not a number (a
    snapshot file), so any version the API server shows replaces it."""
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    return int(rv) if isinstance(rv, str) and rv.isdigit() else -1


class DecodeMemo:
    """What plugins decoded from stored objects, per object (by identity: a raw object
    is never modified in place, a new version is a new dict). Entries go when the
    object leaves the cache. Kept beside the objects, never inside them: a raw object
    may be copied, modified and written back to the API server."""

    def __init__(self) -> None:
        self._memo: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}

    def get(self, obj: dict[str, Any], what: str, decode: Callable[[dict[str, Any]], T]
            ) -> T:
        entry = self._memo.get(id(obj))
        if entry is None or entry[0] is not obj:
            entry = self._memo[id(obj)] = (obj, {})
        values = entry[1]
        if what not in values:
            values[what] = decode(obj)
        return values[what]  # type: ignore[no-any-return]

    def forget(self, obj: dict[str, Any] | None) -> None:
        if obj is not None:
            entry = self._memo.get(id(obj))
            if entry is not None and entry[0] is obj:
                del self._memo[id(obj)]


class AssumeCache:
    """Objects of one kind by key: what the API server showed last (`api_object`) and
    what the scheduler assumes it will show (`get`).

    `assume` stores a modified object until the informer delivers a version at least as
    new (the write landed, or someone else's did); `restore` drops the assumption. An
    assumption older than what is stored is refused, as upstream refuses it: the
    object changed since it was read, and the binding must be chosen again."""

    def __init__(self, kind: str, memo: DecodeMemo) -> None:
        self.kind = kind
        self._memo = memo
        self._api: dict[str, dict[str, Any]] = {}
        self._assumed: dict[str, dict[str, Any]] = {}
        # Bumped on every change, so caches derived from the objects can tell staleness.
        self.generation = 0

    def __len__(self) -> int:
        return len(self._api)

    def __contains__(self, key: str) -> bool:
        return key in self._api

    def get(self, key: str) -> dict[str, Any] | None:
        """The assumed version when there is one, else the API server's."""
        return self._assumed.get(key) or self._api.get(key)

    def api_object(self, key: str) -> dict[str, Any] | None:
        return self._api.get(key)

    def values(self) -> Iterator[dict[str, Any]]:
        """Every object, assumed versions in place of the API server's."""
        for key, obj in self._api.items():
            yield self._assumed.get(key, obj)

    def is_assumed(self, key: str) -> bool:
        return key in self._assumed

    def upsert(self, obj: dict[str, Any]) -> None:
        """The informer (or a snapshot) shows `obj`."""
        key = object_key(self.kind, obj)
        assumed = self._assumed.get(key)
        if assumed is not None and resource_version(obj) >= resource_version(assumed):
            self._memo.forget(self._assumed.pop(key))
        self._memo.forget(self._api.get(key))
        self._api[key] = obj
        self.generation += 1

    def delete(self, key: str) -> None:
        self._memo.forget(self._api.pop(key, None))
        self._memo.forget(self._assumed.pop(key, None))
        self.generation += 1

    def assume(self, obj: dict[str, Any]) -> None:
        """Take `obj` as the object's version until the API server shows a newer one.
        Raises `StaleObjectError` when the object is unknown or changed since `obj`
        was read (its resourceVersion is older than the one stored)."""
        key = object_key(self.kind, obj)
        current = self.get(key)
        if current is None:
            raise StaleObjectError(f"{self.kind} {key} is not in the cache")
        if resource_version(obj) < resource_version(current):
            raise StaleObjectError(
                f"{self.kind} {key} changed since it was read (resourceVersion "
                f"{resource_version(obj)} < {resource_version(current)})")
        self._memo.forget(self._assumed.get(key))
        self._assumed[key] = obj
        self.generation += 1

    def restore(self, key: str) -> None:
        """Drop the assumption on `key`: the API server's version counts again."""
        assumed = self._assumed.pop(key, None)
        if assumed is not None:
            self._memo.forget(assumed)
            self.generation += 1


class StaleObjectError(Exception):
    """An assumption on an object that changed or went away since it was read."""


class StorageObjects:
    """PersistentVolumes and claims (assume caches), StorageClasses, CSINodes,
    CSIDrivers, CSIStorageCapacities and VolumeAttachments, each by `object_key`."""

    def __init__(self) -> None:
        self._memo = DecodeMemo()
        self.pvs = AssumeCache(PERSISTENT_VOLUME, self._memo)
        self.pvcs = AssumeCache(PERSISTENT_VOLUME_CLAIM, self._memo)
        self.storage_classes: dict[str, dict[str, Any]] = {}
        self.csi_nodes: dict[str, dict[str, Any]] = {}
        self.csi_drivers: dict[str, dict[str, Any]] = {}
        self.capacities: dict[str, dict[str, Any]] = {}
        # Attachments no pod on the node may account for count against its CSI limits.
        self.volume_attachments: dict[str, dict[str, Any]] = {}
        self._plain = {STORAGE_CLASS: self.storage_classes, CSI_NODE: self.csi_nodes,
                       CSI_DRIVER: self.csi_drivers, CSI_STORAGE_CAPACITY: self.capacities,
                       VOLUME_ATTACHMENT: self.volume_attachments}
        self._plain_generation = 0

    @property
    def generation(self) -> int:
        """Changes with every change of any kind held here."""
        return self.pvs.generation + self.pvcs.generation + self._plain_generation

    def decoded(self, obj: dict[str, Any], what: str,
                decode: Callable[[dict[str, Any]], T]) -> T:
        """`decode(obj)`, computed once per stored object and `what`."""
        return self._memo.get(obj, what, decode)

    def upsert(self, kind: str, obj: dict[str, Any]) -> None:
        if kind == PERSISTENT_VOLUME:
            self.pvs.upsert(obj)
        elif kind == PERSISTENT_VOLUME_CLAIM:
            self.pvcs.upsert(obj)
        else:
            plain = self._plain[kind]
            key = object_key(kind, obj)
            self._memo.forget(plain.get(key))
            plain[key] = obj
            self._plain_generation += 1

    def delete(self, kind: str, key: str) -> None:
        if kind == PERSISTENT_VOLUME:
            self.pvs.delete(key)
        elif kind == PERSISTENT_VOLUME_CLAIM:
            self.pvcs.delete(key)
        else:
            old = self._plain[kind].pop(key, None)
            if old is not None:
                self._memo.forget(old)
                self._plain_generation += 1
