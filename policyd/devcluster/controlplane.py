"""Run etcd + kube-apiserver + kube-controller-manager (and optionally kube-scheduler)
on loopback, and stop them.

This is the project's real Kubernetes API for tests, demos and benchmarks. It is set up
like a small production control plane where that matters to policyd — TLS, client
certificate and ServiceAccount token authentication, RBAC authorization, TokenRequest,
the real PersistentVolume and resource claim controllers — and trimmed where it
doesn't: the controller manager runs only the volume controllers and the resource claim
controller (`controllermanager`), no kubelet, etcd without fsync.

Lifecycle: ``ControlPlane(...).start()`` / ``.stop()`` or ``with ControlPlane() as cp``.
Every process is tracked by pid (see `process`), so ``stop()`` leaves nothing behind.
A detached control plane (``policyd dev up``) outlives its Python process; its pids and
ports are saved with `save_state` and picked up again with `from_state`.
"""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import ssl
import tempfile
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from policyd.devcluster.assets import K8S_VERSION, Binaries, Progress
from policyd.devcluster.build import resolve_binaries
from policyd.devcluster.certs import CertFiles, generate_certs
from policyd.devcluster.controllermanager import (
    KubeControllerManager,
    controller_manager_args,
    controllers_for,
    role_bindings,
)
from policyd.devcluster.errors import DevClusterError
from policyd.devcluster.featuregates import (
    checked,
    format_gates,
    runtime_config,
    runtime_config_args,
    split_gate_args,
    with_gates,
)
from policyd.devcluster.kubeconfig import kubeconfig_dict, write_kubeconfig
from policyd.devcluster.ports import LOOPBACK, free_ports, port_is_free
from policyd.devcluster.probe import Component, http_get, unverified_context, wait_until
from policyd.devcluster.process import ManagedProcess
from policyd.kube.official import api_client_from
from policyd.model.datafile import read_documents

# A start that loses a port race (another program bound it between our pick and the
# server's bind) is retried with new ports this many times.
_START_ATTEMPTS = 3
_PORT_RACE_MARKERS = ("address already in use", "bind: address")
STATE_VERSION = 1
_SOURCES = {"env": "envtest", "cache": "cached", "build": "freshly built"}


def _quiet(_: str) -> None:
    pass


