"""The Go build's invariants: version stamping, environment, missing toolchain."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from policyd.devcluster.assets import (
    BINARY_NAMES,
    GO_TOOLS,
    HELM,
    KARPENTER,
    PROMETHEUS,
    PROMTOOL,
    GoTool,
    cache_dir,
)
from policyd.devcluster.build import (
    HELM_KUBE_VERSION,
    build_binaries,
    build_tool,
    go_targets,
    helm_target,
    karpenter_target,
    prometheus_target,
    promtool_target,
    source_dir,
    version_ldflags,
)
from policyd.devcluster.build import (
    TOOL_BUILDS as TOOL_DESCRIPTIONS,
)
from policyd.devcluster.errors import DevClusterError
from policyd.devcluster.gobuild import go_env


def test_version_is_stamped_into_both_version_packages() -> None:
    flags = version_ldflags("v1.36.3")
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        assert f"-X {pkg}.gitVersion=v1.36.3" in flags
        assert f"-X {pkg}.gitMajor=1" in flags
        assert f"-X {pkg}.gitMinor=36" in flags


def test_go_env_is_static_and_never_edits_go_mod() -> None:
    env = go_env({"GOFLAGS": "-buildvcs=false", "HOME": "/h"})
    assert env["CGO_ENABLED"] == "0"
    assert env["GOFLAGS"] == "-buildvcs=false -mod=readonly"
    assert "GOPATH" not in env and "GOMODCACHE" not in env  # Go's shared defaults


def test_targets_cover_every_binary_the_cache_must_hold() -> None:
    targets = go_targets(Path("/src"), "v1.36.3")
    names = {p.rsplit("/", 1)[-1] for t in targets if t.output_name is None for p in t.packages}
    names |= {t.output_name for t in targets if t.output_name}
    assert names == {
        "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubectl", "etcd"}
    # A binary built but not required in the cache (or the reverse) would make every
    # run rebuild, or use a cache without it.
    assert names == set(BINARY_NAMES)


def test_kube_target_packages_are_the_wrapper_modules_tools() -> None:
    # `go mod tidy` keeps go.sum complete only for the packages named in go.mod's tool
    # block: a command built but not listed there fails `-mod=readonly` with
    # "missing go.sum entry" (as kube-controller-manager did before it was added).
    src = source_dir({})
    (kube,) = [t for t in go_targets(src, "v1.36.3") if t.module_dir == src / "kube"]
    go_mod = (src / "kube" / "go.mod").read_text()
    block = go_mod.split("tool (", 1)[1].split(")", 1)[0]
    assert sorted(block.split()) == sorted(kube.packages)


def test_missing_go_is_one_clear_error(tmp_path: Path) -> None:
    env = {"POLICYD_CACHE_DIR": str(tmp_path), "PATH": str(tmp_path / "empty")}
    with pytest.raises(DevClusterError, match="`go` not found"):
        build_binaries(env=env, progress=lambda _: None)


def test_missing_wrapper_modules(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "POLICYD_CACHE_DIR": str(tmp_path / "c"),
        "POLICYD_CONTROLPLANE_SRC": str(tmp_path / "nowhere"),
    }
    with pytest.raises(DevClusterError, match="needs a policyd source checkout"):
        build_binaries(env=env, progress=lambda _: None)


def _exe(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)


def test_cache_from_before_the_controller_manager_is_built_again_not_used(
    tmp_path: Path,
) -> None:
    # A cache filled by an older policyd holds four binaries. The build must not take
    # it as done: without `go` on PATH, trying to build is the observable sign.
    env = {"POLICYD_CACHE_DIR": str(tmp_path), "PATH": str(tmp_path / "empty")}
    for name in ("etcd", "kube-apiserver", "kube-scheduler", "kubectl"):
        _exe(cache_dir(env=env) / name)
    with pytest.raises(DevClusterError, match="`go` not found"):
        build_binaries(env=env, progress=lambda _: None)

    _exe(cache_dir(env=env) / "kube-controller-manager")
    complete = build_binaries(env=env, progress=lambda _: None)
    assert complete.source == "cache"
    assert complete.kube_controller_manager == cache_dir(env=env) / "kube-controller-manager"


@pytest.mark.skipif(shutil.which("go") is None, reason="needs the go command")
def test_failing_go_command_is_one_line_naming_the_log(tmp_path: Path) -> None:
    # A module that requires nothing: `go list` of the Kubernetes commands fails at once,
    # without touching the network.
    for name in ("kube", "etcd"):
        (tmp_path / "src" / name).mkdir(parents=True)
        (tmp_path / "src" / name / "go.mod").write_text(f"module example.com/{name}\n\ngo 1.22\n")
    env = {
        **os.environ,
        "POLICYD_CACHE_DIR": str(tmp_path / "c"),
        "POLICYD_CONTROLPLANE_SRC": str(tmp_path / "src"),
        "GOFLAGS": "",
        "GOPROXY": "off",
    }
    messages: list[str] = []
    with pytest.raises(DevClusterError) as failed:
        build_binaries(env=env, progress=messages.append)
    text = str(failed.value)
    assert text.startswith(
        "go list for kube-apiserver, kube-scheduler, kube-controller-manager, kubectl "
        "failed (exit 1)")
    assert "\n" not in text and "full log: " in text
    assert not list((tmp_path / "c" / "controlplane").glob(".*partial*"))  # scratch removed
    assert any("resolving modules" in m for m in messages)


def test_prometheus_target_is_the_wrapper_modules_tool_without_service_discoveries() -> None:
    src = source_dir({})
    target = prometheus_target(src, "v0.316.0")
    go_mod = (src / "prometheus" / "go.mod").read_text()
    assert f"\t{target.packages[0]}\n" in go_mod.split("tool (", 1)[1].split(")")[0]
    assert target.output_name == "prometheus"
    assert target.tags == ("remove_all_sd",)
    assert "-X github.com/prometheus/common/version.Version=3.16.0" in target.ldflags


def test_promtool_target_is_the_same_modules_second_tool() -> None:
    src = source_dir({})
    target = promtool_target(src, "v0.316.0")
    tools = (src / "prometheus" / "go.mod").read_text().split("tool (", 1)[1].split(")")[0]
    assert f"\t{target.packages[0]}\n" in tools
    assert target.module_dir == prometheus_target(src, "v0.316.0").module_dir
    assert (target.output_name, target.tags) == ("promtool", ("remove_all_sd",))
    assert "-X github.com/prometheus/common/version.Version=3.16.0" in target.ldflags


# A stand-in for the go command: it records its arguments and environment, lists two
# packages, and "builds" by creating the `-o` file. Enough to see what build.py asks
# Go for, without the network or minutes of compiling.
FAKE_GO = """#!/bin/sh
echo "$CGO_ENABLED|$GOFLAGS|$*" >> "$FAKE_GO_LOG"
case "$1" in
list) echo pkg/a; echo pkg/b ;;
build)
  prev=""
  for arg in "$@"; do [ "$prev" = "-o" ] && out="$arg"; prev="$arg"; done
  echo '#!/bin/sh' > "$out"; chmod +x "$out"; echo pkg/a >&2 ;;
