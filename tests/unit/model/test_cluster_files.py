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
    ("kind: Nodes\nmetadata: {name: d}\n", "unexpected kind 'Nodes' (did you mean 'Node'?)"),
    ("kind: pod\nmetadata: {name: d}\n", "unexpected kind 'pod' (did you mean 'Pod'?)"),
    ("metadata: {name: d}\n", "unexpected kind None"),
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


# -- kinds the scheduler does not read, names and labels the API server refuses ----------

GET_ALL = Path(__file__).parent / "fixtures" / "kubectl_get_all.yaml"
GET_ALL_NOTE = ("skipped 2 Deployment, 2 Job, 1 CronJob, 1 DaemonSet, 1 Endpoints, "
                "1 HorizontalPodAutoscaler object(s): kinds the scheduler "
                "does not read (--strict refuses them)")


def test_kubectl_get_all_loads_what_the_scheduler_reads_and_counts_the_rest() -> None:
    snap = load_snapshot(GET_ALL)
    assert [n.name for n in snap.nodes] == ["worker-1"]
    assert [p.key for p in snap.pods] == ["shop/web-7d4f9c-abcde", "shop/web-pending"]
    assert sorted(snap.workloads) == ["ReplicaSet", "Service", "StatefulSet"]
    assert snap.skipped == {"Deployment": 2, "Job": 2, "CronJob": 1, "DaemonSet": 1,
                            "Endpoints": 1, "HorizontalPodAutoscaler": 1}
    # DynamicResources reads claims: kept, not skipped.
    assert list(snap.dra["ResourceClaim"]) == ["shop/gpu"]
    assert snap.notes == [GET_ALL_NOTE]
    assert snap.warnings == []
    assert [p.name for p in snap.cluster().pending_pods()] == ["web-pending"]


def test_strict_refuses_the_first_kind_the_scheduler_does_not_read() -> None:
    with pytest.raises(InputFileError) as e:
        load_snapshot(GET_ALL, strict=True)
    assert str(e.value).startswith(
        f"{GET_ALL} (document 1) items[4]: unexpected kind 'DaemonSet': --strict refuses "
        "kinds the scheduler does not read; expected Node, Pod, Namespace, Service")


def test_skipped_kinds_are_counted_across_files_in_one_note(tmp_path: Path) -> None:
    a = tmp_path / "a.yaml"
    a.write_text("kind: ConfigMap\nmetadata: {name: c}\n---\nkind: Secret\n"
                 "metadata: {name: s}\n")
    b = tmp_path / "b.yaml"
    b.write_text("kind: ConfigMap\nmetadata: {name: d}\n---\nkind: \"Evil\\e[2J\"\n")
    snap = load_snapshot(a, b)
    assert snap.notes == ["skipped 2 ConfigMap, 1 Evil\\x1b[2J, 1 Secret object(s): kinds "
                          "the scheduler does not read (--strict refuses them)"]
    other = load_snapshot(a)
    other.extend(load_snapshot(b))
    assert other.notes == snap.notes
    assert "ResourceClaim" not in load_snapshot(GET_ALL).skipped


@pytest.mark.parametrize(("kind", "message"), [
    ("Nodes", "unexpected kind 'Nodes' (did you mean 'Node'?)"),
    ("node", "unexpected kind 'node' (did you mean 'Node'?)"),
    ("StatefullSet", "unexpected kind 'StatefullSet' (did you mean 'StatefulSet'?)"),
    ("PersistentVolumes", "(did you mean 'PersistentVolume'?)"),
    ("", "unexpected kind '': expected Node, Pod"),
    ("[1]", "unexpected kind [1]: expected Node, Pod"),
])
def test_a_typo_of_a_read_kind_is_refused_not_skipped(tmp_path: Path, kind: str,
                                                      message: str) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text(f"kind: {kind or repr(kind)}\nmetadata: {{name: n1}}\n")
    with pytest.raises(InputFileError) as e:
        load_snapshot(path)
    assert message in str(e.value)


def test_a_pod_file_holds_only_pods(tmp_path: Path) -> None:
    path = tmp_path / "pods.yaml"
    path.write_text("kind: Deployment\nmetadata: {name: web}\n")
    with pytest.raises(InputFileError, match="unexpected kind 'Deployment', expected Pod "
                                             r"\(a pod file holds only Pods\)"):
        load_snapshot(path, pods_only=True)


