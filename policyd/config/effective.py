"""The effective configuration of a valid profile file, as data: what `policyd
check-config -o yaml|json` prints, in the spirit of kubectl's `--dry-run -o yaml`.

It is the PolicydConfiguration the daemon would run, written back in the file's own
shape: every setting with its default filled in, and each profile's `plugins` after
kube-scheduler's expansion (the default plugins and every policy, multiPoint spread to
each extension point it implements, disabled ones removed, custom ones merged in
place), listed per extension point as `enabled` (with multiPoint's defaults disabled,
so the lists are the whole of it), score plugins with the weight they run at.
`pluginConfig` lists the args given for each enabled plugin; a plugin without an entry
runs with its defaults. `featureGates` lists every gate with the value it runs at.
Read back by check-config, the document has itself as its
effective configuration.
"""

from __future__ import annotations

from typing import Any

from policyd.config.model import PolicydConfig
from policyd.config.plugins import POINTS, resolve_profile, score_weight
from policyd.config.profile_schema import (
    API_VERSION,
    DEFAULT_SCHEDULER_NAME,
    KIND,
    KUBE_SCHEDULER_API_VERSION,
    KUBE_SCHEDULER_KIND,
    POLICYD_ONLY_FIELDS,
)
from policyd.config.validate import ValidatedConfig


def effective_configuration(checked: ValidatedConfig) -> dict[str, Any]:
    """The document for a configuration validation found valid (ValueError if not:
    an invalid profile has no effective form)."""
    if not checked.valid:
        raise ValueError("effective_configuration needs a configuration found valid")
    config = checked.config
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        **_settings(config),
        "profiles": [_profile(profile, checked) for _, profile in checked.profiles],
    }


def _seconds(value: float) -> str:
    """A duration as the profile writes one (`15s`, `0.5s`)."""
    return f"{value:g}s"


def _settings(config: PolicydConfig) -> dict[str, Any]:
    le, cc = config.leader_election, config.client_connection
    return {
        "percentageOfNodesToScore": config.percentage_of_nodes_to_score,
        "podInitialBackoffSeconds": config.pod_initial_backoff_seconds,
        "podMaxBackoffSeconds": config.pod_max_backoff_seconds,
        "parallelism": config.parallelism,
        "clusterPolicies": config.cluster_policies,
        # kube-scheduler's fields policyd does not act on, as kube-scheduler shows them
        # (delayCacheUntilActive only when true: its omitempty).
        **{name: value for name, value in config.kube_scheduler_only
           if value or name != "delayCacheUntilActive"},
        # Every gate policyd knows with the value it runs at (the profile's, then
        # --feature-gates, over v1.36's defaults), by name.
        "featureGates": dict(sorted(config.feature_gates.values.items())),
        # The files the `policies` paths named, each once: what is loaded.
        "policies": [str(p) for p in config.policy_files],
        "leaderElection": {
            "leaderElect": le.leader_elect,
            "leaseDuration": _seconds(le.lease_duration),
            "renewDeadline": _seconds(le.renew_deadline),
            "retryPeriod": _seconds(le.retry_period),
            "resourceLock": le.resource_lock,
            "resourceName": le.resource_name,
            "resourceNamespace": le.resource_namespace,
        },
        "clientConnection": {
            "qps": cc.qps, "burst": cc.burst, "timeout": _seconds(cc.timeout),
            **({"kubeconfig": str(cc.kubeconfig)} if cc.kubeconfig else {}),
        },
    }


def _profile(profile: Any, checked: ValidatedConfig) -> dict[str, Any]:
    # Valid, so resolving again reports nothing: the report is a formality.
    resolved = resolve_profile(profile, checked.policies, report=lambda *_: None,
                               features=checked.config.feature_gates)
    # multiPoint's defaults are off: every plugin that runs is in the lists below, so
    # the document means what it lists when read back (nothing comes back by default).
    plugins: dict[str, Any] = {"multiPoint": {"disabled": [{"name": "*"}]}}
    for point in POINTS:
        entries = resolved.points.get(point, ())
        plugins[point] = {"enabled": [
            {"name": e.name, "weight": score_weight(e.name, e.weight, checked.policies)}
            if point == "score" else {"name": e.name} for e in entries]}
    enabled = {e.name for entries in resolved.points.values() for e in entries}
    out: dict[str, Any] = {"schedulerName": profile.get("schedulerName")
                           or DEFAULT_SCHEDULER_NAME}
    if profile.get("percentageOfNodesToScore") is not None:
        out["percentageOfNodesToScore"] = profile["percentageOfNodesToScore"]
    out["plugins"] = plugins
    out["pluginConfig"] = [{"name": name, "args": dict(args)}
                           for name, args in resolved.args.items()
                           if name in enabled and args is not None]
    return out


def configz(checked: ValidatedConfig) -> dict[str, Any]:
    """What the daemon serves at /configz, shaped as kube-scheduler's (component-base
    configz: the component's name, "componentconfig", over its KubeSchedulerConfiguration
    v1 with every default filled in): the effective configuration under kube-scheduler's
    kind and apiVersion, its KubeSchedulerConfiguration fields there, and policyd's own
    fields (policies, feature gates, ...) beside it under "policyd"."""
    effective = effective_configuration(checked)
    own = {name: effective.pop(name) for name in POLICYD_ONLY_FIELDS if name in effective}
    effective.update(apiVersion=KUBE_SCHEDULER_API_VERSION, kind=KUBE_SCHEDULER_KIND)
    return {"componentconfig": effective, "policyd": own}
