"""Karpenter, with its kwok provider, against the local control plane: a real autoscaler
for the end-to-end test of policies an autoscaler can see (issue 29).

The kwok provider is Karpenter's own test build (``sigs.k8s.io/karpenter/kwok``): all of
Karpenter's controllers (provisioning, NodeClaim lifecycle, disruption) with a cloud
provider whose "instance" is a Node object it creates from the NodeClaim, labelled from
the NodePool's template, with no kubelet behind it. That is exactly the kind of Node the
test clusters have, so policyd schedules onto it like onto any other.

What `start_karpenter` does:

- installs Karpenter's CRDs (NodePool, NodeClaim, NodeOverlay, and the provider's
  KWOKNodeClass) from the module the binary was built from, read at run time from the
  Go module cache (``go mod download -json`` names the directory, fetching the module
  if the cache lacks it): no copy of upstream's CRDs lives in this repository;
- starts the binary with the control plane's admin kubeconfig (through ``KUBECONFIG``:
  Karpenter parses every command-line flag itself and knows no ``--kubeconfig``),
  leader election off, its metrics and health ports on free ports, its log in a file;
- returns once ``/readyz`` is 200 (its caches synced and the CRDs served).

Karpenter puts finalizers on the Nodes and NodeClaims it makes and removes them only
while it runs; `delete_karpenter_objects`, after Karpenter is stopped, takes them off
and deletes everything Karpenter made or read, so the next test starts with no Nodes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from policyd.devcluster.assets import KARPENTER, KARPENTER_MODULE, KARPENTER_VERSION, Progress
from policyd.devcluster.build import resolve_tool
from policyd.devcluster.errors import DevClusterError
from policyd.devcluster.gobuild import go_env
from policyd.devcluster.kubeconfig import kube_client_from
from policyd.devcluster.ports import LOOPBACK, free_ports
from policyd.devcluster.probe import Component, http_get
from policyd.devcluster.process import ManagedProcess
from policyd.kube.client import ApiError, KubeClient
from policyd.model.datafile import read_documents

# Inside the module: the chart's copies of the core CRDs (they also forbid the kwok
# provider's own label domain in templates, as its Helm chart installs them) and the
# provider's node class.
CRD_FILES: tuple[str, ...] = (
    "kwok/charts/crds/karpenter.sh_nodepools.yaml",
    "kwok/charts/crds/karpenter.sh_nodeclaims.yaml",
    "kwok/charts/crds/karpenter.sh_nodeoverlays.yaml",
    "kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml",
)
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
NODEPOOLS = "/apis/karpenter.sh/v1/nodepools"
NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"
NODECLASSES = "/apis/karpenter.kwok.sh/v1alpha1/kwoknodeclasses"
# The kwok provider's Nodes carry this providerID prefix (kwok/cloudprovider/const.go).
PROVIDER_PREFIX = "kwok://"


def module_dir(version: str = KARPENTER_VERSION, env: Mapping[str, str] | None = None
               ) -> Path:
    """The directory of ``sigs.k8s.io/karpenter@version`` in the Go module cache.

    ``go mod download -json`` answers from the cache (a build has put the module there)
    and downloads it only when it is missing, e.g. when ``TEST_ASSET_KARPENTER`` named
    a binary built elsewhere. Run outside any module, so no go.mod is read.
    """
    base = os.environ if env is None else env
    go = shutil.which("go", path=base.get("PATH"))
    if go is None:
        raise DevClusterError(
            f"`go` not found on PATH: it is needed to find Karpenter's CRDs in the Go "
            f"module cache ({KARPENTER_MODULE}@{version})")
    with tempfile.TemporaryDirectory(prefix="policyd-gomod-") as scratch:
        try:
            done = subprocess.run(
                [go, "mod", "download", "-json", f"{KARPENTER_MODULE}@{version}"],
                cwd=scratch, env=go_env(base), capture_output=True, text=True,
                check=False, timeout=600)
        except subprocess.TimeoutExpired as err:
            raise DevClusterError(
                f"go mod download {KARPENTER_MODULE}@{version} took over "
                f"{err.timeout:.0f}s (is the Go proxy reachable?)") from err
    try:
        info = json.loads(done.stdout or "{}")
    except ValueError:
        info = {}
    found = info.get("Dir") if isinstance(info, dict) else None
    if done.returncode != 0 or not found:
        why = (info.get("Error") if isinstance(info, dict) else None) or done.stderr.strip()
        raise DevClusterError(
            f"go mod download {KARPENTER_MODULE}@{version} failed (exit "
            f"{done.returncode}): {why or 'no module directory reported'}")
    return Path(found)


def crd_documents(directory: Path) -> list[dict[str, Any]]:
    """The CustomResourceDefinitions of `CRD_FILES` in a module directory."""
    crds: list[dict[str, Any]] = []
    for name in CRD_FILES:
        path = directory / name
        if not path.is_file():
            raise DevClusterError(f"{path} not found: is {directory} Karpenter's module?")
        for doc in read_documents(path):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                crds.append(doc)
    return crds


def _established(crd: Mapping[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in conditions)


def install_crds(client: KubeClient, crds: Sequence[Mapping[str, Any]],
                 timeout: float = 60.0) -> None:
    """Create or replace each CRD, then wait until the API server serves them all."""
    names: list[str] = []
    for crd in crds:
        name = str(crd["metadata"]["name"])
        names.append(name)
        try:
            client.request("POST", CRD_PATH, body=crd)
        except ApiError as err:
            if err.status != 409:
                raise DevClusterError(f"creating CRD {name} failed: {err}") from err
            # Installed by an earlier run: replace it, so a version change takes effect.
            current = client.request("GET", f"{CRD_PATH}/{name}")
            body = {**crd, "metadata": {**crd["metadata"], "resourceVersion":
                                        current["metadata"]["resourceVersion"]}}
            client.request("PUT", f"{CRD_PATH}/{name}", body=body)
    deadline = time.monotonic() + timeout
    for name in names:
        while not _established(client.request("GET", f"{CRD_PATH}/{name}")):
            if time.monotonic() > deadline:
                raise DevClusterError(f"CRD {name} not Established after {timeout:.0f}s")
            time.sleep(0.2)
    # Established says the names are accepted, not that the resource's storage is up:
    # for a moment after, a list answers 429 "storage is (re)initializing" (or 404).
    for crd in crds:
        path = resource_path(crd)
        while True:
            try:
                client.request("GET", path, query={"limit": 1})
                break
            except ApiError as err:
                if err.status not in (404, 429) or time.monotonic() > deadline:
                    raise DevClusterError(f"{path} not served: {err}") from err
            time.sleep(0.2)


def resource_path(crd: Mapping[str, Any]) -> str:
    """The API path of a CRD's objects (cluster-scoped), at its storage version."""
    spec = crd["spec"]
    versions = spec.get("versions") or []
    version = next((v["name"] for v in versions if v.get("storage")), versions[0]["name"])
    return f"/apis/{spec['group']}/{version}/{spec['names']['plural']}"


