"""Strict field validation: unknown fields anywhere in the kinds policyd reads, named
by JSON path with a suggestion, from a table generated from the kubernetes client."""

from __future__ import annotations

import copy
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from policyd.errors import InputFileError
from policyd.model.cluster_files import WORKLOAD_KINDS, load_snapshot
from policyd.model.datafile import read_documents
from policyd.model.disruption import DISRUPTION_KINDS
from policyd.model.dra_objects import DRA_KINDS
from policyd.model.fieldcheck import check_fields, known_kinds, unknown_fields
from policyd.model.storage import STORAGE_KINDS
from tests.builders import make_node, make_pod
from tests.gen.clusters import gen_cluster

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = Path(__file__).parent / "fixtures" / "kubectl_get.yaml"


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_k8s_fields",
                                                  ROOT / "tools" / "gen_k8s_fields.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_table_equals_one_generated_from_the_installed_client() -> None:
    gen = _generator()
    committed = (ROOT / "policyd" / "data" / "k8s_fields.json").read_text()
    assert json.loads(committed) == gen.generate(), \
        "policyd/data/k8s_fields.json is stale: run python tools/gen_k8s_fields.py"
    assert committed == gen.render(gen.generate())


def test_every_kind_the_snapshot_reads_is_in_the_table() -> None:
    assert set(known_kinds()) == {"Pod", "Node", "Namespace", *WORKLOAD_KINDS,
                                  *STORAGE_KINDS, *DRA_KINDS, *DISRUPTION_KINDS}


def test_checking_does_not_import_the_kubernetes_client() -> None:
    code = ("import sys\nfrom policyd.model.fieldcheck import unknown_fields\n"
            "assert unknown_fields('Pod', {'spec': {'nodeSelectr': {}}})\n"
            "print('kubernetes' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def _pod() -> dict[str, Any]:
    return (make_pod("web").labels(app="web").req(cpu="1").node_selector(zone="a")
            .toleration("k", "v", "NoSchedule")
            .affinity({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["a"]}]}]}}})
            .spread({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                     "labelSelector": {"matchLabels": {"app": "web"}}})
            .raw())


