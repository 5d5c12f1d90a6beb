"""The daemon's view of the profile: validated frameworks plus runtime settings.

Validation runs before anything touches the API server (and again on every reload):
`load(path)` returns the frameworks and settings, or raises `InvalidConfig` listing
every problem as `file:line:column: message [rule]`. It is exactly `policyd
check-config`'s validation (`policyd.config.validate.validate_config_file`); the
loader-only fallback (`_load_basic`) exists for builds without that module.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policyd.errors import EXIT_PROBLEMS, PolicydError
from policyd.framework.runtime import Framework
from policyd.kube.leaderelection import LeaderElectionSettings


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

    def leader_election(self, identity: str | None = None,
                        namespace: str | None = None) -> LeaderElectionSettings:
        kw: dict[str, Any] = {}
        if identity:
            kw["identity"] = identity
        return LeaderElectionSettings(
            namespace=namespace or self.lease_namespace, name=self.lease_name,
            lease_duration=self.lease_duration, renew_deadline=self.renew_deadline,
            retry_period=self.retry_period, **kw)


@dataclass(slots=True)
class LoadedConfig:
    path: Path
    frameworks: dict[str, Framework]
    settings: RuntimeSettings
    files: list[Path] = field(default_factory=list)  # every file a reload must watch
    # The profile's `metricsProviders` (policyd.config.model.MetricsProviderConfig).
    metrics_providers: tuple[Any, ...] = ()


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: Any) -> float:
    """A Go duration ("15s", "1m30s", "500ms") or a number of seconds."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str) or not value:
        raise ValueError(f"not a duration: {value!r}")
    pos, total = 0, 0.0
    for m in _DURATION.finditer(value):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if pos != len(value):
        raise ValueError(f"not a duration: {value!r} (e.g. 15s, 1m30s, 500ms)")
    return total


def runtime_settings(doc: Mapping[str, Any]) -> tuple[RuntimeSettings, list[str]]:
    """Settings from the profile document, plus a problem per invalid value."""
    problems: list[str] = []
    kw: dict[str, Any] = {}

    def number(src: Mapping[str, Any], key: str, path: str, dest: str,
               minimum: float = 0.0, integer: bool = False) -> None:
        if key not in src:
            return
        v = src[key]
        if isinstance(v, bool) or not isinstance(v, int | float) or (
                integer and not isinstance(v, int)):
            problems.append(f"{path}: must be {'an integer' if integer else 'a number'}")
        elif v < minimum:
            problems.append(f"{path}: Invalid value: {v}: must be >= {minimum:g}")
        else:
            kw[dest] = v

    def duration(src: Mapping[str, Any], key: str, path: str, dest: str) -> None:
        if key not in src:
            return
        try:
            d = parse_duration(src[key])
        except ValueError as exc:
            problems.append(f"{path}: {exc}")
            return
        if d <= 0:
            problems.append(f"{path}: must be greater than zero")
        else:
            kw[dest] = d

    number(doc, "podInitialBackoffSeconds", "podInitialBackoffSeconds", "pod_initial_backoff",
           1, integer=True)
    number(doc, "podMaxBackoffSeconds", "podMaxBackoffSeconds", "pod_max_backoff", 1,
           integer=True)
    if kw.get("pod_max_backoff", 10.0) < kw.get("pod_initial_backoff", 1.0):
        problems.append("podMaxBackoffSeconds: must be >= podInitialBackoffSeconds")
    conn = doc.get("clientConnection") or {}
    if isinstance(conn, Mapping):
        number(conn, "qps", "clientConnection.qps", "qps", -1)
        number(conn, "burst", "clientConnection.burst", "burst", 0, integer=True)
        duration(conn, "timeout", "clientConnection.timeout", "timeout")
    le = doc.get("leaderElection") or {}
    if isinstance(le, Mapping):
        if "leaderElect" in le:
            if isinstance(le["leaderElect"], bool):
                kw["leader_elect"] = le["leaderElect"]
            else:
                problems.append("leaderElection.leaderElect: must be a boolean")
        duration(le, "leaseDuration", "leaderElection.leaseDuration", "lease_duration")
        duration(le, "renewDeadline", "leaderElection.renewDeadline", "renew_deadline")
        duration(le, "retryPeriod", "leaderElection.retryPeriod", "retry_period")
        for key, dest in (("resourceName", "lease_name"),
                          ("resourceNamespace", "lease_namespace")):
            if key in le:
                if isinstance(le[key], str) and le[key]:
                    kw[dest] = le[key]
                else:
                    problems.append(f"leaderElection.{key}: must be a non-empty string")
        if kw.get("renew_deadline", 10.0) >= kw.get("lease_duration", 15.0):
            problems.append("leaderElection.renewDeadline: must be less than leaseDuration")
    return RuntimeSettings(**kw), problems