esac
"""


def test_karpenter_target_is_the_wrapper_modules_tool_with_its_version_stamped() -> None:
    src = source_dir({})
    target = karpenter_target(src, "v1.13.0")
    go_mod = (src / "karpenter" / "go.mod").read_text()
    assert f"tool {target.packages[0]}\n" in go_mod
    assert target.packages == ("sigs.k8s.io/karpenter/kwok",)
    # Not "kwok", which would pass for the kwok project's own binary.
    assert target.output_name == "karpenter-kwok"
    assert target.tags == ()
    assert "-X sigs.k8s.io/karpenter/pkg/operator.Version=v1.13.0" in target.ldflags


def test_helm_target_is_the_wrapper_modules_tool_stamped_as_a_release() -> None:
    src = source_dir({})
    target = helm_target(src, "v3.22.0")
    go_mod = (src / "helm" / "go.mod").read_text()
    assert f"tool {target.packages[0]}\n" in go_mod
    assert target.packages == ("helm.sh/helm/v3/cmd/helm",)
    assert target.output_name == "helm"
    assert "-X helm.sh/helm/v3/internal/version.version=v3.22.0" in target.ldflags
    # Empty metadata: `helm version` says v3.22.0, not v3.22.0+unreleased.
    assert "-X helm.sh/helm/v3/internal/version.metadata= " in target.ldflags
    # Without these `helm template` would assume a v1.20 cluster.
    for pkg in ("pkg/lint/rules", "pkg/chartutil"):
        assert f"-X helm.sh/helm/v3/{pkg}.k8sVersionMajor=1" in target.ldflags
        assert f"-X helm.sh/helm/v3/{pkg}.k8sVersionMinor=37" in target.ldflags


def test_helm_kube_version_is_the_client_go_helm_requires() -> None:
    # What Helm's Makefile derives from client-go: bumping Helm without it would make
    # `helm template` claim an older (or newer) cluster than the one its client speaks.
    go_mod = (source_dir({}) / "helm" / "go.mod").read_text()
    match = re.search(r"^\s*k8s\.io/client-go v0\.(\d+)\.", go_mod, re.MULTILINE)
    assert match is not None
    assert (1, int(match.group(1))) == HELM_KUBE_VERSION


# Each tool's build: its wrapper module's directory, the build tags, the package and
# binary the build ends with, the progress title.
TOOL_BUILDS = [
    (PROMETHEUS, "prometheus", "-tags remove_all_sd ",
     "/prometheus github.com/prometheus/prometheus/cmd/prometheus", "Prometheus 3.16.0"),
    (PROMTOOL, "prometheus", "-tags remove_all_sd ",
     "/promtool github.com/prometheus/prometheus/cmd/promtool", "promtool 3.16.0"),
    (KARPENTER, "karpenter", "", "/karpenter-kwok sigs.k8s.io/karpenter/kwok",
     "Karpenter v1.13.0 (kwok provider)"),
    (HELM, "helm", "", "/helm helm.sh/helm/v3/cmd/helm", "Helm v3.22.0"),
]


@pytest.mark.parametrize(("tool", "module", "tags", "ends", "title"), TOOL_BUILDS,
                         ids=[t.name for t, *_ in TOOL_BUILDS])
def test_each_tool_is_built_into_its_own_cache_once(
    tool: GoTool, module: str, tags: str, ends: str, title: str, tmp_path: Path
) -> None:
    assert [t for t, *_ in TOOL_BUILDS] == list(GO_TOOLS)
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "go").write_text(FAKE_GO)
    (fake_bin / "go").chmod(0o755)
    (tmp_path / "src" / module).mkdir(parents=True)
    (tmp_path / "src" / module / "go.mod").write_text("module example.com/m\n")
    calls = tmp_path / "calls"
    env = {
        "PATH": f"{fake_bin}:/usr/bin:/bin",
        "POLICYD_CACHE_DIR": str(tmp_path / "c"),
        "POLICYD_CONTROLPLANE_SRC": str(tmp_path / "src"),
        "FAKE_GO_LOG": str(calls),
    }
    messages: list[str] = []
    binary = build_tool(tool, env=env, progress=messages.append)

    dest = tool.cache_dir(env)
    assert binary == dest / tool.binary
    assert os.access(binary, os.X_OK)
    info = json.loads((dest / "BUILDINFO.json").read_text())
    assert (info[tool.name], info["module"]) == (tool.version, tool.module_version)
    listed, built = calls.read_text().splitlines()
    assert listed.startswith(f"0|-mod=readonly|list {tags}-deps ")
    assert built.startswith(f"0|-mod=readonly|build -v -trimpath {tags}-ldflags ")
    # Into a scratch directory next to the cache, renamed when the build is complete.
    assert f"-o {dest.parent}/.{dest.name}.partial-" in built
    assert built.endswith(ends)
    assert messages[0].startswith(f"building {title} into {dest}")
    assert messages[-1].startswith(f"{TOOL_DESCRIPTIONS[tool].what} built in ")
    assert not (tmp_path / "c" / "controlplane").exists()  # the control plane untouched

    # Cached: a second call runs no go command; `force` builds again.
    assert build_tool(tool, env=env, progress=messages.append) == binary
    assert len(calls.read_text().splitlines()) == 2
    build_tool(tool, env=env, progress=messages.append, force=True)
    assert len(calls.read_text().splitlines()) == 4

