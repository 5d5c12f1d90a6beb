"""Load cluster snapshots and pod files: what `kubectl get nodes,pods -A -o yaml|json`
prints, or a multi-document YAML of Nodes and Pods (plus optional Namespaces, Services,
ReplicaSets, StatefulSets and ReplicationControllers for affinity and default spread,
and PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes, CSIDrivers,
CSIStorageCapacities and VolumeAttachments for the volume plugins, DeviceClasses,
ResourceSlices and ResourceClaims for DynamicResources, and PodDisruptionBudgets and
PriorityClasses for preemption).

Objects of other kinds (what `kubectl get all -A -o yaml` adds: Deployments, DaemonSets,
Jobs, Endpoints..., and ResourceClaimTemplates, which the scheduler never reads: the
claims made from them it does) are skipped and counted, for one note (`Snapshot.notes`);
`strict` refuses them instead. A kind one letter from a read one (`Nodes`, `pod`) is a
typo, refused either way. Every object read has its metadata checked as the API server
would (model.objectmeta).

Every error names the file, the object and the field; nothing half-loads.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from policyd.errors import InputFileError, InvalidObjectError
from policyd.features import DEFAULTS, FeatureGates
from policyd.model.cluster import ClusterState
from policyd.model.datafile import iter_objects
from policyd.model.disruption import DISRUPTION_KINDS, disruption_key
from policyd.model.dra_objects import DRA_KINDS, dra_key
from policyd.model.fieldcheck import check_fields
from policyd.model.file_kinds import SNAPSHOT, wrong_file
from policyd.model.k8snames import printable
from policyd.model.objectmeta import check_metadata
from policyd.model.pod_groups import GroupKey, PodGroup, pod_group_from_dict
from policyd.model.records import Node, Pod, node_from_dict, pod_from_dict
from policyd.model.storage import STORAGE_KINDS, object_key

WORKLOAD_KINDS = ("Service", "ReplicaSet", "StatefulSet", "ReplicationController")
READ_KINDS = ("Node", "Pod", "Namespace", *WORKLOAD_KINDS, *STORAGE_KINDS, *DRA_KINDS,
              *DISRUPTION_KINDS, "PodGroup")
_READ_KINDS_FOLDED = {k.lower(): k for k in READ_KINDS}


@dataclass
class Snapshot:
    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    workloads: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # Storage objects by kind, then by `object_key`, raw (see model.storage).
    storage: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    # DeviceClasses, ResourceSlices and ResourceClaims by kind, then by `dra_key`, raw
    # (see model.dra_objects).
    dra: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    # PodDisruptionBudgets and PriorityClasses by kind, then by key, raw (model.disruption).
    disruption: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    # PodGroups of either API (model.pod_groups), by key.
    pod_groups: dict[GroupKey, PodGroup] = field(default_factory=dict)
    # Unknown fields found with field_validation="warn" (see model.fieldcheck).
    warnings: list[str] = field(default_factory=list)
    # Objects of kinds the scheduler does not read, left out: count per kind.
    skipped: Counter[str] = field(default_factory=Counter)

    @property
    def notes(self) -> list[str]:
        """One line saying which objects were skipped, if any were."""
        if not self.skipped:
            return []
        counts = ", ".join(f"{n} {printable(kind)}" for kind, n in sorted(
            self.skipped.items(), key=lambda item: (-item[1], item[0])))
        return [f"skipped {counts} object(s): kinds the scheduler does not read "
                "(--strict refuses them)"]

    def cluster(self, features: FeatureGates = DEFAULTS) -> ClusterState:
        """Cluster state with every bound pod counted on its node; pending pods kept;
        `features`: the profile's gates (how a resizing pod counts)."""
        state = ClusterState(self.nodes, self.pods, features=features)
        state.namespace_labels = dict(self.namespaces)
        state.workloads = {k: list(v) for k, v in self.workloads.items()}
        for kind, objects in self.storage.items():
            for obj in objects.values():
                state.storage.upsert(kind, obj)
        for kind, objects in self.dra.items():
            for obj in objects.values():
                state.dra.upsert(kind, obj)
        for kind, objects in self.disruption.items():
            for obj in objects.values():
                state.disruption_budgets.upsert(kind, obj)
        for group in self.pod_groups.values():
            state.pod_groups.upsert(group)
        return state

    def extend(self, other: Snapshot) -> None:
        self.nodes.extend(other.nodes)
        self.pods.extend(other.pods)
        self.namespaces.update(other.namespaces)
        self.warnings.extend(other.warnings)
        self.skipped.update(other.skipped)
        for k, v in other.workloads.items():
            self.workloads.setdefault(k, []).extend(v)
        for k, objects in other.storage.items():
            self.storage.setdefault(k, {}).update(objects)
        for k, objects in other.dra.items():
            self.dra.setdefault(k, {}).update(objects)
        for k, objects in other.disruption.items():
            self.disruption.setdefault(k, {}).update(objects)
        self.pod_groups.update(other.pod_groups)


def load_snapshot(*paths: Path, pods_only: bool = False, field_validation: str = "strict",
                  strict: bool = False) -> Snapshot:
    """Decode every object of the files into a Snapshot; raises on the first bad one.
    `field_validation` is kubectl's --validate: strict, warn or ignore (fieldcheck).
    Objects of kinds the scheduler does not read are counted in `skipped`, or with
    `strict` refused; a pod file (`pods_only`) holds only Pods."""
    snap = Snapshot()
    for path in paths:
        for where, obj in iter_objects(path):
            if (other := wrong_file(obj, str(path), SNAPSHOT)) is not None:
                raise InputFileError(other)  # a profile, a policy or a PolicyTest
            _add(snap, obj, where, pods_only, field_validation, strict)
    return snap


