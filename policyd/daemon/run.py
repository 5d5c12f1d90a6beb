"""Assemble and run the daemon: validate, connect, watch, elect, schedule, shut down.

Order matters: the profile and policies are validated completely before a connection
is even configured, so an invalid configuration never sends a request. With
`clusterPolicies: true` one request may come first: the profile is checked, and only
when every problem is a plugin name no file provides (a SchedulingPolicy object may)
or there is none, the cluster's SchedulingPolicy objects are listed once and the
profile validated again with them, so a profile may name cluster policies and starts
with them in effect (`startup_policies.py`). Constructing a Daemon sends no request:
the caller connects (`connect`), and that list is the first thing `start()` does,
before anything is served or watched. Shutdown (stop event, set by SIGTERM in the
CLI): stop taking pods, finish in-flight binds within the grace period, release the
lease, stop the watches, return 0.

This module holds the options and the Daemon's life cycle (build, start, reload,
shut down); the watches are wired in `informers.py`, /healthz's verdict is
`health.py`'s, the HTTP(S) endpoints are bound in `endpoints.py`.
"""

from __future__ import annotations

import gc
import logging
import os
import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from policyd.clock import REAL_CLOCK, Clock
from policyd.daemon import debug
from policyd.daemon import loaded_profile as daemon_config
from policyd.daemon.cluster_policies import ClusterPolicies, PolicySync
from policyd.daemon.coordinator import Scheduler
from policyd.daemon.endpoints import bind_endpoints, start_serving
from policyd.daemon.event_recorder import EventSink
from policyd.daemon.freshness import CacheFreshness
from policyd.daemon.health import health_problems
from policyd.daemon.informers import cluster_watches, policy_informer
from policyd.daemon.metrics import (
    RELOAD_APPLIED,
    RELOAD_REJECTED,
    RELOAD_RESTART_REQUIRED,
    HealthServer,
    Metrics,
)
from policyd.daemon.pod_group_status import PodGroupStatusController
from policyd.daemon.pod_resources import resources_page
from policyd.daemon.policy_status import StatusWriter
from policyd.daemon.reload import ConfigWatcher
from policyd.daemon.reports import DEFAULT_INTERVAL_S as DEFAULT_REPORTS_INTERVAL_S
from policyd.daemon.reports import ReportWriter
from policyd.daemon.serving import DEFAULT_ALWAYS_ALLOW_PATHS, DEFAULT_SECURE_PORT
from policyd.daemon.serving_cert import ServingCertificate
from policyd.daemon.startup_policies import load_with_cluster_policies, wait_until_served
from policyd.daemon.thread_names import named
from policyd.engine.openreports import DEFAULT_MAX_RESULTS
from policyd.errors import EXIT_OK
from policyd.framework.runtime import Framework
from policyd.kube import api
from policyd.kube.client import (
    REQUEST_READ_TIMEOUT,
    WATCH_SILENCE_TIMEOUT,
    ApiError,
    ConnectionSettings,
    KubeClient,
)
from policyd.kube.informer import Informer
from policyd.kube.leaderelection import LeaderElector
from policyd.nodemetrics import attach_metrics
from policyd.plugins.names import COSCHEDULING

log = logging.getLogger("policyd.daemon")