class KubeScheduler(Component):
    """A kube-scheduler process started against a `ControlPlane` (the comparison peer)."""

    name = "kube-scheduler"

    def __init__(self, process: ManagedProcess, config_path: Path, port: int,
                 feature_gates: Mapping[str, bool] | None = None) -> None:
        super().__init__(process, port)
        self.config_path = config_path
        # The gates on its command line (the control plane's, merged with its own).
        self.feature_gates = dict(feature_gates or {})

    def ready(self) -> bool:
        status, _ = http_get(f"https://{LOOPBACK}:{self.port}/readyz", unverified_context())
        return status == 200

    def __enter__(self) -> KubeScheduler:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class ControlPlane:
    """etcd + kube-apiserver (+ kube-controller-manager) on free loopback ports, with an
    admin kubeconfig.

    `workdir` holds certificates, etcd data, logs and the kubeconfig; when not given, a
    temporary directory is used and removed by `stop()`. `binaries` default to
    `resolve_binaries()` (envtest variables, the cache, or a build). `detach=True` lets
    the processes outlive this Python process (for ``policyd dev up``).
    `apiserver_port` fixes the API server's port instead of picking a free one.
    `controller_manager=False` leaves kube-controller-manager (the PV controller) off.
    `cpus` pins etcd, kube-apiserver and kube-controller-manager to those CPUs (a
    benchmark keeps them off the cores of the scheduler it measures).
    `feature_gates` (settings by name; a flag's text goes through
    `featuregates.parse_gates` first) go to kube-apiserver, kube-controller-manager and
    every kube-scheduler started here; any well-formed gate name is passed on, and the
    alpha/beta API versions the gates that are on need are enabled
    (`featuregates.API_VERSIONS`). A `--feature-gates` in `extra_apiserver_args` is
    merged into them for the API server, winning per name.
    """

    def __init__(
        self,
        workdir: Path | None = None,
        *,
        binaries: Binaries | None = None,
        detach: bool = False,
        apiserver_port: int | None = None,
        progress: Progress | None = None,
        build_if_missing: bool = True,
        startup_timeout: float = 120.0,
        extra_apiserver_args: Sequence[str] = (),
        controller_manager: bool = True,
        cpus: frozenset[int] | None = None,
        feature_gates: Mapping[str, bool] | None = None,
    ) -> None:
        self._own_workdir = workdir is None
        # Checked here, before anything starts: a bad name is a usage error (exit 2).
        self.feature_gates = checked(feature_gates or {})
        # The API server's own extra --feature-gates must be well-formed too.
        split_gate_args(extra_apiserver_args)
        self.cpus = cpus
        self.workdir = Path(workdir) if workdir is not None else None
        self._binaries = binaries
        self.detach = detach
        self.apiserver_port = apiserver_port
        self._progress = progress or _quiet
        self._build_if_missing = build_if_missing
        self.startup_timeout = startup_timeout
        self.extra_apiserver_args = tuple(extra_apiserver_args)
        self.controller_manager = controller_manager
        self.kube_controller_manager: KubeControllerManager | None = None
        self.etcd_port: int | None = None
        self.processes: list[ManagedProcess] = []
        self.schedulers: list[KubeScheduler] = []
        self.certs: CertFiles | None = None
        self._scheduler_count = 0

    # -- public properties ----------------------------------------------------------

    @property
    def binaries(self) -> Binaries:
        if self._binaries is None:
            self._binaries = resolve_binaries(
                build_if_missing=self._build_if_missing, progress=self._progress
            )
        return self._binaries

    def _dir(self) -> Path:
        if self.workdir is None:
            raise DevClusterError("control plane not started")
        return self.workdir

    @property
    def kubeconfig_path(self) -> Path:
        """The admin kubeconfig (group system:masters)."""
        return self._dir() / "kubeconfig"

    @property
    def server(self) -> str:
        if self.apiserver_port is None:
            raise DevClusterError("control plane not started")
        return f"https://{LOOPBACK}:{self.apiserver_port}"

    @property
    def etcd_url(self) -> str:
        return f"http://{LOOPBACK}:{self.etcd_port}"

    def compact_etcd(self) -> None:
        """Compact etcd at its current revision (through its JSON gateway), so that a
        watch resuming from an older resourceVersion gets 410 Gone, as after a real
        API-server restart that lost its watch cache."""
        def call(path: str, body: dict[str, Any]) -> dict[str, Any]:
            req = urllib.request.Request(self.etcd_url + path, method="POST",
                                         data=json.dumps(body).encode())
            with urllib.request.urlopen(req, timeout=10) as r:
                return json.loads(r.read())  # type: ignore[no-any-return]

        head = call("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})
        call("/v3/kv/compaction", {"revision": int(head["header"]["revision"]),
                                   "physical": True})

    @property
    def api_versions(self) -> list[str]:
        """The alpha/beta API versions enabled for the feature gates."""
        return runtime_config(self.feature_gates)

    def describe_gates(self) -> str:
        """The gates in force and the API versions they enabled, for people."""
        if not self.feature_gates:
            return "feature gates: defaults"
        versions = self.api_versions
        return (f"feature gates: {format_gates(self.feature_gates)}"
                + (f" (API versions enabled: {', '.join(versions)})" if versions else ""))

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes] + [s.pid for s in self.schedulers]

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> ControlPlane:
        if self.processes:
            raise DevClusterError("control plane already started")
        if self.apiserver_port is not None and not port_is_free(self.apiserver_port):
            raise DevClusterError(f"port {self.apiserver_port} on {LOOPBACK} is busy")
        binaries = self.binaries  # may build: before any process exists
        if self.controller_manager and binaries.kube_controller_manager is None:
            raise DevClusterError(
                "kube-controller-manager binary not available: set "
                "TEST_ASSET_KUBE_CONTROLLER_MANAGER or put it into $KUBEBUILDER_ASSETS, "
                "or start without it (`policyd dev up --no-controller-manager`, "
                "ControlPlane(controller_manager=False))"
            )
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="policyd-cp-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._progress(
            f"starting etcd, kube-apiserver"
            f"{', kube-controller-manager' if self.controller_manager else ''} {K8S_VERSION} "
            f"({_SOURCES.get(binaries.source, binaries.source)} binaries) in {self.workdir}"
        )
        if self.feature_gates:
            self._progress(self.describe_gates())
        fixed_port = self.apiserver_port
        for attempt in range(1, _START_ATTEMPTS + 1):
            try:
                self._start_once(binaries, fixed_port)
                return self
            except DevClusterError as err:
                self._stop_processes()
                race = any(m in err.details.lower() for m in _PORT_RACE_MARKERS)
                if not race or fixed_port is not None or attempt == _START_ATTEMPTS:
                    if self._own_workdir:
                        self._remove_workdir()
                    raise
                self._progress("a port was taken meanwhile; retrying with new ports")
            except BaseException:
                # Ctrl-C while waiting for readiness, or a bug: never leave half a cluster.
                self._stop_processes()
                if self._own_workdir:
                    self._remove_workdir()
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _start_once(self, binaries: Binaries, fixed_port: int | None) -> None:
        workdir = self._dir()
        etcd_client, etcd_peer, api_port = free_ports(3)
        self.etcd_port = etcd_client
        self.apiserver_port = fixed_port or api_port
        shutil.rmtree(workdir / "etcd-data", ignore_errors=True)
        self.certs = certs = generate_certs(workdir / "pki")

        peer = f"http://{LOOPBACK}:{etcd_peer}"
        etcd = ManagedProcess.start(
            "etcd",
            [
                str(binaries.etcd),
                "--name=policyd",
                f"--data-dir={workdir / 'etcd-data'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=policyd={peer}",
                # The data is thrown away with the cluster; fsync would only make every
                # API write wait for the disk.
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
            workdir / "etcd.log",
            detach=self.detach,
            cpus=self.cpus,
        )
        self.processes.append(etcd)

        def etcd_healthy() -> bool:
            status, body = http_get(f"{self.etcd_url}/health", None)
            return status == 200 and '"true"' in body

        wait_until(etcd, etcd_healthy, self.startup_timeout, "etcd")

        apiserver = ManagedProcess.start(
            "kube-apiserver",
            [
                str(binaries.kube_apiserver),
                f"--bind-address={LOOPBACK}",
                f"--advertise-address={LOOPBACK}",
                f"--secure-port={self.apiserver_port}",
                f"--etcd-servers={self.etcd_url}",
                f"--cert-dir={workdir / 'apiserver-certs'}",
                f"--tls-cert-file={certs.serving_cert}",
                f"--tls-private-key-file={certs.serving_key}",
                f"--client-ca-file={certs.ca_cert}",
                "--authorization-mode=RBAC",
                # ServiceAccount tokens: TokenRequest signs with the private key, the
                # authenticator verifies with the public one; the issuer is also the
                # default audience, so requested tokens authenticate as they are.
                f"--service-account-issuer={self.server}",
                f"--service-account-key-file={certs.sa_pub}",
                f"--service-account-signing-key-file={certs.sa_key}",
                # Room for the Services of big snapshots (kind uses the same range).
                "--service-cluster-ip-range=10.96.0.0/16",
                "--allow-privileged=true",
                # No serviceaccount controller creates the `default` ServiceAccount of
                # each namespace (the controller manager runs only the volume
                # controllers), and the ServiceAccount admission plugin would reject
                # every pod without it (envtest does the same). TaintNodesByCondition
                # taints each new Node not-ready until the node lifecycle controller,
                # which does not run here, sees its kubelet: every Node would stay
                # unschedulable.
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                # The endpoint reconciler would try (and fail validation) to publish
                # 127.0.0.1 as the endpoint of the `kubernetes` Service, forever.
                "--endpoint-reconciler-type=none",
                *runtime_config_args(self.feature_gates),
                *with_gates(self.extra_apiserver_args, self.feature_gates),
            ],
            workdir / "kube-apiserver.log",
            detach=self.detach,
            cpus=self.cpus,
        )
        self.processes.append(apiserver)
        wait_until(apiserver, self.ready, self.startup_timeout, "kube-apiserver")
        self._write_admin_kubeconfig()
        self._progress(f"kube-apiserver ready at {self.server}")
        if self.controller_manager:
            self._start_controller_manager(binaries)

    def _start_controller_manager(self, binaries: Binaries) -> None:
        """kube-controller-manager with the volume and resource claim controllers, ready
        when it returns.

        It runs as its own user (not the admin) with its controllers' bootstrap roles
        bound to it first, so that a controller never starts with a forbidden write.
        """
        certs = self._certs()
        kdir = self._dir() / "kube-controller-manager"
        kdir.mkdir(parents=True, exist_ok=True)
        controllers = controllers_for(self.feature_gates)
        for binding in role_bindings(controllers):
            self._admin_create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding)
        kubeconfig = write_kubeconfig(
            kdir / "kubeconfig",
            kubeconfig_dict(
                self.server,
                certs.ca_cert.read_bytes(),
                client_cert_pem=certs.controller_manager_cert.read_bytes(),
                client_key_pem=certs.controller_manager_key.read_bytes(),
                user="kube-controller-manager",
            ),
        )
        (port,) = free_ports(1)
        process = ManagedProcess.start(
            "kube-controller-manager",
            controller_manager_args(binaries.require_kube_controller_manager(), kubeconfig,
                                    port, controllers, self.feature_gates),
            kdir / "kube-controller-manager.log",
            detach=self.detach,
            cpus=self.cpus,
        )
        # In `processes`, after the API server: stopped before it (reverse start order).
        self.processes.append(process)
        self.kube_controller_manager = manager = KubeControllerManager(process, port,
                                                                       controllers)
        manager.wait_ready(self.startup_timeout)
        self._progress(
            f"kube-controller-manager ready (controllers: {', '.join(manager.controllers)})")

    def _admin_create(self, path: str, body: dict[str, Any]) -> None:
        """POST an object as the admin; one that exists already is fine (a restart)."""
        request = urllib.request.Request(
            self.server + path,
            method="POST",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10,
                                        context=self._admin_ssl_context()):
                pass
        except urllib.error.HTTPError as err:
            if err.code != 409:
                raise DevClusterError(
                    f"creating {path} failed: HTTP {err.code}",
                    details=err.read().decode(errors="replace"),
                ) from err

    def _admin_ssl_context(self) -> ssl.SSLContext:
        certs = self._certs()
        context = ssl.create_default_context(cafile=str(certs.ca_cert))
        context.load_cert_chain(str(certs.admin_cert), str(certs.admin_key))
        return context

    def _certs(self) -> CertFiles:
        if self.certs is None:
            raise DevClusterError("control plane not started")
        return self.certs

    def ready(self) -> bool:
        """Whether kube-apiserver answers /readyz with ok (all post-start hooks done)."""
        status, body = http_get(f"{self.server}/readyz", self._admin_ssl_context())
        return status == 200 and body.strip() == "ok"

    def _write_admin_kubeconfig(self) -> None:
        certs = self._certs()
        write_kubeconfig(
            self.kubeconfig_path,
            kubeconfig_dict(
                self.server,
                certs.ca_cert.read_bytes(),
                client_cert_pem=certs.admin_cert.read_bytes(),
                client_key_pem=certs.admin_key.read_bytes(),
            ),
        )

    def write_token_kubeconfig(self, path: Path, token: str, user: str = "token-user") -> Path:
        """A kubeconfig authenticating with a bearer token (e.g. a ServiceAccount's)."""
        return write_kubeconfig(
            path,
            kubeconfig_dict(
                self.server, self._certs().ca_cert.read_bytes(), token=token, user=user
            ),
        )

    def api_client(self) -> Any:
        """A `kubernetes.client.ApiClient` using the admin kubeconfig."""
        return api_client_from(self.kubeconfig_path)

    def start_kube_scheduler(
        self,
        config_path: Path | None = None,
        *,
        extra_args: Sequence[str] = (),
        wait: bool = True,
        timeout: float = 60.0,
        cpus: frozenset[int] | None = None,
    ) -> KubeScheduler:
        """Start kube-scheduler against this control plane, ready when it returns.

        `config_path` is a KubeSchedulerConfiguration (YAML or JSON); None means the
        default profile. Its `clientConnection.kubeconfig` is pointed at this control
        plane's admin kubeconfig and leader election is switched off in a copy kept in
        the work dir: with ``--config``, kube-scheduler ignores ``--kubeconfig``.
        `cpus` pins it to those CPUs (None: wherever its parent may run).
        It runs with the control plane's feature gates; a `--feature-gates` in
        `extra_args` is merged into them, its settings winning per name (e.g. a
        kube-scheduler with GangScheduling off beside an API server with it on), into
        the one flag its command line shows.
        """
        binary = self.binaries.require_kube_scheduler()
        args = with_gates(extra_args, self.feature_gates)  # a bad flag: before any start
        _, gates = split_gate_args(args)
        self._scheduler_count += 1
        sdir = self._dir() / f"kube-scheduler-{self._scheduler_count}"
        sdir.mkdir(parents=True, exist_ok=True)
        config = read_scheduler_config(config_path)
        config.setdefault("clientConnection", {})["kubeconfig"] = str(self.kubeconfig_path)
        config.setdefault("leaderElection", {})["leaderElect"] = False
        effective = sdir / "config.yaml"
        effective.write_text(json.dumps(config, indent=2) + "\n")
        (port,) = free_ports(1)
        process = ManagedProcess.start(
            "kube-scheduler",
            [
                str(binary),
                f"--config={effective}",
                "--leader-elect=false",
                f"--bind-address={LOOPBACK}",
                f"--secure-port={port}",
                # No delegated authentication of the scheduler's own endpoints (that
                # would need kube-apiserver's front-proxy CA); instead health and
                # metrics are open to anyone on loopback, for benchmarks to scrape.
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
                *args,
            ],
            sdir / "kube-scheduler.log",
            detach=self.detach,
            cpus=cpus,
        )
        scheduler = KubeScheduler(process, effective, port, gates)
        self.schedulers.append(scheduler)
        if wait:
            try:
                scheduler.wait_ready(timeout)
            except DevClusterError:
                scheduler.stop()
                raise
        return scheduler

    def stop(self, *, remove_workdir: bool | None = None) -> None:
        """Stop schedulers, kube-controller-manager, kube-apiserver and etcd (in that
        order); idempotent.

        The work dir is removed when it was a temporary one, or when `remove_workdir`.
        """
        try:
            self._stop_processes()
        finally:
            if remove_workdir if remove_workdir is not None else self._own_workdir:
                self._remove_workdir()

    def _stop_processes(self) -> None:
        errors: list[BaseException] = []
        # Reverse start order: clients first, etcd last, so nothing logs a lost backend.
        for proc in [s.process for s in reversed(self.schedulers)] + self.processes[::-1]:
            try:
                proc.stop()
            except BaseException as err:  # keep stopping the others, report afterwards
                errors.append(err)
        self.schedulers.clear()
        self.processes.clear()
        self.kube_controller_manager = None
        if errors:
            raise errors[0]

    def _remove_workdir(self) -> None:
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- detached clusters ------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "kubernetes": K8S_VERSION,
            "workdir": str(self._dir()),
            "server": self.server,
            "etcd": self.etcd_url,
            "apiserver_port": self.apiserver_port,
            "etcd_port": self.etcd_port,
            "kubeconfig": str(self.kubeconfig_path),
            "feature_gates": self.feature_gates,
            "controller_manager_port": (
                self.kube_controller_manager.port if self.kube_controller_manager else None
            ),
            "processes": [p.to_state() for p in self.processes]
            + [s.process.to_state() for s in self.schedulers],
        }

    def save_state(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_state(), indent=2) + "\n")
        tmp.replace(path)  # atomic: a concurrent `status` never reads half a file
        return path

    @classmethod
    def from_state(cls, path: Path) -> ControlPlane:
        """A handle on a detached control plane saved with `save_state`."""
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise DevClusterError(f"{path}: cannot read dev cluster state: {err}") from err
        if data.get("version") != STATE_VERSION:
            raise DevClusterError(f"{path}: unknown state version {data.get('version')!r}")
        workdir = Path(data["workdir"])
        # A state written before gates were recorded has none.
        cp = cls(workdir, detach=True, apiserver_port=int(data["apiserver_port"]),
                 feature_gates=data.get("feature_gates") or {})
        cp._own_workdir = False
        cp.etcd_port = int(data["etcd_port"])
        cp.certs = CertFiles.in_directory(workdir / "pki")
        cp.controller_manager = False
        for entry in data["processes"]:
            proc = ManagedProcess.from_state(entry)
            if proc.name == "kube-scheduler":
                cp.schedulers.append(KubeScheduler(proc, Path(), 0))
                continue
            cp.processes.append(proc)
            if proc.name == "kube-controller-manager":
                cp.controller_manager = True
                cp.kube_controller_manager = KubeControllerManager(
                    proc, int(data.get("controller_manager_port") or 0))
        return cp

    def safe_ready(self) -> bool:
        """`ready()` that is False instead of raising when certificates are gone."""
        with contextlib.suppress(OSError, ssl.SSLError, DevClusterError):
            return self.ready()
        return False


def read_scheduler_config(path: Path | None) -> dict[str, Any]:
    """The KubeSchedulerConfiguration at `path` as a dict (None: the default profile)."""
    if path is None:
        return {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
        }
    docs = read_documents(path)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise DevClusterError(f"{path}: expected one KubeSchedulerConfiguration document")
    config: dict[str, Any] = docs[0]
    if config.get("kind") != "KubeSchedulerConfiguration":
        raise DevClusterError(
            f"{path}: kind is {config.get('kind')!r}, expected KubeSchedulerConfiguration"
        )
    return config
