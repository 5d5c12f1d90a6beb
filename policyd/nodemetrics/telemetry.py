"""The providers' own Prometheus metrics, registered in the daemon's registry.

Separate from the values they collect: these say whether the collection works
(`last_success_timestamp`, errors by reason, how many values are cached).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class ProviderTelemetry:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry if registry is not None else CollectorRegistry()
        self.registry = r
        self.last_success = Gauge(
            "policyd_node_metrics_last_success_timestamp_seconds",
            "Unix time of each metrics provider's last successful refresh.",
            ["provider"], registry=r)
        self.errors = Counter(
            "policyd_node_metrics_errors",
            "Failed refreshes and dropped values of node metrics providers, by reason "
            "(timeout, connection, http_status, bad_response, not_a_number, nan, "
            "infinite, negative, missing_node_label, duplicate, no_address, "
            "probe_failed, token, internal).",
            ["provider", "reason"], registry=r)
        self.values = Gauge(
            "policyd_node_metrics_values",
            "Node values currently cached (not aged out), per provider and metric.",
            ["provider", "metric"], registry=r)