def policy_files(paths: Iterable[Path]) -> list[Path]:
    """Every policy file under `paths` (files, or directories walked for YAML)."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            for root, _, names in os.walk(p):
                out.extend(Path(root) / n for n in sorted(names)
                           if n.endswith((".yaml", ".yml")) and not n.startswith(".."))
        else:
            out.append(p)
    return out


def load(path: Path, extra_policies: list[Path] | None = None) -> LoadedConfig:
    """Validate the profile and its policies and build the frameworks, or raise
    InvalidConfig (every problem; exit 1) / InputFileError (unreadable file; exit 2)."""
    validate = _strict_validator()
    if validate is None:
        return _load_basic(path, extra_policies)
    from policyd.errors import InputFileError

    config, frameworks, found = validate(path, extra_policies=tuple(extra_policies or ()))
    errors = [p for p in found if getattr(p, "level", "error") == "error"]
    if errors:
        unreadable = getattr(_strict_module(), "is_unreadable", None)
        if unreadable is not None and unreadable(errors, path):
            raise InputFileError(errors[0].message, where=str(path))
        raise InvalidConfig(path, [format_problem(p) for p in errors])
    le, cc = config.leader_election, config.client_connection
    settings = RuntimeSettings(
        pod_initial_backoff=float(config.pod_initial_backoff_seconds),
        pod_max_backoff=float(config.pod_max_backoff_seconds),
        qps=float(cc.qps), burst=int(cc.burst), timeout=float(cc.timeout),
        kubeconfig=str(cc.kubeconfig) if cc.kubeconfig else None,
        parallelism=int(config.parallelism),
        leader_elect=bool(le.leader_elect), lease_duration=float(le.lease_duration),
        renew_deadline=float(le.renew_deadline), retry_period=float(le.retry_period),
        lease_name=str(le.resource_name), lease_namespace=str(le.resource_namespace))
    files = [path, *config.policies, *config.policy_files, *(extra_policies or [])]
    return LoadedConfig(path, dict(frameworks), settings, list(dict.fromkeys(files)),
                        tuple(getattr(config, "metrics_providers", ()) or ()))


def format_problem(p: Any) -> str:
    """`file:line:col: message [rule] (at path)`, as `policyd lint` prints problems."""
    line = getattr(p, "line", 0)
    where = f"{p.file}:{line}:{p.column}" if line else str(getattr(p, "file", ""))
    rule = getattr(p, "rule", "")
    at = f" (at {p.path})" if getattr(p, "path", "") else ""
    return f"{where}: {p.message}" + (f" [{rule}]" if rule else "") + at


def _load_basic(path: Path, extra_policies: list[Path] | None) -> LoadedConfig:
    """Without the strict validator: the loader's checks only."""
    from policyd.cli.schedule_cmds import load_policy_plugins
    from policyd.config.loader import (
        ConfigError,
        frameworks_from_config,
        policy_paths,
        read_config,
    )
    from policyd.errors import InputFileError

    problems: list[str] = []
    try:
        doc = read_config(path)
    except InputFileError as exc:
        raise InvalidConfig(path, [str(exc)]) from None
    settings, setting_problems = runtime_settings(doc)
    problems.extend(setting_problems)
    paths = [*policy_paths(doc, path), *(extra_policies or [])]
    try:
        plugins = load_policy_plugins(paths)
    except InputFileError as exc:
        raise InvalidConfig(path, [*problems, str(exc)]) from None
    try:
        frameworks = frameworks_from_config(doc, path, {p.name: p for p in plugins})
    except ConfigError as exc:
        problems.extend(f"{q.path}: {q.message}" if q.path else q.message
                        for q in exc.problems)
        frameworks = {}
    if problems:
        raise InvalidConfig(path, problems)
    return LoadedConfig(path, frameworks, settings, [path, *paths])


def _strict_module() -> Any:
    import importlib

    try:
        return importlib.import_module("policyd.config.validate")
    except ImportError:
        return None


def _strict_validator() -> Any:
    mod = _strict_module()
    return getattr(mod, "validate_config_file", None) if mod is not None else None