def _rename(obj: dict[str, Any], path: tuple[Any, ...], new: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    target = out
    for part in path[:-1]:
        target = target[part]
    target[new] = target.pop(path[-1])
    return out


NODE_TERM = ("spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
             "nodeSelectorTerms", 0, "matchExpressions", 0)
TYPOS = [
    (("spec", "nodeSelector"), "nodeSelectr",
     'spec.nodeSelectr: unknown field "nodeSelectr" (did you mean "nodeSelector"?)'),
    (("spec", "containers", 0, "resources"), "resource",
     'spec.containers[0].resource: unknown field "resource" (did you mean "resources"?)'),
    (("spec", "tolerations", 0, "effect"), "efect",
     'spec.tolerations[0].efect: unknown field "efect" (did you mean "effect"?)'),
    (("spec", "tolerations", 0, "operator"), "operater",
     'spec.tolerations[0].operater: unknown field "operater" (did you mean "operator"?)'),
    ((*NODE_TERM, "operator"), "operater",
     "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
     'nodeSelectorTerms[0].matchExpressions[0].operater: unknown field "operater" '
     '(did you mean "operator"?)'),
    (("spec", "topologySpreadConstraints", 0, "whenUnsatisfiable"), "whenUnsatisfable",
     'spec.topologySpreadConstraints[0].whenUnsatisfable: unknown field "whenUnsatisfable" '
     '(did you mean "whenUnsatisfiable"?)'),
    (("spec", "topologySpreadConstraints", 0, "labelSelector", "matchLabels"), "matchLabel",
     'spec.topologySpreadConstraints[0].labelSelector.matchLabel: unknown field "matchLabel" '
     '(did you mean "matchLabels"?)'),
    (("metadata", "labels"), "label",
     'metadata.label: unknown field "label" (did you mean "labels"?)'),
    (("spec", "containers"), "Containers",
     'spec.Containers: unknown field "Containers" (did you mean "containers"?)'),
    (("spec", "nodeSelector"), "node_selector",
     'spec.node_selector: unknown field "node_selector" (did you mean "nodeSelector"?)'),
    (("spec",), "sepc", 'sepc: unknown field "sepc" (did you mean "spec"?)'),
]


@pytest.mark.parametrize(("path", "new", "message"), TYPOS, ids=[t[1] + "@" + str(len(t[0]))
                                                              for t in TYPOS])
def test_a_typo_is_named_by_path_with_a_suggestion(path: tuple[Any, ...], new: str,
                                                   message: str) -> None:
    assert unknown_fields("Pod", _pod()) == []
    assert unknown_fields("Pod", _rename(_pod(), path, new)) == [message]


def test_no_suggestion_when_nothing_is_close() -> None:
    pod = _pod()
    pod["spec"]["zzqx"] = 1
    assert unknown_fields("Pod", pod) == ['spec.zzqx: unknown field "zzqx"']


def test_free_form_maps_take_any_key() -> None:
    pod = _pod()
    pod["metadata"]["labels"] = {"anything/at-all": "x", "nodeSelectr": "y"}
    pod["metadata"]["annotations"] = {"operater": "z"}
    pod["spec"]["nodeSelector"] = {"efect": "1"}
    pod["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"] = "1"
    pod["spec"]["overhead"] = {"cpu": "1"}
    pod["metadata"]["managedFields"] = [{"manager": "m", "fieldsV1": {"f:spec": {"f:x": {}}}}]
    assert unknown_fields("Pod", pod) == []


def test_every_unknown_field_is_found_in_document_order() -> None:
    pod = _pod()
    pod["spec"]["containers"].append({"name": "b", "image": "i", "imagePullPolicyy": "x"})
    pod["spec"]["initContainers"] = [{"name": "i", "image": "i", "resouces": {}}]
    pod["status"] = {"phse": "Pending"}
    pod["spec"]["extra"] = None
    assert [m.split(":")[0] for m in unknown_fields("Pod", pod)] == [
        "spec.containers[1].imagePullPolicyy", "spec.initContainers[0].resouces", "spec.extra",
        "status.phse"]


@pytest.mark.parametrize(("kind", "obj", "path"), [
    ("Node", {"spec": {"taints": [{"key": "k", "efect": "NoSchedule"}]}},
     "spec.taints[0].efect"),
    ("Node", {"status": {"alocatable": {"cpu": "1"}}}, "status.alocatable"),
    ("Node", {"metadata": {"name": "n", "lables": {}}}, "metadata.lables"),
    ("Namespace", {"metadata": {"name": "ns", "lables": {}}}, "metadata.lables"),
    ("Service", {"spec": {"selectr": {"app": "x"}}}, "spec.selectr"),
    ("Service", {"spec": {"ports": [{"port": 80, "targetPort": "http", "nodeport": 1}]}},
     "spec.ports[0].nodeport"),
    ("ReplicaSet", {"spec": {"selector": {"matchLabel": {}}}}, "spec.selector.matchLabel"),
    ("ReplicaSet", {"spec": {"template": {"spec": {"nodeSelectr": {}}}}},
     "spec.template.spec.nodeSelectr"),
    ("StatefulSet", {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "resource": {}}]}}}}, "spec.template.spec.containers[0].resource"),
    ("ReplicationController", {"spec": {"selectors": {}}}, "spec.selectors"),
])
def test_other_kinds_are_checked_too(kind: str, obj: dict[str, Any], path: str) -> None:
    assert [m.split(":")[0] for m in unknown_fields(kind, obj)] == [path]


