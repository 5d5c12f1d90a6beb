"""The profile as the daemon reads it: typed settings with every default applied.

`validate.validate` builds a `PolicydConfig` from the document after
checking it; conversion here never fails, whatever the document holds (a value of the
wrong type or out of range falls back to its default, since validation has already
reported it), so callers always get a complete object. Field names are Python's, each
documented with the YAML field it comes from.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from policyd.config import profile_schema as s
from policyd.features import DEFAULTS, FeatureGates, check_setting
from policyd.model.duration import parse_duration as parse_duration  # re-exported


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    """`leaderElection`: only the replica holding the Lease schedules."""

    leader_elect: bool = True
    """`leaderElect`: run leader election at all (false: this replica always schedules)."""
    lease_duration: float = 15.0
    """`leaseDuration`, in seconds: how long others wait before taking the lease over."""
    renew_deadline: float = 10.0
    """`renewDeadline`, in seconds: the leader stops leading if it cannot renew by then."""
    retry_period: float = 2.0
    """`retryPeriod`, in seconds: wait between attempts to acquire or renew."""
    resource_lock: str = s.DEFAULT_RESOURCE_LOCK
    """`resourceLock`: always "leases" (coordination.k8s.io/v1 Lease)."""
    resource_name: str = s.DEFAULT_RESOURCE_NAME
    """`resourceName`: the Lease's name."""
    resource_namespace: str = s.DEFAULT_RESOURCE_NAMESPACE
    """`resourceNamespace`: the Lease's namespace."""


@dataclass(frozen=True, slots=True)
class ClientConnectionConfig:
    """`clientConnection`: the API client's rate limits and timeouts."""

    qps: float = s.DEFAULT_QPS
    """`qps`: sustained queries per second to the API server."""
    burst: int = s.DEFAULT_BURST
    """`burst`: requests allowed above qps in a burst."""
    timeout: float = 30.0
    """`timeout`, in seconds: the timeout of every API call."""
    kubeconfig: Path | None = None
    """`kubeconfig`, resolved against the profile's directory; None: use the command
    line, $KUBECONFIG, in-cluster config or ~/.kube/config."""


@dataclass(frozen=True, slots=True)
class ProfileConfig:
    """One entry of `profiles`."""

    scheduler_name: str = s.DEFAULT_SCHEDULER_NAME
    """`schedulerName`: pods with this spec.schedulerName use this profile."""
    percentage_of_nodes_to_score: int | None = None
    """`percentageOfNodesToScore` of this profile; None: the top-level value."""
    plugins: Mapping[str, Any] = field(default_factory=dict)
    """`plugins` as written (per extension point enabled/disabled); the expansion into
    plugin lists is the Framework's."""
    plugin_config: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)
    """`pluginConfig`: plugin name -> args (None: the plugin's defaults)."""


@dataclass(frozen=True, slots=True)
class MetricQuery:
    """One entry of a prometheus provider's `metrics`."""

    name: str
    """`name`: the metric name score rules use (`metric: {name: ...}`)."""
    query: str
    """`query`: PromQL giving one series per node (an instant vector)."""
    allow_negative: bool = False
    """`allowNegative`: keep negative values (default: dropped as meaningless)."""