@dataclass(slots=True)
class RunOptions:
    config: Path
    kubeconfig: str | None = None
    context: str | None = None
    # Secure serving (kube-scheduler's flags): HTTPS on bind_address:secure_port (0:
    # off), delegated authentication/authorization except for always_allow_paths.
    bind_address: str = "0.0.0.0"
    secure_port: int = DEFAULT_SECURE_PORT
    always_allow_paths: tuple[str, ...] = DEFAULT_ALWAYS_ALLOW_PATHS
    tls_cert_file: Path | None = None
    tls_private_key_file: Path | None = None
    # Plain HTTP, no authentication: only when asked for (HOST:PORT; no host: loopback).
    metrics_bind_address: str = ""
    leader_elect: bool | None = None  # None: the profile's leaderElection.leaderElect
    lease_namespace: str | None = None
    lease_name: str | None = None
    identity: str | None = None
    policies: list[Path] = field(default_factory=list)
    verbosity: int = 0
    reload_interval: float = 2.0
    shutdown_grace: float = 30.0
    binders: int | None = None  # None: the profile's parallelism
    # --feature-gates, each setting over the profile's `featureGates` (checked by
    # `features.check_settings` when parsed).
    feature_gates: tuple[tuple[str, bool], ...] = ()
    # --cluster-policies: the cluster's SchedulingPolicy objects run whatever the
    # profile says (a KubeSchedulerConfiguration cannot say `clusterPolicies: true`).
    cluster_policies: bool = False
    qps: float | None = None
    burst: int | None = None
    # The audit's OpenReports (daemon/reports.py): seconds between rounds (0: off),
    # and the most results one report holds.
    reports_interval: float = DEFAULT_REPORTS_INTERVAL_S
    reports_max_results: int = DEFAULT_MAX_RESULTS
    watch_timeout: float = 300.0
    # How long a reply / a watch may stay silent before its connection is taken for
    # dead (not flags: tests shorten them to keep a frozen-proxy run short).
    request_read_timeout: float = REQUEST_READ_TIMEOUT
    watch_silence: float = WATCH_SILENCE_TIMEOUT