class Karpenter(Component):
    """A running Karpenter (kwok provider): its process, health and metrics ports."""

    name = "karpenter"

    def __init__(self, process: ManagedProcess, port: int, metrics_port: int) -> None:
        super().__init__(process, port)
        self.metrics_port = metrics_port

    def ready(self) -> bool:
        # /readyz checks that its caches synced and that NodePool and NodeClaim are served.
        status, _ = http_get(f"http://{LOOPBACK}:{self.port}/readyz", None)
        return status == 200

    def metrics(self) -> str:
        """Its Prometheus metrics text ("" when it does not answer)."""
        return http_get(f"http://{LOOPBACK}:{self.metrics_port}/metrics", None)[1]


def karpenter_args(binary: Path, health_port: int, metrics_port: int, *,
                   batch_idle: str = "300ms", batch_max: str = "3s",
                   log_level: str = "debug") -> list[str]:
    """The command line: one replica (no election), fast batching for tests.

    Karpenter gathers pending pods into a batch until none arrives for `batch_idle`
    (default 1s) or `batch_max` passes (default 10s); a test creates its pods at once,
    so shorter windows only save waiting. Its ports bind every interface (it takes a
    port, not an address); they are chosen free on loopback.
    """
    return [
        str(binary),
        "--disable-leader-election=true",
        f"--health-probe-port={health_port}",
        f"--metrics-port={metrics_port}",
        f"--batch-idle-duration={batch_idle}",
        f"--batch-max-duration={batch_max}",
        f"--log-level={log_level}",
        "--log-output-paths=stdout",
        "--log-error-output-paths=stderr",
    ]