@dataclass(frozen=True, slots=True)
class MetricsProviderConfig:
    """One entry of `metricsProviders`: where node metric values come from.

    Common fields first; the rest belong to one kind each (validation rejects fields of
    another kind)."""

    name: str
    """`name`: the provider's name (metrics labels, logs)."""
    kind: str
    """`kind`: prometheus, probe or nodeAnnotation."""
    refresh_interval: float = s.DEFAULT_METRICS_REFRESH_SECONDS
    """`refreshInterval`, in seconds: time between refreshes while healthy."""
    timeout: float = s.DEFAULT_METRICS_TIMEOUT_SECONDS
    """`timeout`, in seconds: each request or probe gives up after this."""
    max_age: float = 3 * s.DEFAULT_METRICS_REFRESH_SECONDS
    """`maxAge`, in seconds: a value older than this counts as missing (default 3 x
    refreshInterval)."""
    max_backoff: float = s.DEFAULT_METRICS_MAX_BACKOFF_SECONDS
    """`maxBackoff`, in seconds: the longest wait between attempts while failing."""
    # prometheus
    url: str = ""
    """`url`: the Prometheus base URL (prometheus)."""
    node_label: str = s.DEFAULT_METRICS_NODE_LABEL
    """`nodeLabel`: the series label naming the node (prometheus)."""
    bearer_token_file: Path | None = None
    """`bearerTokenFile`, resolved against the profile's directory, read before each
    request (prometheus)."""
    queries: tuple[MetricQuery, ...] = ()
    """`metrics` (prometheus)."""
    # probe and nodeAnnotation
    metric: str = ""
    """`metric`: the one metric name this provider fills (probe, nodeAnnotation)."""
    port: int = 0
    """`port`: TCP port to connect to (probe)."""
    address_from: str = "internalIP"
    """Where the probe's address comes from: `address.internalIP`, `address.label` or
    `address.annotation` (probe)."""
    address_key: str = ""
    """The label or annotation key holding the address (probe)."""
    workers: int = s.DEFAULT_METRICS_PROBE_WORKERS
    """`workers`: concurrent probes at most (probe)."""
    annotation: str = ""
    """`annotation`: the Node annotation holding the number (nodeAnnotation)."""
    allow_negative: bool = False
    """`allowNegative` (nodeAnnotation)."""

    @property
    def metric_names(self) -> tuple[str, ...]:
        if s.METRICS_PROVIDER_KINDS[self.kind].metric_list:
            return tuple(q.name for q in self.queries)
        return (self.metric,) if self.metric else ()


@dataclass(frozen=True, slots=True)
class PolicydConfig:
    """A whole PolicydConfiguration file with defaults applied."""

    path: Path
    """The profile file itself (reloads watch it)."""
    profiles: tuple[ProfileConfig, ...] = (ProfileConfig(),)
    """`profiles`; default: one profile named "policyd" with the default plugins."""
    percentage_of_nodes_to_score: int = 0
    """`percentageOfNodesToScore`: 0 means adaptive, as upstream."""
    pod_initial_backoff_seconds: int = s.DEFAULT_POD_INITIAL_BACKOFF_SECONDS
    """`podInitialBackoffSeconds`: first backoff of a pod that failed to schedule."""
    pod_max_backoff_seconds: int = s.DEFAULT_POD_MAX_BACKOFF_SECONDS
    """`podMaxBackoffSeconds`: backoff doubles up to this."""
    parallelism: int = s.DEFAULT_PARALLELISM
    """`parallelism`: parallel node evaluation and bind workers."""
    leader_election: LeaderElectionConfig = LeaderElectionConfig()
    """`leaderElection`."""
    client_connection: ClientConnectionConfig = ClientConnectionConfig()
    """`clientConnection`."""
    policies: tuple[Path, ...] = ()
    """`policies`, resolved against the profile's directory (files or directories)."""
    policy_files: tuple[Path, ...] = ()
    """Every policy file those entries name (directories expanded): what the daemon must
    watch for reloads."""
    metrics_providers: tuple[MetricsProviderConfig, ...] = ()
    """`metricsProviders`: the node metric sources score rules (`metric`) read."""
    cluster_policies: bool = False
    """`clusterPolicies`: also run the cluster's SchedulingPolicy objects (watched)."""
    kube_scheduler_only: tuple[tuple[str, bool], ...] = tuple(
        s.KUBE_SCHEDULER_ONLY_DEFAULTS.items())
    """`enableProfiling`, `enableContentionProfiling`, `delayCacheUntilActive` with the
    values given or kube-scheduler's defaults: no effect in policyd, shown by /configz."""
    feature_gates: FeatureGates = DEFAULTS
    """`featureGates` over v1.36's defaults, then the command line's `--feature-gates`
    (`gate_overrides` of `config_from_dict`) over those: what the frameworks are built
    with and the daemon's queue runs by."""