@pytest.mark.parametrize(("document", "message"), [
    ("kind: Namespace\nmetadata: {name: shop, labels: {pci: true}}\n",
     'Namespace shop: metadata.labels.pci: must be a string, not a boolean (quote it: "true")'),
    ("kind: Node\nmetadata: {name: n1, labels: {pci: true}}\n",
     'Node n1: metadata.labels.pci: must be a string, not a boolean (quote it: "true")'),
    ("kind: Pod\nmetadata: {name: p, labels: {tier: 3}}\nspec: {containers: [{name: c}]}\n",
     'Pod default/p: metadata.labels.tier: must be a string, not a number (quote it: "3")'),
    ("kind: PersistentVolume\nmetadata: {name: pv, labels: {fast: false}}\n",
     'PersistentVolume pv: metadata.labels.fast: must be a string, not a boolean'),
    ("kind: Pod\nmetadata: {name: web/0}\nspec: {containers: [{name: c}]}\n",
     "Pod default/web/0: metadata.name: 'web/0': must be a lowercase RFC 1123 subdomain"),
    ("kind: Node\nmetadata: {name: \"n1\\e[31m\"}\n",
     "Node n1\\x1b[31m: metadata.name: 'n1\\x1b[31m': must be a lowercase RFC 1123"),
    ("kind: Node\nmetadata:\n  name: n1\n  labels: {n\u043ede.kubernetes.io/zone: a}\n",
     "Node n1: metadata.labels.n\u043ede.kubernetes.io/zone: key: prefix part must be a "
     "lowercase RFC 1123 subdomain"),
    ("kind: Namespace\nmetadata: {name: Shop}\n", "Namespace Shop: metadata.name: 'Shop'"),
    ("kind: Service\nmetadata: {name: web_svc, namespace: shop}\n",
     "Service shop/web_svc: metadata.name"),
    ("kind: PodDisruptionBudget\nmetadata: {name: pdb, namespace: Shop}\n",
     "PodDisruptionBudget Shop/pdb: metadata.namespace: 'Shop'"),
])
def test_metadata_the_api_server_refuses_is_refused_whatever_validate_says(
        tmp_path: Path, document: str, message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(document)
    for mode in ("strict", "warn", "ignore"):
        with pytest.raises(InputFileError) as e:
            load_snapshot(path, field_validation=mode)
        assert f"{path} (document 1): {message}" in str(e.value)
        assert "\x1b" not in str(e.value)


def test_pod_names_with_a_slash_no_longer_pass_as_two_pods(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("kind: Pod\nmetadata: {name: web/0}\nspec: {containers: [{name: c}]}\n"
                    "---\nkind: Pod\nmetadata: {name: web, namespace: default/web}\n"
                    "spec: {containers: [{name: c}]}\n")
    with pytest.raises(InputFileError, match=r"\(document 1\): Pod default/web/0: "
                                             "metadata.name"):
        load_snapshot(path)
    path.write_text("kind: Pod\nmetadata: {name: web, namespace: default/web}\n"
                    "spec: {containers: [{name: c}]}\n")
    with pytest.raises(InputFileError, match=r"metadata\.namespace: 'default/web'"):
        load_snapshot(path)


def test_a_live_clusters_metadata_is_the_api_servers_to_judge() -> None:
    from policyd.model.cluster_files import snapshot_from_objects

    # A newer API server may accept a name this version's rule refuses (as v1.36 did
    # for Service names starting with a digit): what it stored is taken as it is.
    raw = make_node("n1").raw()
    raw["metadata"]["name"] = "future_rule"
    snap = snapshot_from_objects([raw], "https://10.0.0.1:6443")
    assert [n.name for n in snap.nodes] == ["future_rule"]
    with pytest.raises(InputFileError, match="must be a string"):
        raw["metadata"]["labels"] = {"pci": True}  # not a label map any server returns
        snapshot_from_objects([raw], "https://10.0.0.1:6443")


# -- DRA objects -------------------------------------------------------------------------

DRA_SNAPSHOT = """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec: {extendedResourceName: example.com/gpu}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n1-gpu}
spec:
  driver: gpu.example.com
  nodeName: n1
  pool: {name: n1, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu, namespace: a}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu, namespace: b}
spec: {devices: {requests: []}}
status:
  allocation:
    devices:
      results: [{request: gpu, driver: gpu.example.com, pool: n1, device: gpu-0}]
  reservedFor: [{resource: pods, name: web, uid: u1}]
"""


def test_dra_objects_load_into_the_store(tmp_path: Path) -> None:
    path = tmp_path / "dra.yaml"
    path.write_text(DRA_SNAPSHOT)
    snap = load_snapshot(path)
    assert snap.skipped == {} and snap.notes == []
    dra = snap.cluster().dra
    assert dra.classes.for_extended_resource("example.com/gpu") is not None
    assert [s["metadata"]["name"] for s in dra.slices.on_node("n1")] == ["n1-gpu"]
    assert len(dra.claims) == 2 and dra.claims.reserved_for_pod("u1") == {"b/gpu"}
    assert dra.claims.allocated_device_ids() == {("gpu.example.com", "n1", "gpu-0")}
    # Files add up, as the other kinds do.
    other = tmp_path / "other.yaml"
    other.write_text("apiVersion: resource.k8s.io/v1\nkind: DeviceClass\n"
                     "metadata: {name: nic.example.com}\n")
    both = load_snapshot(path)
    both.extend(load_snapshot(other))
    assert sorted(both.dra["DeviceClass"]) == ["gpu.example.com", "nic.example.com"]
    # pods_only files take none of them.
    with pytest.raises(InputFileError, match="expected Pod"):
        load_snapshot(path, pods_only=True)


@pytest.mark.parametrize(("content", "message"), [
    ("apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: g}\n---\n"
     "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: g}\n",
     "DeviceClass g is defined twice"),
    ("apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {}\nspec: {}\n",
     "ResourceSlice needs metadata.name"),
    ("apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s}\n"
     "spec: {driver: d, nodeNmae: n1}\n", "nodeNmae"),
    ("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n"
     "metadata: {name: Gpu_1, namespace: a}\n", "ResourceClaim a/Gpu_1: metadata.name"),
    ("apiVersion: resource.k8s.io/v1\nkind: ResourceSlices\nmetadata: {name: s}\n",
     "did you mean 'ResourceSlice'?"),
])
def test_bad_dra_objects_are_refused_naming_them(tmp_path: Path, content: str,
                                                 message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(InputFileError) as e:
        load_snapshot(path)
    assert message in str(e.value) and "bad.yaml" in str(e.value)
