"""The JSON Schema (draft 2020-12) of a PolicydConfiguration profile.

Kept as data in the package, like the policy schema, so the installed package always has
it; `schemas/profile.schema.json` (what editors load through the `yaml-language-server`
comment) is generated with `python -m policyd.config.profile_schema > schemas/profile.schema.json`
and a test keeps the two identical.

The schema is strict (`additionalProperties: false` everywhere except plugin `args`,
which each plugin validates itself): kube-scheduler decodes its configuration strictly
and so do we. Cross-field rules (duplicates, backoff order, plugin names) are in
`validate.py`, which also turns range errors into upstream's `Invalid value` wording.
Defaults are documented in the descriptions and in `default`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

from policyd.features import GATES, Gate
from policyd.model.duration import MAX_DURATION_SECONDS
from policyd.model.int64 import INT32_MAX
from policyd.policy.schema_parts import METRIC_NAME_PATTERN, schema_object

API_VERSION = "policyd.io/v1alpha1"
KIND = "PolicydConfiguration"
# kube-scheduler's own file, which policyd reads unchanged (config.validate says how):
# its fields are a subset of PolicydConfiguration's, these are policyd's own.
KUBE_SCHEDULER_API_VERSION = "kubescheduler.config.k8s.io/v1"
KUBE_SCHEDULER_KIND = "KubeSchedulerConfiguration"
# Each with the flag of `policyd run` that sets it for such a file, if one does.
POLICYD_ONLY_FIELDS = {"policies": "--policies", "featureGates": "--feature-gates",
                       "metricsProviders": None, "clusterPolicies": "--cluster-policies"}
SCHEMA_ID = "https://policyd.io/schemas/profile.schema.json"

DEFAULT_SCHEDULER_NAME = "policyd"
DEFAULT_POD_INITIAL_BACKOFF_SECONDS = 1
DEFAULT_POD_MAX_BACKOFF_SECONDS = 10
DEFAULT_PARALLELISM = 16
DEFAULT_QPS = 50.0
DEFAULT_BURST = 100
DEFAULT_TIMEOUT = "30s"
DEFAULT_LEASE_DURATION = "15s"
DEFAULT_RENEW_DEADLINE = "10s"
DEFAULT_RETRY_PERIOD = "2s"
DEFAULT_RESOURCE_LOCK = "leases"
DEFAULT_RESOURCE_NAME = "policyd"
DEFAULT_RESOURCE_NAMESPACE = "kube-system"
DEFAULT_METRICS_REFRESH_SECONDS = 30.0
DEFAULT_METRICS_TIMEOUT_SECONDS = 5.0
DEFAULT_METRICS_MAX_BACKOFF_SECONDS = 300.0
DEFAULT_METRICS_NODE_LABEL = "node"
DEFAULT_METRICS_PROBE_WORKERS = 16

# Upstream's bounds on the profile's numbers: its Go types (int32 weights, parallelism
# and burst; float32 qps) and, for the backoffs (int64 seconds), the whole seconds a
# time.Duration holds (kube-scheduler multiplies them by time.Second).
MAX_BACKOFF_SECONDS = int(MAX_DURATION_SECONDS)
FLOAT32_MAX = 3.4028234663852886e38


@dataclass(frozen=True, slots=True)
class MetricsKind:
    """A kind of `metricsProviders` entry: the registry the schema, validation, the
    config model and `policyd.nodemetrics.providers` (each provider class names its
    kind) all read, so a kind is spelt once."""

    name: str
    fields: tuple[str, ...]  # fields only this kind takes; validation rejects them elsewhere
    required: tuple[str, ...]
    # Where its metric names are: each `metrics[].name` (a list of queries), else the
    # one `metric` field.
    metric_list: bool = False


PROMETHEUS = MetricsKind("prometheus", ("url", "nodeLabel", "bearerTokenFile", "metrics"),
                         ("url", "metrics"), metric_list=True)
PROBE = MetricsKind("probe", ("metric", "port", "address", "workers"), ("metric", "port"))
NODE_ANNOTATION = MetricsKind("nodeAnnotation", ("metric", "annotation", "allowNegative"),
                              ("metric", "annotation"))
METRICS_PROVIDER_KINDS = {k.name: k for k in (PROMETHEUS, PROBE, NODE_ANNOTATION)}
METRICS_KINDS = tuple(METRICS_PROVIDER_KINDS)
METRICS_KIND_FIELDS = {k.name: k.fields for k in METRICS_PROVIDER_KINDS.values()}
PROVIDER_NAME_PATTERN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

# Extension points in upstream's order; policyd has plugins for the first group only,
# the others are accepted so kube-scheduler profiles can disable plugins there.
POINTS = ("multiPoint", "preEnqueue", "queueSort", "preFilter", "filter", "postFilter",
          "preScore", "score", "reserve", "permit", "preBind", "bind", "postBind",
          "placementGenerate", "placementScore")

# KubeSchedulerConfiguration v1 fields policyd accepts and does nothing with (a
# warning says so when one is true): what each makes kube-scheduler do.
KUBE_SCHEDULER_ONLY_FIELDS = {
    "enableProfiling": "serve Go's profiles at /debug/pprof",
    "enableContentionProfiling": "record Go's block profile",
    "delayCacheUntilActive": "fill its cache only once it leads (policyd fills it "
                             "before, so a standby takes over warm)",
}
# Their values when a file leaves them out: kube-scheduler's defaults.
KUBE_SCHEDULER_ONLY_DEFAULTS = {"enableProfiling": True, "enableContentionProfiling": True,
                                "delayCacheUntilActive": False}

# A Go duration (time.ParseDuration): "15s", "1m30s", "500ms", "1.5h", "0".
_UNIT = "(ns|us|µs|μs|ms|s|m|h)"
_NUMBER = r"([0-9]+(\.[0-9]*)?|\.[0-9]+)"
DURATION_PATTERN = f"^[-+]?({_NUMBER}{_UNIT})+$|^[-+]?0$"




def _gate_text(gate: Gate) -> str:
    default = "true" if gate.default else "false"
    what = ("not read by the scheduler; here for its dependencies" if not gate.scheduler
            else "locked" if gate.locked
            else "policyd runs either value" if gate.modelled
            else "policyd runs only the default")
    return f"{gate.stage.value}, default {default} in v1.36; {what}."


def _duration(description: str, default: str) -> dict[str, Any]:
    return {"type": "string", "pattern": DURATION_PATTERN, "default": default,
            "description": f"{description} A Go duration such as 15s, 1m30s or 500ms; "
                           f"default {default}."}


def build_schema() -> dict[str, Any]:
    plugin = schema_object({
        "name": {"type": "string", "minLength": 1, "description":
                 "A built-in plugin (kube-scheduler's name, e.g. NodeResourcesFit) or a "
                 "policy's spec.pluginName; exact and case-sensitive."},
        "weight": {"type": "integer", "minimum": 0, "maximum": INT32_MAX, "description":
                   "Score weight (score and multiPoint only); 0 or absent: the plugin's "
                   "default weight (a policy's spec.weight, 1 if unset). An int32, as "
                   "upstream; the profile's weights x 100 must add up to at most 2^63-1 "
                   "(MaxTotalScore)."},
    }, ("name",))
    disabled_plugin = schema_object({
        "name": {"type": "string", "minLength": 1, "description":
                 "A plugin name, or \"*\" to disable every default plugin at this point."},
    }, ("name",))
    plugin_set = schema_object({
        "enabled": {"type": "array", "items": {"$ref": "#/$defs/plugin"}, "description":
                    "Plugins to enable, after the defaults; one that is also a default "
                    "replaces it in place (e.g. to change its weight)."},
        "disabled": {"type": "array", "items": {"$ref": "#/$defs/disabledPlugin"},
                     "description": "Default plugins to disable at this point."},
    }, description="Plugins enabled and disabled at one extension point.")
    plugins = schema_object(
        {p: {"$ref": "#/$defs/pluginSet"} for p in POINTS},
        description="Plugins per extension point, as in KubeSchedulerConfiguration v1. "
                    "Defaults: kube-scheduler's default profile plus every loaded policy, "
                    "all enabled through multiPoint. multiPoint plugins run at every "
                    "extension point they implement.")
    plugin_config = schema_object({
        "name": {"type": "string", "minLength": 1,
                 "description": "The plugin these args are for; it must be enabled in "
                                "this profile, and listed at most once."},
        "args": {"type": "object", "description":
                 "The plugin's args (upstream's <Plugin>Args, e.g. NodeResourcesFitArgs); "
                 "validated by the plugin."},
    }, ("name",))
    percentage = {"type": "integer", "minimum": 0, "maximum": 100}
    profile = schema_object({
        "schedulerName": {"type": "string", "minLength": 1, "default": DEFAULT_SCHEDULER_NAME,
                          "description": "Pods whose spec.schedulerName is this name are "
                                         "scheduled with this profile; unique across "
                                         f"profiles. Default {DEFAULT_SCHEDULER_NAME!r}."},
        "percentageOfNodesToScore": {**percentage, "description":
                                     "Overrides the top-level value for this profile."},
        "plugins": {"$ref": "#/$defs/plugins"},
        "pluginConfig": {"type": "array", "items": {"$ref": "#/$defs/pluginConfig"},
                         "description": "Args for enabled plugins, one entry per plugin."},
    }, description="One scheduler profile: a schedulerName and its plugins.")

    leader_election = schema_object({
        "leaderElect": {"type": "boolean", "default": True, "description":
                        "Run leader election so that only one replica schedules. "
                        "Default true."},
        "leaseDuration": _duration("How long a non-leader waits before it may take the "
                                   "lease over.", DEFAULT_LEASE_DURATION),
        "renewDeadline": _duration("How long the leader keeps retrying to renew before it "
                                   "stops leading; less than leaseDuration.",
                                   DEFAULT_RENEW_DEADLINE),
        "retryPeriod": _duration("Wait between attempts to acquire or renew.",
                                 DEFAULT_RETRY_PERIOD),
        "resourceLock": {"enum": [DEFAULT_RESOURCE_LOCK], "default": DEFAULT_RESOURCE_LOCK,
                         "description": "Only \"leases\" (coordination.k8s.io/v1 Lease), "
                                        "as upstream requires."},
        "resourceName": {"type": "string", "minLength": 1, "default": DEFAULT_RESOURCE_NAME,
                         "description": "Name of the Lease. Default "
                                        f"{DEFAULT_RESOURCE_NAME!r}."},
        "resourceNamespace": {"type": "string", "minLength": 1,
                              "default": DEFAULT_RESOURCE_NAMESPACE,
                              "description": "Namespace of the Lease. Default "
                                             f"{DEFAULT_RESOURCE_NAMESPACE!r}."},
    }, description="Leader election among replicas, on a Lease.")
    client_connection = schema_object({
        "qps": {"type": "number", "minimum": -FLOAT32_MAX, "maximum": FLOAT32_MAX,
                "default": DEFAULT_QPS, "description":
                f"Queries per second to the API server. Default {DEFAULT_QPS:g}."},
        "burst": {"type": "integer", "minimum": 0, "maximum": INT32_MAX,
                  "default": DEFAULT_BURST,
                  "description": f"Burst above qps. Default {DEFAULT_BURST}."},
        "timeout": _duration("Timeout of every API call.", DEFAULT_TIMEOUT),
        "kubeconfig": {"type": "string", "minLength": 1, "description":
                       "kubeconfig file, relative to this file; default: --kubeconfig, "
                       "$KUBECONFIG, in-cluster config, ~/.kube/config."},
    }, description="How policyd talks to the API server.")

    metric_name = {"type": "string", "pattern": METRIC_NAME_PATTERN, "description":
                   "A metric name score rules refer to (letters, digits, _), unique across "
                   "providers, e.g. latency_ms."}
    provider = {
        "type": "object",
        "description": "A source of node metric values, refreshed in the background into "
                       "the cache that `metric` score rules read (Score never waits for it).",
        "properties": {
            "name": {"type": "string", "pattern": PROVIDER_NAME_PATTERN, "maxLength": 63,
                     "description": "Provider name (lowercase DNS label), unique."},
            "kind": {"enum": list(METRICS_KINDS), "description":
                     "prometheus: PromQL instant queries; probe: TCP connect round-trip "
                     "time in ms, measured by policyd; nodeAnnotation: a number another "
                     "agent writes on the Node."},
            "refreshInterval": _duration("Time between refreshes while healthy.", "30s"),
            "timeout": _duration("Each request (or probe) gives up after this.", "5s"),
            "maxAge": {k: v for k, v in _duration(
                "A value older than this counts as missing.", "3 x refreshInterval").items()
                if k != "default"},
            "maxBackoff": _duration("While failing, the wait between attempts doubles "
                                    "from refreshInterval up to this.", "5m"),
            "url": {"type": "string", "pattern": "^https?://", "description":
                    "prometheus: base URL, e.g. http://prometheus.monitoring:9090."},
            "nodeLabel": {"type": "string", "minLength": 1,
                          "default": DEFAULT_METRICS_NODE_LABEL, "description":
                          "prometheus: the series label naming the node. Default "
                          f"{DEFAULT_METRICS_NODE_LABEL!r}."},
            "bearerTokenFile": {"type": "string", "minLength": 1, "description":
                                "prometheus: file holding a bearer token (re-read before "
                                "each request), relative to this file."},
            "metrics": {"type": "array", "minItems": 1, "items": schema_object({
                "name": metric_name,
                "query": {"type": "string", "minLength": 1, "description":
                          "PromQL giving one series per node, e.g. "
                          "avg by (node) (probe_latency_ms)."},
                "allowNegative": {"type": "boolean", "description":
                                  "Keep negative values (default false: dropped)."},
            }, ("name", "query")), "description": "prometheus: one query per metric."},
            "metric": {**metric_name, "description": "probe, nodeAnnotation: the metric "
                       "this provider fills."},
            "port": {"type": "integer", "minimum": 1, "maximum": 65535,
                     "description": "probe: TCP port to connect to."},
            "address": {
                "type": "object", "description": "probe: where the node's address comes "
                "from (default: its InternalIP).",
                "properties": {
                    "internalIP": {"const": True},
                    "label": {"type": "string", "minLength": 1},
                    "annotation": {"type": "string", "minLength": 1},
                },
                "additionalProperties": False,
                "oneOf": [{"required": ["internalIP"]}, {"required": ["label"]},
                          {"required": ["annotation"]}],
            },
            "workers": {"type": "integer", "minimum": 1, "maximum": 256,
                        "default": DEFAULT_METRICS_PROBE_WORKERS,
                        "description": "probe: concurrent probes at most. Default "
                                       f"{DEFAULT_METRICS_PROBE_WORKERS}."},
            "annotation": {"type": "string", "minLength": 1, "description":
                           "nodeAnnotation: the Node annotation holding the number."},
            "allowNegative": {"type": "boolean", "description":
                              "nodeAnnotation: keep negative values (default false)."},
        },
        "required": ["name", "kind"],
        "additionalProperties": False,
        "allOf": [{"if": {"properties": {"kind": {"const": k.name}}, "required": ["kind"]},
                   "then": {"required": list(k.required)}}
                  for k in METRICS_PROVIDER_KINDS.values()],
    }

    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "policyd PolicydConfiguration",
        "description": "policyd's profile, mirroring kube-scheduler's "
                       "KubeSchedulerConfiguration v1, plus the policies to load. Checked "
                       "by `policyd check-config`.",
        "type": "object",
        "properties": {
            "apiVersion": {"const": API_VERSION},
            "kind": {"const": KIND},
            "profiles": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/profile"},
                         "description": "Scheduler profiles. Default: one profile named "
                                        f"{DEFAULT_SCHEDULER_NAME!r} with the default "
                                        "plugins. All profiles must use the same queueSort "
                                        "plugin."},
            "percentageOfNodesToScore": {**percentage, "description":
                                         "Percentage of feasible nodes to find before "
                                         "scoring; 0 (default): adaptive, as upstream."},
            "podInitialBackoffSeconds": {
                "type": "integer", "exclusiveMinimum": 0, "maximum": MAX_BACKOFF_SECONDS,
                "default": DEFAULT_POD_INITIAL_BACKOFF_SECONDS,
                "description": "Initial backoff of an unschedulable pod. Default "
                               f"{DEFAULT_POD_INITIAL_BACKOFF_SECONDS}."},
            "podMaxBackoffSeconds": {
                "type": "integer", "maximum": MAX_BACKOFF_SECONDS,
                "default": DEFAULT_POD_MAX_BACKOFF_SECONDS,
                "description": "Maximum backoff; at least podInitialBackoffSeconds. Default "
                               f"{DEFAULT_POD_MAX_BACKOFF_SECONDS}."},
            "parallelism": {"type": "integer", "exclusiveMinimum": 0, "maximum": INT32_MAX,
                            "default": DEFAULT_PARALLELISM,
                            "description": "Parallelism of node evaluation (bind pool "
                                           f"size). Default {DEFAULT_PARALLELISM}."},
            "leaderElection": {"$ref": "#/$defs/leaderElection"},
            "clientConnection": {"$ref": "#/$defs/clientConnection"},
            **{name: {"type": "boolean", "default": KUBE_SCHEDULER_ONLY_DEFAULTS[name],
                      "description": f"kube-scheduler's: true makes it {what}. Accepted "
                      "so its files read unchanged; no effect in policyd (for "
                      "delayCacheUntilActive: true, a warning says so). Default as "
                      "kube-scheduler's."}
               for name, what in KUBE_SCHEDULER_ONLY_FIELDS.items()},
            "policies": {"type": "array", "items": {"type": "string", "minLength": 1},
                         "description": "SchedulingPolicy files or directories (searched "
                                        "for *.yaml, *.yml), relative to this file. Each "
                                        "policy is a plugin named by its spec.pluginName, "
                                        "enabled by default."},
            "metricsProviders": {"type": "array", "items": {"$ref": "#/$defs/metricsProvider"},
                                 "description": "Node metric sources for `metric` score "
                                                "rules (see docs/policy-language.md)."},
            "clusterPolicies": {"type": "boolean", "default": False, "description":
                                "Also run every SchedulingPolicy object of the cluster "
                                "(schedulingpolicies.policyd.io) that policyd accepts, "
                                "watched and applied without a restart, its verdict in "
                                "the object's status. Each is a plugin enabled by default "
                                "like a policy file's; a name or pluginName a policy file "
                                "already uses is refused on the object. Default false."},
            "featureGates": {
                # Every known gate for editors; any other name is left to validation,
                # which refuses it naming the known ones (component-base's wording).
                "type": "object",
                "properties": {g.name: {"type": "boolean", "default": g.default,
                                        "description": _gate_text(g)} for g in GATES},
                "additionalProperties": {"type": "boolean"},
                "description": "kube-scheduler v1.36's feature gates, name -> true/false, as "
                               "its --feature-gates flag sets them (`policyd run "
                               "--feature-gates` overrides each gate it names). Default: "
                               "v1.36's defaults. Gates policyd models either way: "
                               + ", ".join(g.name for g in GATES
                                           if g.modelled and not g.locked and g.scheduler)
                               + "; the others take only their v1.36 default."},
            "extenders": {
                "not": {},
                "description": "Not supported: policyd does not call scheduler extenders. "
                               "Express an extender's filter and prioritize logic as a "
                               "SchedulingPolicy's filter and score rules "
                               "(docs/compatibility.md)."},
        },
        "required": ["apiVersion", "kind"],
        "additionalProperties": False,
        "$defs": {
            "profile": profile,
            "plugins": plugins,
            "pluginSet": plugin_set,
            "plugin": plugin,
            "disabledPlugin": disabled_plugin,
            "pluginConfig": plugin_config,
            "leaderElection": leader_election,
            "clientConnection": client_connection,
            "metricsProvider": provider,
        },
    }


SCHEMA = build_schema()


def main() -> None:
    """Print the schema as JSON (regenerates schemas/profile.schema.json)."""
    json.dump(SCHEMA, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