def snapshot_from_objects(objects: Iterable[Any], where: str,
                          field_validation: str = "strict") -> Snapshot:
    """A Snapshot of objects already in memory (a live cluster's lists), decoded exactly
    as a file's: the same checks, the same errors, each naming `where` and the object
    (`https://10.0.0.1:6443: Pod shop/web-0`). But metadata: the API server has judged
    it, by its own version's rules (a newer one may have relaxed a name rule)."""
    snap = Snapshot()
    for obj in objects:
        _add(snap, obj, f"{where}: {_object_name(obj)}", False, field_validation,
             server_checked=True)
    return snap


def _object_name(obj: Any) -> str:
    """`Kind namespace/name` (or `Kind name`) for an error's place; what is there."""
    if not isinstance(obj, dict):
        return "object"
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    name = meta.get("name") if isinstance(meta.get("name"), str) else "?"
    ns = meta.get("namespace")
    return f"{obj.get('kind') or 'object'} {f'{ns}/' if isinstance(ns, str) else ''}{name}"


def _add(snap: Snapshot, obj: Any, where: str, pods_only: bool,
         field_validation: str = "strict", strict: bool = False,
         server_checked: bool = False) -> None:
    kind = obj.get("kind") if isinstance(obj, dict) else None
    if not pods_only and not strict and _not_read(kind):
        snap.skipped[str(kind)] += 1
        return
    snap.warnings += check_fields(kind, obj, where, field_validation)
    try:
        if not server_checked and kind in READ_KINDS and not (pods_only and kind != "Pod"):
            check_metadata(kind, obj)
        if kind == "Pod":
            snap.pods.append(pod_from_dict(obj))
        elif kind == "Node" and not pods_only:
            snap.nodes.append(node_from_dict(obj))
        elif kind == "Namespace" and not pods_only:
            meta = obj.get("metadata") or {}
            labels = meta.get("labels") or {}
            if not isinstance(meta.get("name"), str) or not isinstance(labels, dict):
                raise InputFileError("Namespace needs metadata.name and string labels",
                                     where=where)
            if meta["name"] in snap.namespaces:
                raise InputFileError(f"Namespace {meta['name']} is defined twice (a cluster "
                                     "has one Namespace per name)", where=where)
            # check_metadata has seen that every label is a string.
            snap.namespaces[meta["name"]] = dict(labels)
        elif kind in WORKLOAD_KINDS and not pods_only:
            snap.workloads.setdefault(kind, []).append(obj)
        elif kind in STORAGE_KINDS and not pods_only:
            _add_named_object(snap.storage, kind, obj, where, object_key)
        elif kind in DRA_KINDS and not pods_only:
            _add_named_object(snap.dra, kind, obj, where, dra_key)
        elif kind in DISRUPTION_KINDS and not pods_only:
            _add_named_object(snap.disruption, kind, obj, where, disruption_key)
        elif kind == "PodGroup" and not pods_only:
            group = pod_group_from_dict(obj)
            if group.key in snap.pod_groups:
                raise InputFileError(f"PodGroup {group.key} ({group.key.api}) is defined "
                                     "twice (a cluster has one per name)", where=where)
            snap.pod_groups[group.key] = group
        else:
            raise InputFileError(_unexpected_kind(kind, pods_only, strict), where=where)
    except InvalidObjectError as exc:
        raise InputFileError(str(exc), where=where) from None


@lru_cache(maxsize=256)  # asked once per object of a skipped kind
def _near_miss(kind: str) -> str | None:
    """The read kind `kind` is a typo of (`Nodes`, `pod`, `StatefullSet`), if any."""
    close = difflib.get_close_matches(kind.lower(), list(_READ_KINDS_FOLDED), n=1,
                                      cutoff=0.8)
    return _READ_KINDS_FOLDED[close[0]] if close else None


def _not_read(kind: Any) -> bool:
    """A kind the scheduler does not read, skipped: a name that is neither one it
    reads nor a typo of one (those are refused)."""
    return isinstance(kind, str) and bool(kind) and kind not in READ_KINDS \
        and _near_miss(kind) is None


def _unexpected_kind(kind: Any, pods_only: bool, strict: bool) -> str:
    shown = printable(repr(kind))
    if pods_only:
        return f"unexpected kind {shown}, expected Pod (a pod file holds only Pods)"
    near = _near_miss(kind) if isinstance(kind, str) and kind else None
    if near is not None:
        return f"unexpected kind {shown} (did you mean {near!r}?)"
    why = ("--strict refuses kinds the scheduler does not read; " if strict
           and isinstance(kind, str) and kind else "")
    return f"unexpected kind {shown}: {why}expected {', '.join(READ_KINDS)}"


def _add_named_object(into: dict[str, dict[str, dict[str, Any]]], kind: str,
                      obj: dict[str, Any], where: str,
                      key_of: Callable[[str, dict[str, Any]], str]) -> None:
    """Keep a storage, DRA or disruption object once it has a name, once per `key_of` key.
    Its fields are its readers' to judge, per object: a PV with a bad node affinity
    fails the pods that need it, a budget with a bad selector protects nothing; neither
    fails the whole load."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) \
            or not meta["name"]:
        raise InputFileError(f"{kind} needs metadata.name", where=where)
    key = key_of(kind, obj)
    objects = into.setdefault(kind, {})
    if key in objects:
        raise InputFileError(f"{kind} {key} is defined twice (a cluster has one per name)",
                             where=where)
    objects[key] = obj