class Daemon:
    """The running scheduler. `start()` after `load_config()`; `stop()` from any thread."""

    # The SchedulingPolicy watch, with `clusterPolicies: true` only.
    policy_informer: Informer | None = None
    # --tls-cert-file's reloader, when a certificate is given.
    serving_cert: ServingCertificate | None = None
    # Runs once, the first time the caches are synced.
    _on_first_sync: Callable[[], None] | None = None

    def __init__(self, options: RunOptions, loaded: daemon_config.LoadedConfig,
                 client: KubeClient, *, clock: Clock = REAL_CLOCK,
                 on_first_sync: Callable[[], None] | None = None) -> None:
        """Builds every part, sends nothing: `client` (see `connect`) is used from
        `start()` on. `on_first_sync` runs once, when the caches are first synced:
        `policyd run` passes `freeze_startup_heap`, a choice for the whole process that
        a process embedding a Daemon (the tests) makes for itself."""
        self.options = options
        # Every loop below reads and waits on this one clock.
        self.clock = clock
        self.loaded = loaded
        s = loaded.settings
        # What the objects built below were built from: a reload compares against these.
        self.running = s
        self.flag_overrides = flag_overrides(options)
        # The pod this daemon runs in (downward API), for events when there is no Lease.
        self.own_pod = own_pod_ref(os.environ)
        self.metrics = Metrics()
        self.client = client
        # Cluster policies: listed once by start(), so the first frameworks run them.
        self.cluster: ClusterPolicies | None = None
        self.crd_served = False
        if s.cluster_policies:
            self.cluster = ClusterPolicies()
        le_settings = s.leader_election(options.identity, options.lease_namespace)
        if options.lease_name:
            le_settings = replace(le_settings, name=options.lease_name)
        self.le_settings = le_settings
        self.identity = le_settings.identity
        self.leader_elect = s.leader_elect if options.leader_elect is None \
            else options.leader_elect
        self.stop_event = threading.Event()
        # Events get their own QPS budget (kube-scheduler's separate event client): a
        # flood of them must not delay binds waiting for tokens.
        self.events = EventSink(self.client.with_own_limiter(), self.metrics, self.identity,
                                clock=clock)
        self.elector: LeaderElector | None = None
        # Each term begins with fresh lists of every cache (see daemon.freshness).
        self.freshness = CacheFreshness(self.informers, clock=clock.now)
        if self.leader_elect:
            self.elector = LeaderElector(
                self.client, le_settings, on_started=self._became_leader,
                on_stopped=lambda: self._leader_gauge(0), clock=clock.now)
            is_leader = self.elector.is_leader
            # As client-go's elector: 0 from the start, while this replica stands by.
            self._leader_gauge(0)
        else:
            # No election, no gauge: kube-scheduler serves none without one either.

            def is_leader() -> bool:
                return True
        self.scheduler = Scheduler(
            self.client, loaded.frameworks, metrics=self.metrics, events=self.events,
            is_leader=is_leader, initial_backoff=s.pod_initial_backoff,
            max_backoff=s.pod_max_backoff, binders=options.binders or s.parallelism,
            verbosity=options.verbosity, clock=clock,
            gates=loaded.feature_gates)
        # scheduler-plugins' PodGroup status, as its controller writes it, while a
        # profile enables Coscheduling (daemon/pod_group_status.py).
        self.pod_group_status = PodGroupStatusController(
            self.client, is_leader=is_leader, enabled=self._coscheduling_enabled, clock=clock)
        # The audit's findings as OpenReports, by the leader, when their CRDs are served.
        self.reports = ReportWriter(
            self.client.with_own_limiter(), self.scheduler.state, is_leader=is_leader,
            interval=options.reports_interval, max_results=options.reports_max_results,
            clock=clock) if options.reports_interval > 0 else None
        watches = cluster_watches(self.client, self.scheduler.handlers, self.metrics,
                                  options.watch_timeout, self.pod_group_status)
        self.nodes, self.pods, self.extra_informers = \
            watches.nodes, watches.pods, watches.extra
        # Node metrics for policy `metric` scores: providers refresh a cache in the
        # background; compiled policies only read it.
        self.node_metrics = _metrics_manager(self.scheduler.nodes_snapshot, self.metrics,
                                             clock)
        self._bind_node_metrics(loaded.frameworks)
        self.watcher = ConfigWatcher(loaded, apply=self._apply_config,
                                     rejected=self._config_rejected,
                                     interval=options.reload_interval,
                                     extra_policies=options.policies, clock=clock,
                                     cluster=self.cluster,
                                     apply_cluster=self._apply_cluster_policies,
                                     cluster_rejected=self._cluster_policies_rejected)
        self.policy_status: StatusWriter | None = None
        self.policy_sync: PolicySync | None = None
        if self.cluster is not None:
            self.policy_status = StatusWriter(self.client, self.events, self.is_leader,
                                              clock=clock)
            self.policy_sync = PolicySync(self.cluster, recombine=self.watcher.recombine,
                                          submit=self.policy_status.submit,
                                          is_leader=self.is_leader, clock=clock)
            self.policy_informer = policy_informer(self.client, self.policy_sync,
                                                   self.metrics, options.watch_timeout)
        self.http: HealthServer | None = None  # plain HTTP (--metrics-bind-address)
        self.https: HealthServer | None = None  # secure serving (--secure-port)
        self._auth_client: KubeClient | None = None
        self._threads: list[threading.Thread] = []
        self._elector_stop = threading.Event()
        self._scheduler_stop = threading.Event()
        self._on_first_sync = on_first_sync

    # -- health -------------------------------------------------------------------------

    def informers(self) -> list[Informer]:
        return [self.nodes, self.pods, *self.extra_informers]

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers())

    def _leader_gauge(self, value: int) -> None:
        """leader_election_master_status{name}, the lease's name as client-go labels it."""
        self.metrics.leader.labels(self.le_settings.name).set(value)

    def _became_leader(self) -> None:
        assert self.elector is not None
        self._leader_gauge(1)
        self.freshness.begin(self.elector.term)
        if self.policy_informer is not None:
            # A standby's watch may lag: the statuses a new leader writes come from
            # a fresh list.
            self.policy_informer.request_relist()

    def ready_to_schedule(self) -> bool:
        """The scheduling loop's gate: caches synced and, with leader election,
        listed again since this term began (a standby's watch may have been stuck)."""
        if not self.synced():
            return False
        if self._on_first_sync is not None:
            hook, self._on_first_sync = self._on_first_sync, None
            hook()
        return self.elector is None or self.freshness.confirmed(self.elector.term)

    def is_leader(self) -> bool:
        return self.elector.is_leader() if self.elector is not None else True

    def _coscheduling_enabled(self) -> bool:
        return any(pl.name == COSCHEDULING for fw in self.scheduler.frameworks.values()
                   for pl in fw.permit_plugins)

    def health_problems(self) -> list[str]:
        """Why this process should be restarted, for /healthz (empty: healthy; see
        `health.health_problems`). Shutting down, the threads end on purpose."""
        if self.stop_event.is_set():
            return []
        return health_problems(self._threads,
                               self.scheduler.clock.now() - self.scheduler.heartbeat,
                               self.elector)

    # -- cluster policies -------------------------------------------------------------

    def _start_cluster_policies(self) -> None:
        """Start with the cluster's SchedulingPolicy objects in effect (see
        `startup_policies.load_with_cluster_policies`): the frameworks built from the
        files alone give way to those, before any pod is seen."""
        assert self.cluster is not None
        loaded, self.crd_served = load_with_cluster_policies(
            self.client, self.cluster, self.loaded, self.options.config,
            self.options.policies, self.clock)
        if loaded is self.loaded:
            return
        self.loaded = self.watcher.current = loaded
        self._bind_node_metrics(loaded.frameworks)
        self.scheduler.set_frameworks(loaded.frameworks)

    def _watch_cluster_policies(self, stop: threading.Event) -> None:
        """The SchedulingPolicy informer, once the resource is served. Not part of
        `synced`/readiness: scheduling never waits for cluster policies (those listed
        at start-up already run)."""
        assert self.policy_informer is not None
        if not self.crd_served:
            if not wait_until_served(self.client, stop, self.clock):
                return
            self.crd_served = True
        if not stop.is_set():
            self.policy_informer.run(stop)

    # -- reload -------------------------------------------------------------------------

    def _bind_node_metrics(self, frameworks: dict[str, Framework]) -> None:
        if self.node_metrics is None:
            return
        attach_metrics(frameworks.values(), self.node_metrics.cache)

    def _debug_pages(self) -> dict[str, Callable[[], Any]]:
        return {"/debug/queue": self.scheduler.debug_queue,
                "/debug/metrics-cache": partial(debug.metrics_cache_view, self.node_metrics),
                # kube-scheduler's /configz: the configuration running now (a reload's).
                "/configz": lambda: self.loaded.configz}

    def _apply_config(self, loaded: daemon_config.LoadedConfig) -> None:
        """Switch to `loaded`; if any step fails, switch back to the running
        configuration and re-raise, so the watcher reports a rejected reload."""
        self._switch_or_restore(loaded)
        pending = daemon_config.needs_restart(self.running, loaded.settings,
                                              self.flag_overrides)
        if not pending:
            self.metrics.config_reloads.labels(RELOAD_APPLIED).inc()
            return
        # Compared with what runs, not with the previous reload: as long as the file
        # asks for something the process cannot do without a restart, each reload
        # says so again.
        self.metrics.config_reloads.labels(RELOAD_RESTART_REQUIRED).inc()
        message = (f"configuration reloaded from {loaded.path}, but these fields keep "
                   "their running values until policyd restarts: " + ", ".join(pending))
        log.warning("%s", message)
        self._config_event("RestartRequired", message)

    def _apply_cluster_policies(self, loaded: daemon_config.LoadedConfig) -> None:
        """Switch to frameworks rebuilt for changed cluster policies (the files and
        settings are the running ones); back to the running ones if a step fails."""
        self._switch_or_restore(loaded)

    def _switch_or_restore(self, loaded: daemon_config.LoadedConfig) -> None:
        """Run `loaded`; if any step fails, switch back to the running configuration
        and re-raise (the caller reports the rejection)."""
        previous = self.loaded
        try:
            self._switch_config(loaded)
        except Exception:
            self._switch_config(previous)
            raise
        self.loaded = loaded

    def _cluster_policies_rejected(self, message: str) -> None:
        self._config_event("ClusterPoliciesNotApplied",
                           "cluster policy change not applied, the running policies keep "
                           "scheduling: " + " ".join(
                               line.strip() for line in message.splitlines()))

    def _switch_config(self, loaded: daemon_config.LoadedConfig) -> None:
        if self.node_metrics is not None:
            self.node_metrics.apply(loaded.metrics_providers)
        self._bind_node_metrics(loaded.frameworks)
        self.scheduler.set_frameworks(loaded.frameworks)
        s = loaded.settings
        self.scheduler.queue.set_backoff(s.pod_initial_backoff, s.pod_max_backoff)

    def _config_rejected(self, message: str) -> None:
        self.metrics.config_reloads.labels(RELOAD_REJECTED).inc()
        first = message.splitlines()
        self._config_event("InvalidConfiguration",
                           "configuration change rejected, previous one still in use: "
                           + " ".join(line.strip() for line in first))

    def _config_event(self, reason: str, message: str) -> None:
        """A Warning event about the configuration, on an object that exists: the
        Lease with leader election, else this daemon's own Pod when the downward API
        names it (POD_NAME, POD_NAMESPACE), else none (the log line is all there is)."""
        if self.elector is not None:
            ref: api.ObjectRef | None = api.lease_ref(
                self.le_settings.namespace, self.le_settings.name, self.elector.lease_uid)
        else:
            ref = self.own_pod
        if ref is not None:
            self.events.event(ref, "Warning", reason, message, "Reload", "policyd")

    # -- lifecycle ------------------------------------------------------------------------

    def _thread(self, target: Callable[..., None], name: str, *args: Any) -> None:
        t = threading.Thread(target=named(target), args=args, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def _serve(self) -> None:
        """Bind and start the endpoints the flags ask for (see `endpoints.py`)."""
        pages = dict(before_scrape=self.scheduler.update_gauges, debug=self._debug_pages(),
                     health=self.health_problems,
                     resources=resources_page(self.scheduler.pods_snapshot))
        bound = bind_endpoints(self.options, self.metrics, self.synced, pages, self.client,
                               self.clock, self._serve_with)
        self.http, self.https = bound.http, bound.https
        self._auth_client, self.serving_cert = bound.auth_client, bound.serving_cert
        start_serving(bound, self.options,
                      "/metrics, /metrics/resources, /healthz, /readyz, /livez, "
                      + ", ".join(self._debug_pages()))

    def _serve_with(self, tls: ssl.SSLContext) -> None:
        """The serving certificate's reloader: new handshakes use `tls`."""
        if self.https is not None:
            self.https.server.tls = tls

    def start(self) -> None:
        """List the cluster policies (with `clusterPolicies: true`), serve, then start
        every loop; raises, before any thread runs, what makes the daemon unable to."""
        if self.cluster is not None:
            self._start_cluster_policies()
        self._serve()
        if self.serving_cert is not None:
            self._thread(self.serving_cert.run, "policyd-serving-cert", self.stop_event)
        self.events.start()
        if self.node_metrics is not None and self.loaded.metrics_providers:
            self.node_metrics.apply(self.loaded.metrics_providers)
        log.info("policyd %s starting: profiles %s, API server %s, leader election %s, "
                 "feature gates %s",
                 self.identity, ", ".join(self.loaded.frameworks), self.client.host,
                 f"on ({self.le_settings.namespace}/{self.le_settings.name})"
                 if self.leader_elect else "off",
                 self.loaded.feature_gates.describe())
        for inf in self.informers():
            self._thread(inf.run, f"policyd-watch-{inf.name}", self.stop_event)
        if self.elector is not None:
            self._thread(self.elector.run, "policyd-leader", self._elector_stop)
        self._thread(self.scheduler.run, "policyd-scheduler", self._scheduler_stop,
                     self.ready_to_schedule)
        self._thread(self.watcher.run, "policyd-reload", self.stop_event)
        self._thread(self.pod_group_status.run, "policyd-podgroup-status", self.stop_event)
        if self.reports is not None:
            self._thread(self.reports.run, "policyd-reports", self.stop_event)
        if self.policy_sync is not None and self.policy_status is not None:
            self._thread(self._watch_cluster_policies, "policyd-watch-schedulingpolicies",
                         self.stop_event)
            self._thread(self.policy_sync.run, "policyd-cluster-policies", self.stop_event)
            self._thread(self.policy_status.run, "policyd-policy-status", self.stop_event)

    def wait(self) -> None:
        self.stop_event.wait()

    def stop(self) -> None:
        self.stop_event.set()

    def shutdown(self) -> int:
        """Graceful stop; returns the exit code (0)."""
        log.info("shutting down: no new pods; finishing in-flight binds (grace %.0fs)",
                 self.options.shutdown_grace)
        self._scheduler_stop.set()
        self.stop_event.set()
        if not self.scheduler.shutdown(self.options.shutdown_grace):
            log.warning("some binds did not finish within the grace period; their pods "
                        "stay pending for the next leader")
        self._elector_stop.set()  # the elector's run() releases the lease on its way out
        for t in self._threads:
            if t.name == "policyd-leader":
                t.join(10.0)
        for inf in self.informers():
            inf.stop()
        if self.policy_informer is not None:
            self.policy_informer.stop()
        if self.node_metrics is not None:
            self.node_metrics.stop()
        self.events.stop(5.0)
        for t in self._threads:
            t.join(2.0)
        for server in (self.https, self.http):
            if server is not None:
                server.stop()
        if self._auth_client is not None:
            self._auth_client.close()
        self.client.close()
        log.info("stopped")
        return EXIT_OK


def freeze_startup_heap() -> None:
    """Move everything alive once the caches first synced (the listed cluster, the
    compiled profiles, the imported modules) out of the cyclic collector's reach.

    Those objects live as long as the process, yet every full collection would walk
    them again: in the 5000-node capacity run, the collections of the scheduling
    window took 0.96 s of CPU without this and 0.15 s with it (measured with
    gc.callbacks). The cyclic garbage of start-up is collected first, so nothing
    unreachable is kept; frozen objects that die later are still freed by their
    reference counts, and everything allocated afterwards is collected as usual."""
    gc.collect()
    gc.freeze()
    log.info("caches synced: %d objects of the start-up heap frozen out of the cyclic "
             "collector (gc.freeze)", gc.get_freeze_count())


def flag_overrides(options: RunOptions) -> frozenset[str]:
    """The runtime settings a command-line flag sets instead of the profile."""
    flags = {"kubeconfig": options.kubeconfig, "qps": options.qps, "burst": options.burst,
             "parallelism": options.binders, "leader_elect": options.leader_elect,
             "lease_namespace": options.lease_namespace, "lease_name": options.lease_name}
    return frozenset(name for name, value in flags.items() if value is not None)


def own_pod_ref(env: Mapping[str, str]) -> api.ObjectRef | None:
    """This daemon's Pod, from the downward API variables the deployment sets
    (POD_NAME, POD_NAMESPACE, optionally POD_UID); None outside such a pod."""
    name, namespace = env.get("POD_NAME", ""), env.get("POD_NAMESPACE", "")
    if not name or not namespace:
        return None
    return api.pod_ref(namespace, name, env.get("POD_UID", ""))


def _metrics_manager(nodes: Callable[[], list[Any]], metrics: Metrics, clock: Clock
                     ) -> Any:
    """A `policyd.nodemetrics.manager.MetricsManager` sharing our Prometheus registry,
    or None in a build without node metrics."""
    try:
        from policyd.nodemetrics.manager import MetricsManager
    except ImportError:
        return None
    return MetricsManager(nodes, registry=metrics.registry, clock=clock)


def load_config(options: RunOptions) -> daemon_config.LoadedConfig:
    """Validate everything before any connection exists (raises InvalidConfig). With
    `clusterPolicies: true` (or --cluster-policies), plugin names no file provides are
    left for the Daemon, which lists the cluster's policies and validates again."""
    return daemon_config.load(options.config, options.policies, cluster_pending=True,
                              gate_overrides=options.feature_gates,
                              cluster_policies_flag=options.cluster_policies)


def connect(options: RunOptions, settings: daemon_config.RuntimeSettings) -> KubeClient:
    """The daemon's client: the flags' connection settings over the profile's. Reads
    the kubeconfig (and its credentials), sends no request."""
    return KubeClient.connect(ConnectionSettings(
        kubeconfig=options.kubeconfig or settings.kubeconfig, context=options.context,
        qps=options.qps if options.qps is not None else settings.qps,
        burst=options.burst if options.burst is not None else settings.burst,
        timeout=settings.timeout, read_timeout=options.request_read_timeout,
        watch_silence=options.watch_silence))


def run(options: RunOptions, stop: threading.Event | None = None) -> int:
    """Run until `stop` is set (or forever); returns the exit code."""
    loaded = load_config(options)
    daemon = Daemon(options, loaded, connect(options, loaded.settings))
    try:
        daemon.start()
        if stop is not None:
            stop.wait()
        else:
            daemon.wait()
    except ApiError as exc:
        log.error("API error: %s", exc)
    return daemon.shutdown()
