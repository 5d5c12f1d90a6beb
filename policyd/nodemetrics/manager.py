"""The daemon's side of node metrics: one cache, the providers the profile declares,
started after validation, swapped on reload, stopped on shutdown.

A reload keeps a provider whose settings did not change (its thread, backoff state and
values carry on) and replaces the others; metrics no provider defines any more are
dropped from the cache so a rule can never read a removed provider's leftovers.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from policyd.clock import REAL_CLOCK, Clock
from policyd.config.model import MetricsProviderConfig
from policyd.model.node_metrics import MetricsCache
from policyd.nodemetrics.providers import (
    Connect,
    NodeSource,
    Provider,
    build_providers,
    tcp_connect,
)
from policyd.nodemetrics.telemetry import ProviderTelemetry

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

log = logging.getLogger("policyd.nodemetrics")


class MetricsManager:
    def __init__(self, nodes: NodeSource, *, registry: CollectorRegistry | None = None,
                 cache: MetricsCache | None = None, clock: Clock = REAL_CLOCK,
                 connect: Connect = tcp_connect) -> None:
        self.cache = cache if cache is not None else MetricsCache(clock.wall)
        self.telemetry = ProviderTelemetry(registry)
        self.nodes = nodes
        self.clock = clock
        self.connect = connect
        self.providers: dict[str, Provider] = {}
        self._lock = threading.Lock()

    def apply(self, configs: Sequence[MetricsProviderConfig]) -> None:
        """Run exactly the providers in `configs` (start, keep or replace each)."""
        with self._lock:
            wanted = {c.name: c for c in configs}
            for name, p in list(self.providers.items()):
                if wanted.get(name) != p.config:
                    p.stop()
                    del self.providers[name]
                    log.info("metrics provider %s stopped", name)
                    if name not in wanted:
                        self._forget_series(p)
            new = [c for c in configs if c.name not in self.providers]
            for p in build_providers(new, self.cache, self.telemetry, self.nodes,
                                     clock=self.clock, connect=self.connect):
                self.providers[p.name] = p
                p.start()
                log.info("metrics provider %s (%s) started: %s every %gs, maxAge %gs",
                         p.name, p.config.kind, ", ".join(p.metrics),
                         p.config.refresh_interval, p.config.max_age)
            self.cache.retain(m for c in configs for m in c.metric_names)

    def _forget_series(self, p: Provider) -> None:
        """A removed provider's gauges would otherwise report its last state forever."""
        t = self.telemetry
        for metric in p.metrics:
            with contextlib.suppress(KeyError):
                t.values.remove(p.name, metric)
        with contextlib.suppress(KeyError):
            t.last_success.remove(p.name)

    def stop(self) -> None:
        with self._lock:
            for p in self.providers.values():
                p.request_stop()  # signal them all first: they stop in parallel
            for p in self.providers.values():
                p.stop()
            self.providers.clear()

    def debug_view(self) -> dict[str, Any]:
        view = self.cache.debug_view()
        view["providers"] = {
            name: {"kind": p.config.kind, "state": p.state, "lastError": p.last_error,
                   "consecutiveFailures": p.failures, "metrics": list(p.metrics)}
            for name, p in sorted(self.providers.items())}
        return view
