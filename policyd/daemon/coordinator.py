"""The daemon's scheduler: event handling, the scheduling loop and the binder, wired
together over one shared state.

Each piece is its own module and reads alone: `event_handlers` (informer callbacks ->
cluster state and queue moves), `scheduling_loop` (pop, cycle, assume or requeue),
`binder` (bind with retries, confirm lost replies, undo), `scheduling_state` (what they
share, under one lock). `Scheduler` only builds them and offers the surface the rest
of the daemon uses: the informer callbacks, `run`, reload, gauges and shutdown.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from policyd.clock import REAL_CLOCK, Clock
from policyd.daemon import debug
from policyd.daemon.binder import Binder
from policyd.daemon.event_handlers import EventHandlers
from policyd.daemon.event_recorder import EventSink
from policyd.daemon.metrics import PENDING_QUEUES, Metrics, instrument, label_children
from policyd.daemon.preemption import PreemptionActions
from policyd.daemon.scheduling_loop import SchedulingLoop
from policyd.daemon.scheduling_state import SchedulingState
from policyd.features import DEFAULTS, FeatureGates
from policyd.framework.runtime import Framework
from policyd.kube.client import KubeClient
from policyd.model.records import Node, Pod


class Scheduler:
    """The pieces, built over one state; their entry points offered as its own."""

    def __init__(
        self,
        client: KubeClient,
        frameworks: dict[str, Framework],
        *,
        metrics: Metrics,
        events: EventSink,
        is_leader: Callable[[], bool] = lambda: True,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        binders: int = 16,
        verbosity: int = 0,
        clock: Clock = REAL_CLOCK,
        gates: FeatureGates = DEFAULTS,
    ) -> None:
        for fw in frameworks.values():
            instrument(fw, metrics)
        # The process's feature gates (as upstream's, one set for every profile).
        state = SchedulingState(frameworks, now=clock.now, initial_backoff=initial_backoff,
                                max_backoff=max_backoff, gates=gates)
        self.state = state
        self.client = client
        self.metrics = metrics
        incoming = label_children(metrics.queue_incoming)
        state.queue.on_incoming = lambda queue, event: incoming(queue, event).inc()
        self.events = events
        self.clock = clock
        self.handlers = EventHandlers(state, metrics=metrics, events=events,
                                      is_leader=is_leader)
        self.binder = Binder(client, state, metrics=metrics, events=events,
                             is_leader=is_leader, clock=clock, workers=binders,
                             verbosity=verbosity, gates=gates)
        self.preemption = PreemptionActions(client, state, events, verbosity=verbosity)
        self.loop = SchedulingLoop(state, self.binder, metrics=metrics, events=events,
                                   is_leader=is_leader, clock=clock, verbosity=verbosity,
                                   preemption=self.preemption)
        h = self.handlers
        self.on_pod_add, self.on_pod_update, self.on_pod_delete = (
            h.on_pod_add, h.on_pod_update, h.on_pod_delete)
        self.on_node_add, self.on_node_update, self.on_node_delete = (
            h.on_node_add, h.on_node_update, h.on_node_delete)
        self.on_namespace = h.on_namespace
        self.on_workload, self.on_workload_update = h.on_workload, h.on_workload_update
        self.on_storage, self.on_storage_update, self.on_storage_delete = (
            h.on_storage, h.on_storage_update, h.on_storage_delete)
        self.on_dra, self.on_dra_update, self.on_dra_delete = (
            h.on_dra, h.on_dra_update, h.on_dra_delete)
        self.run = self.loop.run
        self.schedule = self.loop.schedule
        # The shared state, as tests and the e2e helpers reach for it.
        self.lock = state.lock
        self.cluster = state.cluster
        self.queue = state.queue
        self.assumed = state.assumed
        self.throttle = state.throttle

    @property
    def frameworks(self) -> dict[str, Framework]:
        return self.state.frameworks

    @property
    def bound_total(self) -> int:
        return self.binder.bound_total

    @property
    def heartbeat(self) -> float:
        """When the scheduling loop last came round (the clock's `now`), for /healthz."""
        return self.loop.heartbeat

    def set_frameworks(self, frameworks: dict[str, Framework]) -> None:
        """Swap profiles (hot reload) and give every waiting pod another chance."""
        for fw in frameworks.values():
            instrument(fw, self.metrics)
        self.state.set_frameworks(frameworks)

    def debug_queue(self) -> dict[str, Any]:
        return debug.queue_view(self.state, self.clock.now())

    def pods_snapshot(self) -> list[Pod]:
        """Every unfinished pod the cluster state holds, pending or assigned (for
        /metrics/resources, from the HTTP threads)."""
        with self.state.lock:
            cluster = self.state.cluster
            return cluster.pending_pods() + cluster.assigned_pods()

    def nodes_snapshot(self) -> list[Node]:
        """The current Node records (for node metric probes, from other threads)."""
        with self.state.lock:
            return [info.node for info in self.state.cluster.node_infos()]

    def update_gauges(self) -> None:
        """The gauges read from the scheduling state as /metrics is scraped."""
        m, queue = self.metrics, self.state.queue
        counts = queue.counts()
        for name in PENDING_QUEUES:
            m.pending_pods.labels(name).set(counts.get(name, 0))
        m.set_gauge(m.unschedulable_pods,
                    {key: float(n) for key, n in queue.unschedulable_plugins().items()})
        m.set_gauge(m.inflight_events,
                    {(label,): float(n) for label, n in queue.in_flight_events().items()})
        with self.state.lock:
            nodes = len(self.state.cluster.node_infos())
            pods = self.state.cluster.assigned_count
            assumed = len(self.state.assumed)
        for kind, n in (("nodes", nodes), ("pods", pods), ("assumed_pods", assumed)):
            m.cache_size.labels(kind).set(n)

    def shutdown(self, grace: float) -> bool:
        """Stop taking pods, let in-flight binds finish within `grace` seconds."""
        self.loop.stopping.set()
        self.state.queue.close()
        # Pods held at Permit would hold the grace period for nothing: given up now.
        self.binder.stop_waiting()
        finished = self.binder.wait(grace)
        self.binder.shutdown()
        # Victims' deletions in flight finish or are cut off with the process; what
        # they leave undone a restarted daemon redoes from the nomination on the API.
        self.preemption.wait(min(grace, 1.0))
        return finished
