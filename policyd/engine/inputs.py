"""What the offline commands schedule on: a snapshot plus pod files, with nothing
counted twice and nothing collapsed without a word.

A cluster holds one Node per name and one Pod per namespace/name (and per uid), so a
snapshot that repeats one is not a cluster: an input error. A pod given in a pod file
that the snapshot also has is the user's newer copy: it replaces the snapshot's, with
a note, and is never placed twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from policyd.errors import InputFileError
from policyd.model.records import Node, Pod


@dataclass(slots=True)
class PodFile:
    """The pods of one file given with --pods (or --pod), in file order."""

    path: str
    pods: list[Pod]


@dataclass(slots=True)
class MergedPods:
    snapshot: list[Pod]  # the snapshot's pods that no pod file replaces
    extra: list[Pod]  # every pod of the pod files
    notes: list[str] = field(default_factory=list)


def check_unique_nodes(nodes: Sequence[Node], where: str) -> None:
    seen: set[str] = set()
    for node in nodes:
        if node.name in seen:
            raise InputFileError(f"Node {node.name} is defined twice (a cluster has one "
                                 "Node per name)", where=where)
        seen.add(node.name)


def check_unique_pods(files: Sequence[PodFile]) -> None:
    """Raise naming both places when two pods (in one file or two) share a
    namespace/name or a metadata.uid."""
    by_key: dict[str, str] = {}
    by_uid: dict[str, tuple[str, str]] = {}
    for f in files:
        for pod in f.pods:
            first = by_key.get(pod.key)
            if first is not None:
                if first == f.path:
                    raise InputFileError(f"Pod {pod.key} is defined twice (a cluster has "
                                         "one Pod per namespace/name)", where=f.path)
                raise InputFileError(f"Pod {pod.key} is in both {first} and {f.path} (a "
                                     "cluster has one Pod per namespace/name)")
            by_key[pod.key] = f.path
            if pod.uid in by_uid:
                other, other_path = by_uid[pod.uid]
                if other_path == f.path:
                    raise InputFileError(f"Pods {other} and {pod.key} have the same "
                                         f"metadata.uid {pod.uid!r}", where=f.path)
                raise InputFileError(f"Pods {other} (in {other_path}) and {pod.key} (in "
                                     f"{f.path}) have the same metadata.uid {pod.uid!r}")
            by_uid[pod.uid] = (pod.key, f.path)


def merge_pods(snapshot: Sequence[Pod], files: Sequence[PodFile]) -> MergedPods:
    """Pod files' pods replace the snapshot's pods with the same namespace/name or uid."""
    extra = [p for f in files for p in f.pods]
    origin = {p.uid: f.path for f in files for p in f.pods}
    keys = {p.key: p for p in extra}
    uids = {p.uid: p for p in extra}
    merged = MergedPods([], extra)
    for pod in snapshot:
        replacement = keys.get(pod.key) or uids.get(pod.uid)
        if replacement is None:
            merged.snapshot.append(pod)
            continue
        was = f", which was bound to node {pod.node_name}" if pod.node_name else ""
        merged.notes.append(f"pod {replacement.key} from {origin[replacement.uid]} replaces "
                            f"the snapshot's copy{was}")
    return merged