def karpenter_env(kubeconfig: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Its environment: the kubeconfig, and nothing else of ours.

    Karpenter reads a default for almost every option from a variable (BATCH_MAX_DURATION,
    FEATURE_GATES, MEMORY_LIMIT, ...); starting from an empty environment keeps one
    set in the developer's shell from changing what the test runs.
    """
    base = os.environ if base is None else base
    env = {key: base[key] for key in ("PATH", "HOME", "TMPDIR") if base.get(key)}
    env["KUBECONFIG"] = str(kubeconfig)
    return env


def start_karpenter(kubeconfig: Path, workdir: Path, *, binary: Path | None = None,
                    progress: Progress | None = None, timeout: float = 120.0,
                    extra_args: Sequence[str] = ()) -> Karpenter:
    """Install the CRDs and start Karpenter against the cluster of `kubeconfig`, ready
    when it returns; its log is ``workdir/karpenter.log``."""
    binary = binary or resolve_tool(KARPENTER, progress=progress)
    client = kube_client_from(kubeconfig)
    try:
        install_crds(client, crd_documents(module_dir()))
    finally:
        client.close()
    health, metrics = free_ports(2)
    process = ManagedProcess.start(
        "karpenter",
        [*karpenter_args(binary, health, metrics), *extra_args],
        workdir / "karpenter.log",
        env=karpenter_env(kubeconfig),
    )
    karpenter = Karpenter(process, health, metrics)
    try:
        karpenter.wait_ready(timeout)
    except DevClusterError:
        karpenter.stop()
        raise
    return karpenter


def _strip_finalizers_and_delete(client: KubeClient, path: str) -> None:
    try:
        client.request("PATCH", path, body={"metadata": {"finalizers": None}},
                       content_type="application/merge-patch+json")
        client.request("DELETE", path, query={"gracePeriodSeconds": 0})
    except ApiError as err:
        if err.status != 404:
            raise


def _items(client: KubeClient, path: str) -> list[dict[str, Any]]:
    try:
        return list(client.request("GET", path).get("items") or [])
    except ApiError as err:
        if err.status == 404:  # the CRD is not installed: nothing of that kind exists
            return []
        raise


def delete_karpenter_objects(client: KubeClient, timeout: float = 30.0) -> None:
    """Delete every NodeClaim, NodePool and KWOKNodeClass and every Node of the kwok
    provider, taking Karpenter's finalizers off first. Call it after Karpenter has
    stopped: running, it would put them back and create new NodeClaims."""
    paths = [f"/api/v1/nodes/{n['metadata']['name']}"
             for n in _items(client, "/api/v1/nodes")
             if str((n.get("spec") or {}).get("providerID", "")).startswith(PROVIDER_PREFIX)]
    for collection in (NODECLAIMS, NODEPOOLS, NODECLASSES):
        paths += [f"{collection}/{o['metadata']['name']}" for o in _items(client, collection)]
    for path in paths:
        _strip_finalizers_and_delete(client, path)
    deadline = time.monotonic() + timeout
    for path in paths:
        while True:
            try:
                client.request("GET", path)
            except ApiError as err:
                if err.status == 404:
                    break
                raise
            if time.monotonic() > deadline:
                raise DevClusterError(f"{path} still there {timeout:.0f}s after its delete")
            time.sleep(0.1)
