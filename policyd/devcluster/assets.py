"""Where built control-plane binaries (and Prometheus, and Karpenter's kwok provider) are
found: variables or the cache.

Building kube-apiserver and friends takes many minutes, so the result is cached outside
the repository, keyed by the pinned versions. Users (and CI systems) that already have
binaries use the envtest convention instead, and then nothing is built:

- ``KUBEBUILDER_ASSETS``: a directory holding ``etcd``, ``kube-apiserver``, ``kubectl``
  (and, for policyd, optionally ``kube-scheduler`` and ``kube-controller-manager``);
- ``TEST_ASSET_ETCD``, ``TEST_ASSET_KUBE_APISERVER``, ``TEST_ASSET_KUBECTL``,
  ``TEST_ASSET_KUBE_SCHEDULER`` and ``TEST_ASSET_KUBE_CONTROLLER_MANAGER``: single
  binaries, taking precedence over the directory.

A cache directory counts only when it holds every binary of `BINARY_NAMES`: one filled
by an older policyd (before kube-controller-manager was built) is incomplete, so
`build.resolve_binaries` builds again and completes it instead of using half of it.

The other binaries the tests run are `GoTool`s, each with a cache directory of its own
and a variable naming an existing binary instead: Prometheus (the node-metrics and alert
tests; ``prometheus/<release>/``, ``TEST_ASSET_PROMETHEUS``), its ``promtool`` (the
alert rules' tests; from the same module, ``TEST_ASSET_PROMTOOL``), Karpenter's kwok
provider (the autoscaler test; ``TEST_ASSET_KARPENTER``) and the ``helm`` CLI (the chart
tests; ``TEST_ASSET_HELM``). ``PATH`` is never searched: the tests run the pinned
versions, not whichever one a package installed.

This module is pure path logic (no processes) so it is cheap to unit-test; falling back
to a build is `build.resolve_binaries` / `build.resolve_tool`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from policyd.devcluster.errors import DevClusterError

# The pinned versions. They must match tools/controlplane/{kube,etcd}/go.mod; changing
# them means editing those go.mod files (see tools/controlplane/README.md).
K8S_VERSION = "v1.36.3"
ETCD_VERSION = "v3.6.16"
# Must match tools/controlplane/prometheus/go.mod. Prometheus 3.x tags its Go module
# v0.<major*100+minor>.<patch>: v0.316.0 is the release 3.16.0.
PROMETHEUS_MODULE_VERSION = "v0.316.0"
PROMETHEUS_ENV_VAR = "TEST_ASSET_PROMETHEUS"
# promtool, from the same Prometheus module (the alert rules' `check rules` and
# `test rules`), cached apart so that adding it never rebuilds the server.
PROMTOOL_ENV_VAR = "TEST_ASSET_PROMTOOL"
# Must match tools/controlplane/karpenter/go.mod. The binary is the module's kwok
# provider (its main package sigs.k8s.io/karpenter/kwok), named apart from kwok itself.
KARPENTER_MODULE = "sigs.k8s.io/karpenter"
KARPENTER_VERSION = "v1.13.0"
KARPENTER_ENV_VAR = "TEST_ASSET_KARPENTER"
KARPENTER_BINARY = "karpenter-kwok"
# Must match tools/controlplane/helm/go.mod: the Helm v3 CLI the chart tests run.
HELM_MODULE = "helm.sh/helm/v3"
HELM_VERSION = "v3.22.0"
HELM_ENV_VAR = "TEST_ASSET_HELM"

# Binary file name -> envtest variable naming it.
ENV_VARS: dict[str, str] = {
    "etcd": "TEST_ASSET_ETCD",
    "kube-apiserver": "TEST_ASSET_KUBE_APISERVER",
    "kubectl": "TEST_ASSET_KUBECTL",
    "kube-scheduler": "TEST_ASSET_KUBE_SCHEDULER",
    "kube-controller-manager": "TEST_ASSET_KUBE_CONTROLLER_MANAGER",
}
ASSETS_DIR_VAR = "KUBEBUILDER_ASSETS"
BINARY_NAMES: tuple[str, ...] = tuple(ENV_VARS)

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Binaries:
    """Paths of the control-plane binaries and where they were found.

    `kube_scheduler`, `kube_controller_manager` and `kubectl` may be None only when the
    binaries come from envtest variables (envtest's asset bundles ship neither scheduler
    nor controller manager, sometimes no kubectl); the features needing them then fail
    with a clear message.
    """

    etcd: Path
    kube_apiserver: Path
    kube_scheduler: Path | None
    kubectl: Path | None
    source: str  # "env", "cache" or "build": shown to users, useful in bug reports
    kube_controller_manager: Path | None = None

    def require_kube_scheduler(self) -> Path:
        return _required(self.kube_scheduler, "kube-scheduler")

    def require_kube_controller_manager(self) -> Path:
        return _required(self.kube_controller_manager, "kube-controller-manager")


def _required(path: Path | None, name: str) -> Path:
    if path is None:
        raise DevClusterError(
            f"{name} binary not available: set {ENV_VARS[name]} or put {name} into "
            f"${ASSETS_DIR_VAR}"
        )
    return path


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    """The per-user cache of policyd: ``$POLICYD_CACHE_DIR``, else XDG, else ~/.cache."""
    env = os.environ if env is None else env
    if env.get("POLICYD_CACHE_DIR"):
        return Path(env["POLICYD_CACHE_DIR"]).expanduser()
    xdg = env.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "policyd"


def cache_dir(
    k8s_version: str = K8S_VERSION,
    etcd_version: str = ETCD_VERSION,
    env: Mapping[str, str] | None = None,
) -> Path:
    """The directory holding the binaries built for one pair of versions."""
    return cache_root(env) / "controlplane" / f"{k8s_version}-{etcd_version}"


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def binaries_in(directory: Path, source: str) -> Binaries | None:
    """The binaries of a complete cache directory, or None if any is missing (then the
    caller builds, which fills the directory anew)."""
    paths = {name: directory / name for name in BINARY_NAMES}
    if not all(_is_executable(p) for p in paths.values()):
        return None
    return Binaries(
        etcd=paths["etcd"],
        kube_apiserver=paths["kube-apiserver"],
        kube_scheduler=paths["kube-scheduler"],
        kubectl=paths["kubectl"],
        source=source,
        kube_controller_manager=paths["kube-controller-manager"],
    )


def from_env(env: Mapping[str, str] | None = None) -> Binaries | None:
    """Binaries named by the envtest variables, or None when none of them is set.

    When any variable is set the user has chosen their binaries, so a missing etcd or
    kube-apiserver is an error rather than a reason to build: silently building for
    half an hour would hide their mistake.
    """
    env = os.environ if env is None else env
    assets_dir = env.get(ASSETS_DIR_VAR) or None
    if assets_dir is None and not any(env.get(var) for var in ENV_VARS.values()):
        return None

    found: dict[str, Path | None] = {}
    for name, var in ENV_VARS.items():
        explicit = env.get(var)
        if explicit:
            path = Path(explicit).expanduser()
            if not _is_executable(path):
                raise DevClusterError(f"{var}={explicit}: not an executable file")
            found[name] = path
        elif assets_dir is not None and _is_executable(Path(assets_dir) / name):
            found[name] = Path(assets_dir) / name
        else:
            found[name] = None

    for required in ("etcd", "kube-apiserver"):
        if found[required] is None:
            where = f"${ASSETS_DIR_VAR}={assets_dir}" if assets_dir else "the environment"
            raise DevClusterError(
                f"{required} not found in {where}: set {ENV_VARS[required]} "
                f"or unset {ASSETS_DIR_VAR} and the TEST_ASSET_* variables to build it"
            )
    etcd, apiserver = found["etcd"], found["kube-apiserver"]
    assert etcd is not None and apiserver is not None  # checked just above
    return Binaries(
        etcd=etcd,
        kube_apiserver=apiserver,
        kube_scheduler=found["kube-scheduler"],
        kubectl=found["kubectl"],
        source="env",
        kube_controller_manager=found["kube-controller-manager"],
    )


def prometheus_release(module_version: str = PROMETHEUS_MODULE_VERSION) -> str:
    """The Prometheus release of a Go module version: ``v0.316.0`` -> ``3.16.0``."""
    _, combined, patch = module_version.lstrip("v").split(".")[:3]
    major, minor = divmod(int(combined), 100)
    return f"{major}.{minor}.{patch}"


def binary_in(directory: Path, name: str) -> Path | None:
    """The binary `name` of a single-binary cache directory, or None when it is not
    there (then the caller builds)."""
    path = directory / name
    return path if _is_executable(path) else None


def binary_from_env(var: str, env: Mapping[str, str] | None = None) -> Path | None:
    """The binary the variable `var` names, or None when it is unset.

    Set, it must be an executable file: as with the control plane's variables, a
    mistyped path is an error, not a reason to build for minutes.
    """
    value = (os.environ if env is None else env).get(var)
    if not value:
        return None
    path = Path(value).expanduser()
    if not _is_executable(path):
        raise DevClusterError(f"{var}={value}: not an executable file")
    return path


@dataclass(frozen=True, slots=True)
class GoTool:
    """One binary the tests need besides the control plane, built from a Go module into
    a cache directory of its own (``<name>/<version>/``: adding or upgrading it never
    invalidates another's), or named by a variable instead (then nothing is built).
    ``PATH`` is never searched: every machine runs the pinned version."""

    name: str  # its cache directory under the cache root, and its name in messages
    binary: str  # the file name
    module_version: str  # the pinned Go module version (tools/controlplane/<dir>/go.mod)
    version: str  # the version as it is released: its cache directory's name
    env_var: str  # the variable naming an existing binary

    def cache_dir(self, env: Mapping[str, str] | None = None) -> Path:
        return cache_root(env) / self.name / self.version

    def binary_in(self, directory: Path) -> Path | None:
        """The tool in a cache directory, or None when it is not there."""
        return binary_in(directory, self.binary)

    def from_env(self, env: Mapping[str, str] | None = None) -> Path | None:
        """The binary the tool's variable names, or None when it is unset."""
        return binary_from_env(self.env_var, env)


PROMETHEUS = GoTool("prometheus", "prometheus", PROMETHEUS_MODULE_VERSION,
                    "v" + prometheus_release(), PROMETHEUS_ENV_VAR)
PROMTOOL = GoTool("promtool", "promtool", PROMETHEUS_MODULE_VERSION,
                  "v" + prometheus_release(), PROMTOOL_ENV_VAR)
KARPENTER = GoTool("karpenter", KARPENTER_BINARY, KARPENTER_VERSION, KARPENTER_VERSION,
                   KARPENTER_ENV_VAR)
HELM = GoTool("helm", "helm", HELM_VERSION, HELM_VERSION, HELM_ENV_VAR)
# In the order `make test` builds them (`build.build_dev_tools`).
GO_TOOLS = (PROMETHEUS, PROMTOOL, KARPENTER, HELM)