def test_wrong_value_types_are_left_to_the_decoders() -> None:
    pod = _pod()
    pod["spec"]["tolerations"] = "not a list"
    pod["spec"]["affinity"] = ["not", "an", "object"]
    pod["spec"]["containers"] = [None, 3, {"name": "c"}]
    assert unknown_fields("Pod", pod) == []
    not_str_keys: dict[Any, Any] = {"spec": None, 1: "x"}  # as JSON could never be
    assert unknown_fields("Pod", not_str_keys) == ['1: unknown field "1"']


def test_kubectl_get_output_has_no_unknown_fields() -> None:
    doc = read_documents(FIXTURE)[0]
    for item in doc["items"]:
        assert unknown_fields(item["kind"], item) == [], item["kind"]
    assert len(load_snapshot(FIXTURE).pods) == 1


@pytest.mark.parametrize("seed", range(5))
def test_generated_clusters_have_no_unknown_fields(seed: int) -> None:
    import random

    nodes, pods = gen_cluster(random.Random(seed), 10, 30)
    for obj in nodes:
        assert unknown_fields("Node", obj) == []
    for obj in pods:
        assert unknown_fields("Pod", obj) == []


# -- modes, and the loader ------------------------------------------------------------------

def test_check_fields_modes() -> None:
    bad = _rename(_pod(), ("spec", "nodeSelector"), "nodeSelectr")
    bad["spec"]["tolerations"][0]["efect"] = bad["spec"]["tolerations"][0].pop("effect")
    assert check_fields("Pod", bad, "f.yaml", "ignore") == []
    assert check_fields("Pod", bad, "f.yaml", "warn") == [  # in document order
        'f.yaml: Pod default/web: spec.tolerations[0].efect: unknown field "efect" (did you '
        'mean "effect"?)',
        'f.yaml: Pod default/web: spec.nodeSelectr: unknown field "nodeSelectr" (did you '
        'mean "nodeSelector"?)']
    with pytest.raises(InputFileError) as exc:
        check_fields("Pod", bad, "f.yaml", "strict")
    assert str(exc.value).startswith(
        'f.yaml: Pod default/web: spec.tolerations[0].efect: unknown field "efect" (did you '
        'mean "effect"?) (and 1 more)')
    # Kinds the table does not have are not its business (the loader rejects them).
    assert check_fields("ConfigMap", {"dta": {}}, "f.yaml", "strict") == []
    assert check_fields(None, {"x": 1}, "f.yaml", "strict") == []


def test_loader_strict_warn_ignore(tmp_path: Path) -> None:
    node = make_node("n1").raw()
    node["spec"]["unschedulabel"] = True
    pod = make_pod("p").raw()
    pod["spec"]["nodeSelectr"] = {"zone": "a"}
    path = tmp_path / "snap.json"
    path.write_text(json.dumps({"kind": "List", "items": [node, pod]}))
    with pytest.raises(InputFileError) as exc:
        load_snapshot(path)
    message = str(exc.value)
    assert message.startswith(f"{path} (document 1) items[0]: Node n1: spec.unschedulabel: "
                              'unknown field "unschedulabel" (did you mean "unschedulable"?)')
    snap = load_snapshot(path, field_validation="warn")
    assert [w.split(": ")[1] for w in snap.warnings] == ["Node n1", "Pod default/p"]
    assert snap.warnings[1].startswith(f"{path} (document 1) items[1]: Pod default/p: "
                                       "spec.nodeSelectr")
    # What the decoder makes of it is unchanged: the typo'd fields are simply absent.
    assert snap.pods[0].node_selector == {} and not snap.nodes[0].unschedulable
    assert load_snapshot(path, field_validation="ignore").warnings == []
    pods = tmp_path / "pods.yaml"
    pods.write_text("kind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c}]\n"
                    "  tolerations: [{key: k, operater: Exists}]\n")
    with pytest.raises(InputFileError) as exc:
        load_snapshot(pods, pods_only=True)
    assert str(exc.value).startswith(
        f"{pods} (document 1): Pod default/p: spec.tolerations[0].operater: unknown field "
        '"operater" (did you mean "operator"?); the API server would reject it')
