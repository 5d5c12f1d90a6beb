"""The Go build's invariants: version stamping, environment, missing toolchain."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from policyd.devcluster.build import build_binaries, go_env, go_targets, version_ldflags
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


def test_targets_cover_the_four_binaries() -> None:
    targets = go_targets(Path("/src"), "v1.36.3")
    names = {p.rsplit("/", 1)[-1] for t in targets if t.output_name is None for p in t.packages}
    names |= {t.output_name for t in targets if t.output_name}
    assert names == {"kube-apiserver", "kube-scheduler", "kubectl", "etcd"}


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
    assert text.startswith("go list for kube-apiserver, kube-scheduler, kubectl failed (exit 1)")
    assert "\n" not in text and "full log: " in text
    assert not list((tmp_path / "c" / "controlplane").glob(".*partial*"))  # scratch removed
    assert any("resolving modules" in m for m in messages)
