"""Where binaries come from: envtest variables first, then the cache, then a build."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from policyd.devcluster import assets
from policyd.devcluster.assets import (
    BINARY_NAMES,
    binaries_in,
    cache_dir,
    cache_root,
    from_env,
    prometheus_release,
)
from policyd.devcluster.build import (
    resolve_binaries,
    resolve_tool,
)
from policyd.devcluster.errors import DevClusterError


def _exe(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_no_variables_means_no_env_binaries() -> None:
    assert from_env({}) is None
    assert from_env({"KUBEBUILDER_ASSETS": "", "TEST_ASSET_ETCD": ""}) is None


def test_kubebuilder_assets_dir(tmp_path: Path) -> None:
    for name in ("etcd", "kube-apiserver", "kubectl"):  # envtest bundles have no scheduler
        _exe(tmp_path / name)
    found = from_env({"KUBEBUILDER_ASSETS": str(tmp_path)})
    assert found is not None
    assert found.source == "env"
    assert found.etcd == tmp_path / "etcd"
    assert found.kubectl == tmp_path / "kubectl"
    assert found.kube_scheduler is None
    with pytest.raises(DevClusterError, match="TEST_ASSET_KUBE_SCHEDULER"):
        found.require_kube_scheduler()
    assert found.kube_controller_manager is None
    with pytest.raises(DevClusterError, match="TEST_ASSET_KUBE_CONTROLLER_MANAGER"):
        found.require_kube_controller_manager()


def test_single_variables_take_precedence_over_the_dir(tmp_path: Path) -> None:
    for name in ("etcd", "kube-apiserver"):
        _exe(tmp_path / "dir" / name)
    own_etcd = _exe(tmp_path / "elsewhere" / "my-etcd")
    scheduler = _exe(tmp_path / "elsewhere" / "sched")
    found = from_env(
        {
            "KUBEBUILDER_ASSETS": str(tmp_path / "dir"),
            "TEST_ASSET_ETCD": str(own_etcd),
            "TEST_ASSET_KUBE_SCHEDULER": str(scheduler),
        }
    )
    assert found is not None
    assert found.etcd == own_etcd
    assert found.kube_apiserver == tmp_path / "dir" / "kube-apiserver"
    assert found.kube_scheduler == scheduler


def test_controller_manager_from_its_variable_or_the_dir(tmp_path: Path) -> None:
    for name in ("etcd", "kube-apiserver", "kube-controller-manager"):
        _exe(tmp_path / "dir" / name)
    found = from_env({"KUBEBUILDER_ASSETS": str(tmp_path / "dir")})
    assert found is not None
    assert found.require_kube_controller_manager() == tmp_path / "dir" / "kube-controller-manager"

    own = _exe(tmp_path / "elsewhere" / "kcm")
    found = from_env({"KUBEBUILDER_ASSETS": str(tmp_path / "dir"),
                      "TEST_ASSET_KUBE_CONTROLLER_MANAGER": str(own)})
    assert found is not None and found.kube_controller_manager == own


def test_cache_without_the_controller_manager_is_incomplete(tmp_path: Path) -> None:
    # What a cache built before kube-controller-manager joined looks like.
    for name in ("etcd", "kube-apiserver", "kube-scheduler", "kubectl"):
        _exe(tmp_path / name)
    assert binaries_in(tmp_path, "cache") is None
    _exe(tmp_path / "kube-controller-manager")
    found = binaries_in(tmp_path, "cache")
    assert found is not None
    assert found.kube_controller_manager == tmp_path / "kube-controller-manager"


def test_only_single_variables(tmp_path: Path) -> None:
    found = from_env(
        {
            "TEST_ASSET_ETCD": str(_exe(tmp_path / "e")),
            "TEST_ASSET_KUBE_APISERVER": str(_exe(tmp_path / "a")),
        }
    )
    assert found is not None and found.kubectl is None


def test_variable_naming_a_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DevClusterError, match=r"TEST_ASSET_ETCD=.*not an executable"):
        from_env({"TEST_ASSET_ETCD": str(tmp_path / "nope")})


def test_incomplete_assets_dir_is_an_error_not_a_build(tmp_path: Path) -> None:
    _exe(tmp_path / "etcd")
    with pytest.raises(DevClusterError, match="kube-apiserver not found"):
        from_env({"KUBEBUILDER_ASSETS": str(tmp_path)})


def test_non_executable_file_is_not_a_binary(tmp_path: Path) -> None:
    for name in BINARY_NAMES:
        (tmp_path / name).write_text("")
    assert binaries_in(tmp_path, "cache") is None


def test_cache_location_is_outside_the_repo_and_keyed_by_version(tmp_path: Path) -> None:
    assert cache_root({"HOME": "/h"}).name == "policyd"
    assert cache_root({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "policyd"
    assert cache_root({"POLICYD_CACHE_DIR": str(tmp_path / "c")}) == tmp_path / "c"
    key = cache_dir("v1.2.3", "v3.4.5", {"POLICYD_CACHE_DIR": str(tmp_path)})
    assert key == tmp_path / "controlplane" / "v1.2.3-v3.4.5"


def test_resolve_prefers_env_then_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"POLICYD_CACHE_DIR": str(tmp_path / "cache")}
    with pytest.raises(DevClusterError, match="policyd dev build"):
        resolve_binaries(build_if_missing=False, env=env)

    for name in BINARY_NAMES:
        _exe(cache_dir(env=env) / name)
    assert resolve_binaries(build_if_missing=False, env=env).source == "cache"

    _exe(tmp_path / "assets" / "etcd")
    _exe(tmp_path / "assets" / "kube-apiserver")
    env["KUBEBUILDER_ASSETS"] = str(tmp_path / "assets")
    assert resolve_binaries(env=env).source == "env"


def test_versions_match_the_wrapper_modules() -> None:
    # build.py stamps K8S_VERSION into the binaries; go.mod decides what is compiled.
    root = Path(assets.__file__).resolve().parents[2] / "tools" / "controlplane"
    assert f"k8s.io/kubernetes {assets.K8S_VERSION}" in (root / "kube" / "go.mod").read_text()
    staging = "v0." + assets.K8S_VERSION.split(".", 1)[1]
    assert f"k8s.io/api => k8s.io/api {staging}" in (root / "kube" / "go.mod").read_text()
    etcd_mod = (root / "etcd" / "go.mod").read_text()
    assert f"go.etcd.io/etcd/server/v3 {assets.ETCD_VERSION}" in etcd_mod
    prom_mod = (root / "prometheus" / "go.mod").read_text()
    pinned = re.escape(f"github.com/prometheus/prometheus {assets.PROMETHEUS_MODULE_VERSION}")
    assert re.search(rf"^(require )?\s*{pinned}( |$)", prom_mod, re.MULTILINE)
    karpenter_mod = (root / "karpenter" / "go.mod").read_text()
    pinned = re.escape(f"{assets.KARPENTER_MODULE} {assets.KARPENTER_VERSION}")
    assert re.search(rf"^(require )?\s*{pinned}( |$)", karpenter_mod, re.MULTILINE)
    helm_mod = (root / "helm" / "go.mod").read_text()
    pinned = re.escape(f"{assets.HELM_MODULE} {assets.HELM_VERSION}")
    assert re.search(rf"^(require )?\s*{pinned}( |$)", helm_mod, re.MULTILINE)


def test_prometheus_release_of_its_module_version() -> None:
    assert prometheus_release("v0.316.0") == "3.16.0"
    assert prometheus_release("v0.300.1") == "3.0.1"
    assert prometheus_release("v0.412.3") == "4.12.3"


# Each tool: its cache directory under the cache root, its variable.
TOOL_PLACES = [
    (assets.PROMETHEUS, "prometheus/v3.16.0", "TEST_ASSET_PROMETHEUS"),
    (assets.PROMTOOL, "promtool/v3.16.0", "TEST_ASSET_PROMTOOL"),
    (assets.KARPENTER, "karpenter/v1.13.0", "TEST_ASSET_KARPENTER"),
    (assets.HELM, "helm/v3.22.0", "TEST_ASSET_HELM"),
]


def test_every_tool_is_listed_once() -> None:
    assert [t for t, _, _ in TOOL_PLACES] == list(assets.GO_TOOLS)


@pytest.mark.parametrize(("tool", "place", "var"), TOOL_PLACES,
                         ids=[t.name for t, *_ in TOOL_PLACES])
def test_each_tool_has_its_own_cache_dir_and_variable(
    tool: assets.GoTool, place: str, var: str, tmp_path: Path
) -> None:
    # Not in the control plane's directory: a cache without it must not count as
    # incomplete and trigger a twelve-minute rebuild of the control plane.
    env = {"POLICYD_CACHE_DIR": str(tmp_path)}
    assert tool.cache_dir(env) == tmp_path / place
    assert tool.binary not in BINARY_NAMES
    assert tool.from_env({}) is None
    assert tool.from_env({var: ""}) is None
    own = _exe(tmp_path / f"my-{tool.name}")
    assert tool.from_env({var: str(own)}) == own
    with pytest.raises(DevClusterError, match=rf"{var}=.*not an executable"):
        tool.from_env({var: str(tmp_path / "nope")})


@pytest.mark.parametrize(("tool", "place", "var"), TOOL_PLACES,
                         ids=[t.name for t, *_ in TOOL_PLACES])
def test_resolving_a_tool_prefers_the_variable_then_the_cache_never_path(
    tool: assets.GoTool, place: str, var: str, tmp_path: Path
) -> None:
    # A binary on PATH (Debian's, say) is not taken: with an empty cache the resolver
    # tries to build, and without `go` on that PATH says so.
    on_path = _exe(tmp_path / "bin" / tool.binary)
    env = {"POLICYD_CACHE_DIR": str(tmp_path / "cache"), "PATH": str(on_path.parent)}
    with pytest.raises(DevClusterError, match=rf"`go` not found.*{var}"):
        resolve_tool(tool, env=env, progress=lambda _: None)

    cached = _exe(tool.cache_dir(env=env) / tool.binary)
    assert resolve_tool(tool, env=env) == cached

    own = _exe(tmp_path / "own" / tool.binary)
    assert resolve_tool(tool, env={**env, var: str(own)}) == own