def _int(v: Any, default: int, ok: Any = lambda v: True) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and ok(v) else default


def _number(v: Any, default: float) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return default
    try:
        return float(v)
    except OverflowError:  # an integer beyond float64; validation reports it out of range
        return default


def _seconds(v: Any, default: float) -> float:
    try:
        d = parse_duration(v)
    except ValueError:
        return default
    return d if d > 0 else default


def _str(v: Any, default: str) -> str:
    return v if isinstance(v, str) and v else default


def _map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _percentage(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 100 else None


def profile_from_dict(raw: Any) -> ProfileConfig:
    doc = _map(raw)
    configs: dict[str, Mapping[str, Any] | None] = {}
    pcs = doc.get("pluginConfig")
    for pc in pcs if isinstance(pcs, list) else []:
        if isinstance(pc, Mapping) and isinstance(pc.get("name"), str) \
                and pc["name"] not in configs:
            args = pc.get("args")
            configs[pc["name"]] = args if isinstance(args, Mapping) else None
    return ProfileConfig(
        scheduler_name=_str(doc.get("schedulerName"), s.DEFAULT_SCHEDULER_NAME),
        percentage_of_nodes_to_score=_percentage(doc.get("percentageOfNodesToScore")),
        plugins=_map(doc.get("plugins")),
        plugin_config=configs,
    )


def feature_gates_from(raw: Any, overrides: Sequence[tuple[str, bool]] = ()
                       ) -> FeatureGates:
    """The profile's `featureGates` (the settings policyd accepts; validation reports
    the others), then `overrides`, over v1.36's defaults. Dependencies are not
    checked here: validation reports them."""
    settings = [(n, v) for n, v in _map(raw).items() if isinstance(v, bool)]
    values = dict(DEFAULTS.values)
    for name, value in [*settings, *overrides]:
        if check_setting(name, value) is None:
            values[name] = value
    return FeatureGates(MappingProxyType(values))


def config_from_dict(raw: Any, path: Path, policy_files: tuple[Path, ...] = (),
                     gate_overrides: Sequence[tuple[str, bool]] = (),
                     cluster_policies_flag: bool = False) -> PolicydConfig:
    """A PolicydConfig from a (possibly invalid) document: invalid values become
    defaults. `gate_overrides`: `--feature-gates`, over the profile's;
    `cluster_policies_flag`: `--cluster-policies`, which turns `clusterPolicies` on
    whatever the file says (a KubeSchedulerConfiguration cannot say it)."""
    doc = _map(raw)
    base = path.parent
    le = _map(doc.get("leaderElection"))
    cc = _map(doc.get("clientConnection"))
    d_le = LeaderElectionConfig()
    d_cc = ClientConnectionConfig()
    raw_profiles = doc.get("profiles")
    profiles = tuple(profile_from_dict(p) for p in raw_profiles) \
        if isinstance(raw_profiles, list) and raw_profiles else (ProfileConfig(),)
    initial = _int(doc.get("podInitialBackoffSeconds"),
                   s.DEFAULT_POD_INITIAL_BACKOFF_SECONDS, lambda v: v > 0)
    maximum = _int(doc.get("podMaxBackoffSeconds"), max(initial,
                   s.DEFAULT_POD_MAX_BACKOFF_SECONDS), lambda v: v >= initial)
    kubeconfig = cc.get("kubeconfig")
    raw_policies = doc.get("policies")
    return PolicydConfig(
        path=path,
        profiles=profiles,
        percentage_of_nodes_to_score=_percentage(doc.get("percentageOfNodesToScore")) or 0,
        pod_initial_backoff_seconds=initial,
        pod_max_backoff_seconds=maximum,
        parallelism=_int(doc.get("parallelism"), s.DEFAULT_PARALLELISM, lambda v: v > 0),
        leader_election=LeaderElectionConfig(
            leader_elect=le["leaderElect"] if isinstance(le.get("leaderElect"), bool)
            else d_le.leader_elect,
            lease_duration=_seconds(le.get("leaseDuration"), d_le.lease_duration),
            renew_deadline=_seconds(le.get("renewDeadline"), d_le.renew_deadline),
            retry_period=_seconds(le.get("retryPeriod"), d_le.retry_period),
            resource_lock=s.DEFAULT_RESOURCE_LOCK,
            resource_name=_str(le.get("resourceName"), d_le.resource_name),
            resource_namespace=_str(le.get("resourceNamespace"), d_le.resource_namespace),
        ),
        client_connection=ClientConnectionConfig(
            qps=_number(cc.get("qps"), d_cc.qps),
            burst=_int(cc.get("burst"), d_cc.burst, lambda v: v >= 0),
            timeout=_seconds(cc.get("timeout"), d_cc.timeout),
            kubeconfig=base / kubeconfig if isinstance(kubeconfig, str) and kubeconfig
            else None,
        ),
        policies=tuple(Path(os.path.normpath(base / p)) for p in raw_policies
                       if isinstance(p, str) and p) if isinstance(raw_policies, list) else (),
        policy_files=policy_files,
        metrics_providers=metrics_providers_from(doc.get("metricsProviders"), base),
        cluster_policies=doc.get("clusterPolicies") is True or cluster_policies_flag,
        kube_scheduler_only=tuple(
            (name, value if isinstance(value := doc.get(name), bool) else default)
            for name, default in s.KUBE_SCHEDULER_ONLY_DEFAULTS.items()),
        feature_gates=feature_gates_from(doc.get("featureGates"), gate_overrides),
    )


def _metric_query(raw: Any) -> MetricQuery | None:
    q = _map(raw)
    name, query = q.get("name"), q.get("query")
    if not isinstance(name, str) or not name or not isinstance(query, str) or not query:
        return None
    return MetricQuery(name, query, q.get("allowNegative") is True)


def metrics_providers_from(raw: Any, base: Path) -> tuple[MetricsProviderConfig, ...]:
    """The valid entries of `metricsProviders` (validation reported the others)."""
    out: list[MetricsProviderConfig] = []
    for entry in raw if isinstance(raw, list) else []:
        p = _map(entry)
        name, kind = p.get("name"), p.get("kind")
        if not isinstance(name, str) or not name \
                or kind not in s.METRICS_KINDS:
            continue
        refresh = _seconds(p.get("refreshInterval"), s.DEFAULT_METRICS_REFRESH_SECONDS)
        address = _map(p.get("address"))
        address_from, address_key = "internalIP", ""
        for key in ("label", "annotation"):
            if isinstance(address.get(key), str) and address[key]:
                address_from, address_key = key, address[key]
        token = p.get("bearerTokenFile")
        queries = p.get("metrics")
        out.append(MetricsProviderConfig(
            name=name, kind=kind, refresh_interval=refresh,
            timeout=_seconds(p.get("timeout"), s.DEFAULT_METRICS_TIMEOUT_SECONDS),
            max_age=_seconds(p.get("maxAge"), 3 * refresh),
            max_backoff=max(refresh, _seconds(p.get("maxBackoff"),
                                              s.DEFAULT_METRICS_MAX_BACKOFF_SECONDS)),
            url=_str(p.get("url"), ""),
            node_label=_str(p.get("nodeLabel"), s.DEFAULT_METRICS_NODE_LABEL),
            bearer_token_file=base / token if isinstance(token, str) and token else None,
            queries=tuple(q for q in map(_metric_query, queries
                                         if isinstance(queries, list) else [])
                          if q is not None),
            metric=_str(p.get("metric"), ""),
            port=_int(p.get("port"), 0, lambda v: 0 < v < 65536),
            address_from=address_from, address_key=address_key,
            workers=_int(p.get("workers"), s.DEFAULT_METRICS_PROBE_WORKERS,
                         lambda v: 0 < v <= 256),
            annotation=_str(p.get("annotation"), ""),
            allow_negative=p.get("allowNegative") is True,
        ))
    return tuple(out)
