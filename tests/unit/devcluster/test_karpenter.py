"""Karpenter's runner without running it: its command line and environment, and the
CRDs it reads from a module directory (the real run is tests/e2e/test_autoscaler_karpenter.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from policyd.devcluster.errors import DevClusterError
from policyd.devcluster.karpenter import (
    CRD_FILES,
    _established,
    crd_documents,
    karpenter_args,
    karpenter_env,
    module_dir,
    resource_path,
)


def test_one_replica_on_the_given_ports_logging_to_its_output() -> None:
    args = karpenter_args(Path("/bin/karpenter-kwok"), 4101, 4102)
    assert args[0] == "/bin/karpenter-kwok"
    assert "--disable-leader-election=true" in args
    assert "--health-probe-port=4101" in args
    assert "--metrics-port=4102" in args
    assert "--log-output-paths=stdout" in args
    # Karpenter parses every flag itself: one it does not know stops it at start.
    assert not any(a.startswith("--kubeconfig") for a in args)


def test_environment_is_the_kubeconfig_and_nothing_of_the_shells_karpenter_options(
        tmp_path: Path) -> None:
    shell = {"PATH": "/usr/bin", "HOME": "/home/u", "BATCH_MAX_DURATION": "1h",
             "FEATURE_GATES": "NodeRepair=true", "KUBECONFIG": "/elsewhere"}
    env = karpenter_env(tmp_path / "kubeconfig", shell)
    assert env == {"PATH": "/usr/bin", "HOME": "/home/u",
                   "KUBECONFIG": str(tmp_path / "kubeconfig")}


def _crd(name: str) -> str:
    return (f"---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
            f"metadata:\n  name: {name}\nspec:\n  group: example.com\n")


def test_crds_are_read_from_the_module_directory_in_order(tmp_path: Path) -> None:
    for i, rel in enumerate(CRD_FILES):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(_crd(f"c{i}.example.com"))
    names = [d["metadata"]["name"] for d in crd_documents(tmp_path)]
    assert names == [f"c{i}.example.com" for i in range(len(CRD_FILES))]


def test_a_directory_that_is_not_karpenters_is_named(tmp_path: Path) -> None:
    with pytest.raises(DevClusterError, match=r"karpenter\.sh_nodepools\.yaml not found"):
        crd_documents(tmp_path)


def test_without_go_the_module_cache_cannot_be_asked(tmp_path: Path) -> None:
    with pytest.raises(DevClusterError, match=r"`go` not found.*sigs\.k8s\.io/karpenter@"):
        module_dir(env={"PATH": str(tmp_path)})


def test_established_only_when_the_condition_says_true() -> None:
    assert not _established({})
    assert not _established({"status": {"conditions": [
        {"type": "Established", "status": "False"}]}})
    assert _established({"status": {"conditions": [
        {"type": "NamesAccepted", "status": "True"},
        {"type": "Established", "status": "True"}]}})


def test_resource_path_is_the_storage_versions_plural() -> None:
    crd = {"spec": {"group": "karpenter.sh", "names": {"plural": "nodepools"},
                    "versions": [{"name": "v1beta1", "storage": False},
                                 {"name": "v1", "storage": True}]}}
    assert resource_path(crd) == "/apis/karpenter.sh/v1/nodepools"
