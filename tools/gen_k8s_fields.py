"""Generate policyd/data/k8s_fields.json: the field names of every typed object inside
the kinds policyd reads (Pod, Node, Namespace, Service, ReplicaSet, StatefulSet,
ReplicationController, the storage kinds the volume plugins read, the DRA kinds
DynamicResources reads, and the PodDisruptionBudgets and PriorityClasses preemption
reads), from the kubernetes Python client's models.

The API server rejects unknown fields (strict field validation); the offline commands
do the same with this table, without importing the client at run time (it is slow to
import). Run after changing the pinned `kubernetes` version:

    python tools/gen_k8s_fields.py          # rewrite the committed file
    python tools/gen_k8s_fields.py --check  # exit 1 if it is out of date

tests/unit/model/test_fieldcheck.py regenerates the table in memory and requires it
to equal the committed file.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT_KINDS = {
    "Pod": "V1Pod",
    "Node": "V1Node",
    "Namespace": "V1Namespace",
    "Service": "V1Service",
    "ReplicaSet": "V1ReplicaSet",
    "StatefulSet": "V1StatefulSet",
    "ReplicationController": "V1ReplicationController",
    "PersistentVolume": "V1PersistentVolume",
    "PersistentVolumeClaim": "V1PersistentVolumeClaim",
    "StorageClass": "V1StorageClass",
    "CSINode": "V1CSINode",
    "CSIDriver": "V1CSIDriver",
    "CSIStorageCapacity": "V1CSIStorageCapacity",
    "VolumeAttachment": "V1VolumeAttachment",
    # The client names resource.k8s.io's claim apart from the pod's ResourceClaim entry.
    "DeviceClass": "V1DeviceClass",
    "ResourceSlice": "V1ResourceSlice",
    "ResourceClaim": "ResourceV1ResourceClaim",
    "PodDisruptionBudget": "V1PodDisruptionBudget",
    "PriorityClass": "V1PriorityClass",
}
OUTPUT = Path(__file__).resolve().parents[1] / "policyd" / "data" / "k8s_fields.json"

# The client's type notation: List[T], Dict[str, T], or a scalar / model name.
_LIST = re.compile(r"^List\[(.+)\]$")
_DICT = re.compile(r"^Dict\[str, (.+)\]$")
SCALARS = {"str", "int", "float", "bool", "datetime", "date", "object", "bytearray"}


def _model_names(type_str: str) -> list[str]:
    """The model classes a field's type refers to (none for scalars and free maps)."""
    m = _LIST.match(type_str) or _DICT.match(type_str)
    if m:
        return _model_names(m.group(1))
    return [] if type_str in SCALARS else [type_str]


def generate() -> dict[str, Any]:
    """The table: {"kinds": kind -> root type, "types": type -> JSON field -> type}."""
    import kubernetes
    from kubernetes.client import models

    types: dict[str, dict[str, str]] = {}
    todo = list(ROOT_KINDS.values())
    while todo:
        name = todo.pop()
        if name in types:
            continue
        cls = getattr(models, name)
        fields = {cls.attribute_map[attr]: type_str
                  for attr, type_str in cls.openapi_types.items()}
        types[name] = dict(sorted(fields.items()))
        for type_str in fields.values():
            todo.extend(_model_names(type_str))
    return {
        # The major version only: pyproject.toml allows a range of releases of one
        # major version, whose models are the same API, so a patch release does not
        # make the committed table stale on a fresh install.
        "source": f"kubernetes Python client {kubernetes.__version__.split('.')[0]}.x "
                  "(kubernetes.client.models openapi_types / attribute_map)",
        "kinds": dict(ROOT_KINDS),
        "types": dict(sorted(types.items())),
    }


def render(table: dict[str, Any]) -> str:
    return json.dumps(table, indent=1, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    text = render(generate())
    if "--check" in argv:
        if OUTPUT.read_text() != text:
            print(f"{OUTPUT} is out of date: run python tools/gen_k8s_fields.py",
                  file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
