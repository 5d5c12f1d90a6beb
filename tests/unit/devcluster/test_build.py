"""The Go build's invariants: version stamping, environment, missing toolchain."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from policyd.devcluster.assets import BINARY_NAMES, cache_dir
from policyd.devcluster.build import (
    build_binaries,
    go_env,
    go_targets,
    source_dir,
    version_ldflags,
)
from policyd.devcluster.errors import DevClusterError


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
