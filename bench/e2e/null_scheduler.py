"""The null scheduler: what this API server can bind per second on this machine.

It does everything a scheduler must do to get a pod bound and nothing else: policyd's
own client (`KubeClient`, same QPS/burst), policyd's informers on nodes and pods (same
paged list, same watch), and a pool of binders as wide as policyd's (`--parallel-binds`,
default the profile parallelism 16) posting the same Binding (uid precondition). Each
pending pod with the benchmark's schedulerName goes to the next node round-robin,
without evaluating anything, in the order of a PrioritySort queue (higher
`spec.priority` first, then first seen), the one thing every scheduler does before
binding: so the benchmark's warm-up pod goes first here too. Its capacity is the
ceiling any scheduler on this API server can reach; the benchmark reports the real
schedulers as a fraction of it.

With `--events` it also posts each bound pod's Scheduled event through policyd's own
event writer (`EventSink`: its own token bucket, four writer threads, the same body),
as kube-scheduler and policyd do: the ceiling of a scheduler that tells its pods where
they went, which shows how much of the plain ceiling the events alone take.

    python -m bench.e2e.null_scheduler --kubeconfig PATH --scheduler-name NAME [--events]
"""

from __future__ import annotations

import argparse
import itertools
import logging
import queue
import signal
import sys
import threading
import time

from bench.e2e.shapes import SCHEDULER_NAME, Obj
from policyd.daemon.event_recorder import EventSink
from policyd.daemon.metrics import Metrics
from policyd.kube import api
from policyd.kube.client import ApiError, ConnectionSettings, KubeClient
from policyd.kube.informer import Informer, object_uid

log = logging.getLogger("null-scheduler")
DEFAULT_PARALLEL_BINDS = 16  # policyd's default (the profile's parallelism)
BIND_ATTEMPTS = 5


class NullScheduler:
    def __init__(self, client: KubeClient, scheduler_name: str, binders: int,
                 events: EventSink | None = None) -> None:
        self.client = client
        self.scheduler_name = scheduler_name
        self.events = events
        self.nodes: list[str] = []
        self._next = itertools.count()
        self._taken: set[str] = set()  # uids handed to a binder
        self._lock = threading.Lock()
        self._queue: queue.PriorityQueue[tuple[int, int, str, str, str]] = \
            queue.PriorityQueue()
        self._seen = itertools.count()
        self._binders = [threading.Thread(target=self._binder, name=f"null-bind-{i}",
                                          daemon=True) for i in range(binders)]
        for thread in self._binders:
            thread.start()
        self.bound = 0

    def add_node(self, name: str) -> None:
        with self._lock:
            self.nodes.append(name)

    def remove_node(self, name: str) -> None:
        with self._lock:
            self.nodes.remove(name)

    # Pod informer handler: every pending pod of ours is bound once.
    def on_add(self, obj: Obj) -> None:
        self._consider(obj)

    def on_update(self, old: Obj, new: Obj) -> None:
        self._consider(new)

    def on_delete(self, obj: Obj) -> None:
        pass

    def _consider(self, pod: Obj) -> None:
        spec = pod.get("spec") or {}
        if spec.get("schedulerName") != self.scheduler_name or spec.get("nodeName"):
            return
        uid = object_uid(pod)
        with self._lock:
            if uid in self._taken:
                return
            self._taken.add(uid)
        meta = pod["metadata"]
        self._queue.put((-int(spec.get("priority") or 0), next(self._seen),
                         meta["namespace"], meta["name"], meta.get("uid", "")))

    def _binder(self) -> None:
        while True:
            _, _, namespace, name, uid = self._queue.get()
            if not name:  # shutdown()
                return
            with self._lock:
                node = self.nodes[next(self._next) % len(self.nodes)]
            self._bind(namespace, name, uid, node)

    def _bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        for attempt in range(BIND_ATTEMPTS):
            try:
                outcome = api.bind_pod(self.client, namespace, name, uid, node)
            except ApiError as exc:
                if not exc.transient or attempt == BIND_ATTEMPTS - 1:
                    log.warning("binding %s/%s failed: %s", namespace, name, exc)
                    return
                time.sleep(0.2 * 2**attempt)
                continue
            if outcome is api.BindOutcome.BOUND:
                with self._lock:
                    self.bound += 1
                if self.events is not None:
                    self.events.scheduled(namespace, name, uid, node, self.scheduler_name)
            return

    def shutdown(self) -> None:
        """Stop the binders once the queue is empty (their wake-up sorts last)."""
        for _ in self._binders:
            self._queue.put((2**63, next(self._seen), "", "", ""))
        for thread in self._binders:
            thread.join(30)


class NodeNames:
    """The node informer's handler: the round-robin needs only the names."""

    def __init__(self, null: NullScheduler) -> None:
        self.null = null

    def on_add(self, obj: Obj) -> None:
        self.null.add_node(obj["metadata"]["name"])

    def on_update(self, old: Obj, new: Obj) -> None:
        pass

    def on_delete(self, obj: Obj) -> None:
        self.null.remove_node(obj["metadata"]["name"])


def serve(client: KubeClient, scheduler_name: str, binders: int, events: EventSink | None,
          stop: threading.Event) -> NullScheduler:
    """Bind until `stop` is set; returns the scheduler (its `bound` count)."""
    null = NullScheduler(client, scheduler_name, binders, events)
    nodes = Informer(client, "/api/v1/nodes", NodeNames(null), name="nodes")
    pods = Informer(client, "/api/v1/pods", null, name="pods")
    threads = [threading.Thread(target=nodes.run, args=(stop,), daemon=True)]
    threads[0].start()
    # Pods only once the nodes are known: the round-robin needs somewhere to go.
    while not nodes.synced.wait(0.1):
        if stop.is_set():
            nodes.stop()
            null.shutdown()
            return null
    threads.append(threading.Thread(target=pods.run, args=(stop,), daemon=True))
    threads[1].start()
    while not pods.synced.wait(0.1) and not stop.is_set():
        pass
    log.info("caches synced: %d nodes", len(null.nodes))
    stop.wait()
    nodes.stop()
    pods.stop()
    null.shutdown()
    return null


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--scheduler-name", default=SCHEDULER_NAME)
    parser.add_argument("--kube-api-qps", type=float, default=50.0)
    parser.add_argument("--kube-api-burst", type=int, default=100)
    parser.add_argument("--parallel-binds", type=int, default=DEFAULT_PARALLEL_BINDS)
    parser.add_argument("--events", action="store_true",
                        help="post each bound pod's Scheduled event, as policyd does")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    client = KubeClient.connect(ConnectionSettings(
        kubeconfig=args.kubeconfig, qps=args.kube_api_qps, burst=args.kube_api_burst))
    events = EventSink(client.with_own_limiter(), Metrics(), "null-scheduler") \
        if args.events else None
    if events is not None:
        events.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    null = serve(client, args.scheduler_name, args.parallel_binds, events, stop)
    if events is not None:
        events.stop(5.0)
    log.info("stopped after %d binds", null.bound)
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
