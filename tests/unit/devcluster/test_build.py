"""The Go build's invariants: version stamping, environment, missing toolchain."""

from __future__ import annotations

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
