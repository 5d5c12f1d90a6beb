"""Which existing PV an unbound claim takes on a node: component-helpers'
FindMatchingVolume, split into the part that does not depend on the node (done once
per claim in PreFilter) and the part that does (per node in Filter).

Upstream walks the claim's class's PVs and, skipping the excluded ones (taken by the
pod's other claims), those bound to another claim, too small, of another volume mode
or attributes class, or being deleted:
- returns at once a PV already bound to this claim (claimRef set: pre-bound) when its
  node affinity matches the node, and no PV at all when it does not;
- otherwise keeps the smallest Available PV whose labels match the claim's selector,
  whose node affinity matches and whose access modes include the claim's.
It walks an informer index in map order, so among equal sizes (and among several PVs
pre-bound to one claim) its pick is arbitrary; policyd takes the first by name.
A PV's node affinity is matched as CheckNodeAffinity matches it (labels only: see
helper/volumes.VolumeNodeAffinity), a malformed part counting as a mismatch (upstream:
CheckNodeAffinity's error does); a PV whose fields do not decode is left out and named in
the candidates' `ignored`, for explain.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from policyd.model.records import Node
from policyd.model.storage import StorageObjects
from policyd.plugins.helper.volumes import (
    VolumeObjectError,
    volume_fits_node,
    volume_node_affinity,
)
from policyd.plugins.volumebinding.objects import (
    ClaimInfo,
    VolumeInfo,
    is_volume_bound_to_claim,
    volume_info,
)


@dataclass(frozen=True, slots=True)
class Candidates:
    """A claim's PVs that pass every check not depending on the node."""

    # PVs whose claimRef already names the claim, by name: the first not excluded
    # decides alone.
    prebound: tuple[dict[str, Any], ...]
    # Available PVs that fit the claim, smallest first (then by name).
    free: tuple[dict[str, Any], ...]
    # "PersistentVolume NAME: what is wrong" for PVs of the class that do not decode.
    ignored: tuple[str, ...] = ()
    # Positions in `free` by a label their node affinity requires (key -> value ->
    # positions, ascending), and the positions of the others: a node need only try
    # the PVs its own labels can match. Local PVs each pin one hostname, so without
    # this every node would walk every PV (quadratic in the cluster's size).
    by_label: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    unindexed: tuple[int, ...] = ()

    def free_for(self, labels: dict[str, str]) -> Iterator[int]:
        """Positions in `free` that may fit a node with `labels`, ascending."""
        if not self.by_label:
            return iter(self.unindexed)
        lists: list[Iterable[int]] = [self.unindexed]
        for key, by_value in self.by_label.items():
            value = labels.get(key)
            if value is not None and value in by_value:
                lists.append(by_value[value])
        return heapq.merge(*lists)


def candidates(storage: StorageObjects, claim: ClaimInfo,
               pvs: Iterable[dict[str, Any]]) -> Candidates:
    """The node-independent half of FindMatchingVolume over `pvs` (the claim's
    class's PVs, assumed versions)."""
    prebound: list[tuple[str, dict[str, Any]]] = []
    free: list[tuple[int, str, dict[str, Any]]] = []
    ignored: list[str] = []
    for pv in pvs:
        try:
            info = volume_info(storage, pv)
        except VolumeObjectError as exc:
            ignored.append(str(exc))
            continue
        bound_here = is_volume_bound_to_claim(info, claim)
        if info.claim_ref is not None and not bound_here:
            continue
        if not _fits_claim(info, claim):
            continue
        if bound_here:
            prebound.append((info.name, pv))
        elif _free_for_claim(info, claim):
            free.append((info.capacity_nanos, info.name, pv))
    prebound.sort(key=lambda t: t[0])
    free.sort(key=lambda t: (t[0], t[1]))
    free_pvs = tuple(pv for _, _, pv in free)
    by_label: dict[str, dict[str, list[int]]] = {}
    unindexed: list[int] = []
    for i, pv in enumerate(free_pvs):
        required = _required_label(storage, pv)
        if required is None:
            unindexed.append(i)
            continue
        key, values = required
        for value in values:
            by_label.setdefault(key, {}).setdefault(value, []).append(i)
    return Candidates(tuple(pv for _, pv in prebound), free_pvs, tuple(sorted(ignored)),
                      by_label, tuple(unindexed))


def _required_label(storage: StorageObjects, pv: dict[str, Any]
                    ) -> tuple[str, frozenset[str]] | None:
    """A label every node the PV's affinity admits has, with its admitted values: the
    first `In` requirement of its only term; None when there is no such requirement
    (or the affinity does not decode: `fits_node` says no to it anyway)."""
    try:
        affinity = volume_node_affinity(storage, pv)
    except VolumeObjectError:
        return None
    # Only the terms that decode can admit a node (the others never match), and
    # matchFields are not among them: a term's label requirements are all it asks.
    if affinity is None or len(affinity.terms) != 1:
        return None
    for req in affinity.terms[0]:
        if req.operator == "In":
            return req.key, req.values
    return None


def _fits_claim(pv: VolumeInfo, claim: ClaimInfo) -> bool:
    """Size, volume mode, attributes class (VolumeAttributesClass is GA and on in
    v1.36: the names must be equal) and not being deleted."""
    return (pv.capacity_nanos >= claim.request_nanos
            and pv.volume_mode == claim.volume_mode
            and pv.attributes_class == claim.attributes_class
            and not pv.deleting)


def _free_for_claim(pv: VolumeInfo, claim: ClaimInfo) -> bool:
    """Available, selected by the claim, of its class, with every access mode it asks."""
    return (pv.available
            and (claim.selector is None or claim.selector.matches(pv.labels))
            and pv.storage_class == claim.storage_class
            and claim.access_modes <= pv.access_modes)


def fits_node(storage: StorageObjects, pv: dict[str, Any], node: Node) -> bool:
    """CheckNodeAffinity, a malformed affinity counting as a mismatch (as upstream)."""
    try:
        return volume_fits_node(storage, pv, node)
    except VolumeObjectError:
        return False


def find_matching_volume(storage: StorageObjects, found: Candidates, node: Node,
                         excluded: set[str]) -> dict[str, Any] | None:
    """The PV the claim takes on `node`, or None; `excluded` are PV names taken by the
    pod's other claims already."""
    for pv in found.prebound:
        if _name(pv) in excluded:
            continue
        return pv if fits_node(storage, pv, node) else None
    free = found.free
    for i in found.free_for(node.labels):
        pv = free[i]
        if _name(pv) not in excluded and fits_node(storage, pv, node):
            return pv
    return None


def _name(pv: dict[str, Any]) -> str:
    return str((pv.get("metadata") or {}).get("name") or "")
