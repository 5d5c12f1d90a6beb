"""The daemon's view of the profile: validated frameworks plus runtime settings.

Validation runs before anything touches the API server (and again on every reload):
`load(path)` returns the frameworks and settings, or raises `InvalidConfig` listing
every problem as `file:line:column: message [rule]`. It is exactly `policyd
check-config`'s validation (`policyd.config.loader.validate_config_file`), with the
daemon's cluster policies (`clusterPolicies: true`) added as already-compiled policies.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from policyd.config.effective import configz
from policyd.config.loader import build_frameworks, validated_config_file
from policyd.config.plugins import RULE_UNKNOWN
from policyd.config.validate import ClusterPolicies, is_unreadable
from policyd.errors import EXIT_PROBLEMS, InputFileError, PolicydError
from policyd.features import DEFAULTS, FeatureGates
from policyd.framework.runtime import Framework
from policyd.kube.leaderelection import LeaderElectionSettings
from policyd.policy.files import find_yaml_files
from policyd.problems import format_problem


class InvalidConfig(PolicydError):
    """The profile or its policies are invalid: `policyd run` exits 1."""

    exit_code = EXIT_PROBLEMS

    def __init__(self, path: Path, problems: list[str]) -> None:
        super().__init__(f"invalid configuration {path} ({len(problems)} problem(s)):\n  "
                         + "\n  ".join(problems))
        self.problems = problems


@dataclass(frozen=True, slots=True)
class RuntimeSettings:
    """Top-level profile fields the daemon uses (KubeSchedulerConfiguration names)."""

    pod_initial_backoff: float = 1.0
    pod_max_backoff: float = 10.0
    qps: float = 50.0
    burst: int = 100
    timeout: float = 30.0
    kubeconfig: str | None = None  # clientConnection.kubeconfig
    parallelism: int = 16
    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    lease_name: str = "policyd"
    lease_namespace: str = "kube-system"
    cluster_policies: bool = False
    # The non-default gates of the profile's `featureGates` and --feature-gates
    # (`FeatureGates.describe`): compared so a reload that changes them says a restart
    # is needed.
    feature_gates: str = "defaults"

    def leader_election(self, identity: str | None = None,
                        namespace: str | None = None) -> LeaderElectionSettings:
        kw: dict[str, Any] = {}
        if identity:
            kw["identity"] = identity
        return LeaderElectionSettings(
            namespace=namespace or self.lease_namespace, name=self.lease_name,
            lease_duration=self.lease_duration, renew_deadline=self.renew_deadline,
            retry_period=self.retry_period, **kw)


# Each runtime setting's name in the profile, for messages an operator acts on.
PROFILE_FIELDS = {
    "pod_initial_backoff": "podInitialBackoffSeconds",
    "pod_max_backoff": "podMaxBackoffSeconds",
    "qps": "clientConnection.qps", "burst": "clientConnection.burst",
    "timeout": "clientConnection.timeout", "kubeconfig": "clientConnection.kubeconfig",
    "parallelism": "parallelism", "leader_elect": "leaderElection.leaderElect",
    "lease_duration": "leaderElection.leaseDuration",
    "renew_deadline": "leaderElection.renewDeadline",
    "retry_period": "leaderElection.retryPeriod",
    "lease_name": "leaderElection.resourceName",
    "lease_namespace": "leaderElection.resourceNamespace",
    "cluster_policies": "clusterPolicies",
    "feature_gates": "featureGates",
}
# What a reload applies to the running daemon: the queue's backoff for pods that fail
# from then on. The rest shapes objects built once at start-up (the API connection,
# the binder pool, the leader elector and its Lease, the SchedulingPolicy watch, and
# the feature gates, as kube-scheduler reads them once at start).
LIVE_SETTINGS = frozenset({"pod_initial_backoff", "pod_max_backoff"})


def needs_restart(running: RuntimeSettings, loaded: RuntimeSettings,
                  ignore: Iterable[str] = ()) -> list[str]:
    """The settings that changed but keep their running values until a restart, as
    `leaderElection.leaseDuration (15 -> 20)`; `ignore`: settings a command-line flag
    overrides (a change in the profile changes nothing there, restart or not)."""
    skip = LIVE_SETTINGS | set(ignore)
    out = []
    for f in fields(RuntimeSettings):
        before, after = getattr(running, f.name), getattr(loaded, f.name)
        if f.name not in skip and before != after:
            out.append(f"{PROFILE_FIELDS[f.name]} ({_show(before)} -> {_show(after)})")
    return out


def _show(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "unset" if value is None else str(value)


@dataclass(slots=True)
class LoadedConfig:
    path: Path
    frameworks: dict[str, Framework]
    settings: RuntimeSettings
    files: list[Path] = field(default_factory=list)  # every file a reload must watch
    # The profile's `metricsProviders` (policyd.config.model.MetricsProviderConfig).
    metrics_providers: tuple[Any, ...] = ()
    # False: loaded by `load(..., cluster_pending=True)` for its settings only (the
    # profile names plugins only cluster policies can provide); no frameworks.
    complete: bool = True
    # The gates the frameworks were built with and the queue runs by: fixed at start
    # (a reload passes them back as `pinned_gates`), as kube-scheduler's are.
    feature_gates: FeatureGates = DEFAULTS
    # `policyd run --feature-gates`, applied over the profile's at every reload.
    gate_overrides: tuple[tuple[str, bool], ...] = ()
    # `policyd run --cluster-policies`, applied over the profile at every reload.
    cluster_policies_flag: bool = False
    # What /configz serves (config.effective.configz); None while incomplete.
    configz: dict[str, Any] | None = None


def policy_files(paths: Iterable[Path]) -> list[Path]:
    """Every policy file under `paths`, found as lint finds them, plus every path the
    walk could not read (a dangling symlink, a closed directory): a reload must notice
    when one of those is fixed."""
    found = find_yaml_files(paths)
    return [*(f for f, _ in found.files), *(Path(p.path) for p in found.problems)]


def load(path: Path, extra_policies: list[Path] | None = None,
         cluster_policies: ClusterPolicies | None = None, *,
         cluster_pending: bool = False,
         gate_overrides: tuple[tuple[str, bool], ...] = (),
         pinned_gates: FeatureGates | None = None,
         cluster_policies_flag: bool = False) -> LoadedConfig:
    """Validate the profile and its policies and build the frameworks, or raise
    InvalidConfig (every problem; exit 1) / InputFileError (unreadable file; exit 2).

    `cluster_policies`: the daemon's cluster policies, run beside the files.
    `cluster_pending`: the start-up check before the cluster's policies are listed:
    when the profile has `clusterPolicies: true` and its only errors are plugin names
    not registered (which a SchedulingPolicy object may provide), the result is
    incomplete (`complete` False, no frameworks) instead of an error; every other
    problem is raised, before any request.
    `gate_overrides`: --feature-gates; `pinned_gates`: the gates to build with (a
    reload's: those the daemon started with) instead of the profile's.
    `cluster_policies_flag`: --cluster-policies (`clusterPolicies: true` whatever the
    file says)."""
    checked = validated_config_file(
        path, extra_policies=tuple(extra_policies or ()), cluster_policies=cluster_policies,
        gate_overrides=gate_overrides, cluster_policies_flag=cluster_policies_flag)
    config, found = checked.config, checked.problems
    frameworks = build_frameworks(checked, features=pinned_gates) if checked.valid else {}
    errors = [p for p in found if p.level == "error"]
    unresolved = cluster_pending and config.cluster_policies \
        and all(p.rule == RULE_UNKNOWN for p in errors)
    if errors and not unresolved:
        if is_unreadable(errors):  # the profile or a policy: exit 2, like lint
            first = next(p for p in errors if is_unreadable([p]))
            raise InputFileError(first.message, where=first.file)
        raise InvalidConfig(path, [format_problem(p, with_level=False) for p in errors])
    le, cc = config.leader_election, config.client_connection
    settings = RuntimeSettings(
        pod_initial_backoff=float(config.pod_initial_backoff_seconds),
        pod_max_backoff=float(config.pod_max_backoff_seconds),
        qps=float(cc.qps), burst=int(cc.burst), timeout=float(cc.timeout),
        kubeconfig=str(cc.kubeconfig) if cc.kubeconfig else None,
        parallelism=int(config.parallelism),
        leader_elect=bool(le.leader_elect), lease_duration=float(le.lease_duration),
        renew_deadline=float(le.renew_deadline), retry_period=float(le.retry_period),
        lease_name=str(le.resource_name), lease_namespace=str(le.resource_namespace),
        cluster_policies=config.cluster_policies,
        feature_gates=config.feature_gates.describe())
    files = [path, *config.policies, *config.policy_files, *(extra_policies or [])]
    return LoadedConfig(path, dict(frameworks), settings, list(dict.fromkeys(files)),
                        tuple(getattr(config, "metrics_providers", ()) or ()),
                        complete=not errors,
                        feature_gates=pinned_gates or config.feature_gates,
                        gate_overrides=tuple(gate_overrides),
                        cluster_policies_flag=cluster_policies_flag,
                        configz=configz(checked) if checked.valid else None)

