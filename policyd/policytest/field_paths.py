"""Where in a PolicyTest's spec.nodes / spec.pods entry a refused field was written.

The decoders (`records`, `objectmeta`) name a field of the full Kubernetes object
(`metadata.labels.env`, `spec.containers[0].resources.requests.cpu`); a test author
may have written the shorthand (`labels: {env: ...}`, `requests: {cpu: ...}`). This
turns the decoder's field into the JSON path inside the entry, so the problem is
reported at the line:column of what was written, not at the start of the entry.
"""

from __future__ import annotations

import re

from policyd.sourcefile import JsonPath

# Fields whose value is a map keyed by free text (label keys, resource names hold "."
# and "/"): everything after them is one key.
_MAPS = frozenset({"labels", "annotations", "requests", "limits", "allocatable",
                   "capacity", "nodeSelector", "overhead"})
_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
# The shorthand's fields, by the full object's path they become (loading's
# _node_object / _pod_object), longest first.
_SHORTHAND: dict[str, tuple[tuple[JsonPath, JsonPath], ...]] = {
    "node": ((("metadata", "name"), ("name",)),
             (("metadata", "labels"), ("labels",)),
             (("metadata", "annotations"), ("annotations",)),
             (("spec", "taints"), ("taints",)),
             (("spec", "unschedulable"), ("unschedulable",)),
             (("status", "allocatable"), ("allocatable",))),
    "pod": ((("spec", "containers", 0, "resources", "requests"), ("requests",)),
            (("metadata", "name"), ("name",)),
            (("metadata", "namespace"), ("namespace",)),
            (("metadata", "labels"), ("labels",)),
            (("metadata", "annotations"), ("annotations",)),
            (("spec", "nodeName"), ("nodeName",)),
            (("spec", "priority"), ("priority",)),
            (("spec", "nodeSelector"), ("nodeSelector",)),
            (("spec", "tolerations"), ("tolerations",))),
}


def object_path(field: str) -> JsonPath:
    """`spec.containers[0].resources.requests.example.com/gpu` as a JSON path:
    ("spec", "containers", 0, "resources", "requests", "example.com/gpu")."""
    out: list[str | int] = []
    rest = field
    while rest:
        step = _STEP.match(rest)
        if step is None:
            break
        name, index = step.groups()
        out.append(int(index) if index is not None else name)
        rest = rest[step.end():].removeprefix(".")
        if name in _MAPS and rest:
            out.append(rest)
            break
    return tuple(out)


def entry_path(field: str, what: str, shorthand: bool) -> JsonPath:
    """The path, inside a spec.nodes (`what` "node") or spec.pods ("pod") entry, of the
    decoder's `field`; for the shorthand, of the field it was written as, or the entry
    itself () when the shorthand has no such field."""
    full = object_path(field)
    if not shorthand:
        return full
    for prefix, short in _SHORTHAND[what]:
        if full[:len(prefix)] == prefix:
            return (*short, *full[len(prefix):])
    return ()
