from __future__ import annotations

import json
from pathlib import Path

import pytest

from policyd.errors import InputFileError
from policyd.model.cluster_files import load_snapshot
from tests.builders import make_node, make_pod


def test_kubectl_list_json_and_multidoc_yaml(tmp_path: Path) -> None:
    items = [make_node("n1").raw(), make_pod("p1").node("n1").raw(), make_pod("p2").raw()]
    (tmp_path / "list.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                                    "items": items}))
    snap = load_snapshot(tmp_path / "list.json")
    assert [n.name for n in snap.nodes] == ["n1"]
    assert [p.name for p in snap.pods] == ["p1", "p2"]
    from ruamel.yaml import YAML
    with (tmp_path / "multi.yaml").open("w") as f:
        YAML().dump_all(items, f)
    snap = load_snapshot(tmp_path / "multi.yaml")
    state = snap.cluster()
    assert [p.name for p in state.pending_pods()] == ["p2"]


@pytest.mark.parametrize(("content", "message"), [
    ("kind: Node\nmetadata: {name: n1\n", "invalid YAML"),
    ("{not json", "invalid JSON"),
    ("kind: Deployment\nmetadata: {name: d}\n", "unexpected kind 'Deployment'"),
    ("kind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n", "spec.containers"),
    ("- just\n- a list\n", "expected a Kubernetes object"),
])
def test_bad_input_names_file_and_problem(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(InputFileError) as e:
        load_snapshot(path)
    assert message in str(e.value)
    assert str(path) in str(e.value)


def test_binary_and_missing_files(tmp_path: Path) -> None:
    # A NUL byte is looked for first, as in policies (UTF-16 has them): one order for
    # every file kind.
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(InputFileError, match=r"bin:1:3: binary file \(NUL byte\)"):
        load_snapshot(tmp_path / "bin")
    (tmp_path / "latin1").write_bytes(b"kind: caf\xe9\n")
    with pytest.raises(InputFileError, match=r"latin1:1:10: not UTF-8"):
        load_snapshot(tmp_path / "latin1")
    with pytest.raises(InputFileError, match="no such file"):
        load_snapshot(tmp_path / "missing.yaml")


STORAGE_OBJECTS = """\
kind: StorageClass
apiVersion: storage.k8s.io/v1
metadata: {name: local}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
kind: PersistentVolume
apiVersion: v1
metadata: {name: pv-1}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: local
  local: {path: /mnt/disk1}
---
kind: PersistentVolumeClaim
apiVersion: v1
metadata: {name: data-db-0, namespace: shop}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: local
  resources: {requests: {storage: 5Gi}}
---
kind: CSINode
apiVersion: storage.k8s.io/v1
metadata: {name: n1}
spec:
  drivers: [{name: ebs.csi.aws.com, nodeID: i-1, allocatable: {count: 25}}]
---
kind: CSIDriver
apiVersion: storage.k8s.io/v1
metadata: {name: ebs.csi.aws.com}
spec: {storageCapacity: true}
---
kind: CSIStorageCapacity
apiVersion: storage.k8s.io/v1
metadata: {name: cap-1, namespace: kube-system}
storageClassName: local
capacity: 100Gi
"""


def test_storage_objects_load_into_the_cluster_state(tmp_path: Path) -> None:
    path = tmp_path / "storage.yaml"
    path.write_text(STORAGE_OBJECTS)
    storage = load_snapshot(path).cluster().storage
    assert storage.pvs.get("pv-1") is not None
    pvc = storage.pvcs.get("shop/data-db-0")
    assert pvc is not None and pvc["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert set(storage.storage_classes) == {"local"}
    assert set(storage.csi_nodes) == {"n1"}
    assert set(storage.csi_drivers) == {"ebs.csi.aws.com"}
    assert set(storage.capacities) == {"kube-system/cap-1"}


@pytest.mark.parametrize(("content", "message"), [
    ("kind: PersistentVolume\nmetadata: {}\nspec: {}\n", "PersistentVolume needs metadata.name"),
    ("kind: StorageClass\nmetadata: {name: a}\nprovisioner: x\n---\n"
     "kind: StorageClass\nmetadata: {name: a}\nprovisioner: y\n",
     "StorageClass a is defined twice"),
    ("kind: PersistentVolumeClaim\nmetadata: {name: c}\nspec: {storageClasName: x}\n",
     "storageClasName"),
])
def test_bad_storage_objects_name_the_object(tmp_path: Path, content: str,
                                             message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(InputFileError) as e:
        load_snapshot(path)
    assert message in str(e.value)
    assert "bad.yaml" in str(e.value)


def test_claims_in_different_namespaces_are_different_claims(tmp_path: Path) -> None:
    path = tmp_path / "claims.yaml"
    path.write_text("kind: PersistentVolumeClaim\nmetadata: {name: data, namespace: a}\n"
                    "spec: {}\n---\n"
                    "kind: PersistentVolumeClaim\nmetadata: {name: data, namespace: b}\n"
                    "spec: {}\n")
    storage = load_snapshot(path).cluster().storage
    assert len(storage.pvcs) == 2
