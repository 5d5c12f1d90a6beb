"""Keeps the audit's OpenReports (one Report per namespace, one ClusterReport) up to
date in the cluster, when the openreports.io CRDs are served.

One thread. Every `interval` seconds, when this replica leads and something changed
since the last round (the cluster state's generation, the frameworks after a reload),
it audits the bound pods on the scheduler's own state (`engine.audit`, under the state
lock: the audit takes each pod off its node for the question and puts it back; at
5,000 nodes and 49,500 bound pods that holds the lock about 0.7 s, `bench.reports_bench`,
so the interval is the price of freshness), turns the findings into report objects
(`engine.openreports`), and writes only what differs: it lists the reports it manages
(by their label), creates the missing ones, updates the changed ones (PUT with the
listed resourceVersion: a 409 is retried next round) and deletes those whose scope
has no finding left. The names are fixed (`policyd` in each namespace and for the
ClusterReport), so a new leader finds and updates the same objects: a leader change
never duplicates a report.

Each result keeps the time it was first seen while it stays, so an unchanged audit
writes nothing. Without the CRDs it says so once and asks again every round (a CRD
installed later is picked up). An API error is logged and counted, never fatal.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from policyd.clock import REAL_CLOCK, Clock
from policyd.daemon.scheduling_state import SchedulingState
from policyd.engine.audit import audit, by_scheduler, label_case_mismatches
from policyd.engine.device_audit import audit_devices
from policyd.engine.openreports import (
    DEFAULT_MAX_RESULTS,
    MANAGED_BY,
    REPORT_NAME,
    findings,
    reports,
)
from policyd.kube import api
from policyd.kube.client import ApiError, KubeClient
from policyd.policy.compiler import profile_policies

log = logging.getLogger("policyd.daemon.reports")

DEFAULT_INTERVAL_S = 10.0
SELECTOR = f"{MANAGED_BY[0]}={MANAGED_BY[1]}"
# The fields a report's content is compared by (metadata: its annotations only).
CONTENT = ("source", "scope", "configuration", "summary", "results")


class ReportWriter:
    def __init__(self, client: KubeClient, state: SchedulingState, *,
                 is_leader: Callable[[], bool], interval: float = DEFAULT_INTERVAL_S,
                 max_results: int = DEFAULT_MAX_RESULTS, clock: Clock = REAL_CLOCK) -> None:
        self.client = client
        self.state = state
        self.is_leader = is_leader
        self.interval = interval
        self.max_results = max_results
        self.clock = clock
        self._first_seen: dict[tuple[Any, ...], float] = {}
        self._done: tuple[int, int] | None = None  # (generation, frameworks) written
        self._served: bool | None = None
        self.writes = 0  # objects created, updated or deleted (tests, debugging)
        self.errors = 0

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval):
            if not self.is_leader():
                self._done = None  # a new term writes what it finds, once
                continue
            try:
                self.sync_once()
            except ApiError as exc:
                self.errors += 1
                log.warning("writing the OpenReports failed (retried in %.0fs): %s",
                            self.interval, exc)
            except Exception:  # a bug must not end the writer
                self.errors += 1
                log.exception("writing the OpenReports failed")

    def sync_once(self) -> bool:
        """One round: audit if anything changed, then write what differs. False when
        the reports are not served."""
        existing = api.list_own_reports(self.client, SELECTOR)
        if existing is None:
            if self._served is not False:
                log.info("openreports.io Report/ClusterReport not served: the audit's "
                         "reports are off until the CRDs are installed "
                         "(deploy/crds/openreports.io_reports.yaml)")
            self._served = False
            return False
        if not self._served:
            self._done = None
        self._served = True
        with self.state.lock:
            if self._marker() == self._done:
                return True
        wanted, marker = self.desired()
        self._write(wanted, existing)
        self._done = marker
        return True

    def _marker(self) -> tuple[int, int]:
        """What the audit depends on, under the lock: the state (every change counts
        up its generation) and the frameworks (replaced whole by a reload)."""
        return (self.state.cluster.generation, id(self.state.frameworks))

    def desired(self) -> tuple[dict[str, dict[str, Any]], tuple[int, int]]:
        """The reports the state's audit calls for now, by namespace ("": cluster),
        and the state they were made from (the audit's own what-ifs counted)."""
        with self.state.lock:
            frameworks = self.state.frameworks
            per_profile = {name: profile_policies(fw) for name, fw in frameworks.items()}
            cluster = self.state.cluster
            pods = cluster.assigned_pods()
            result = audit(cluster, pods, by_scheduler(per_profile))
            result.devices = audit_devices(cluster, pods)
            nodes = [info.node for info in cluster.node_infos()]
            marker = self._marker()
        result.label_case = label_case_mismatches(
            [p for found in per_profile.values() for p in found], nodes)
        found = findings(result)
        now = self.clock.now()
        seen = {f.key: self._first_seen.get(f.key, now) for f in found}
        self._first_seen = seen
        return reports(found, lambda f: seen[f.key], self.max_results), marker

    def _write(self, wanted: Mapping[str, dict[str, Any]],
               existing: list[dict[str, Any]]) -> None:
        have = {(o.get("metadata") or {}).get("namespace") or "": o for o in existing
                if (o.get("metadata") or {}).get("name") == REPORT_NAME}
        for scope, obj in wanted.items():
            current = have.pop(scope, None)
            if current is None:
                api.create_object(self.client, obj)
                self._wrote("created", obj)
            elif _content(current) != _content(obj):
                obj["metadata"]["resourceVersion"] = current["metadata"].get("resourceVersion")
                api.update_object(self.client, obj)
                self._wrote("updated", obj)
        for obj in have.values():  # no finding left in its scope
            try:
                api.delete_object(self.client, obj)
            except ApiError as exc:
                if exc.status != 404:
                    raise
            self._wrote("deleted", obj)

    def _wrote(self, what: str, obj: Mapping[str, Any]) -> None:
        self.writes += 1
        meta = obj.get("metadata") or {}
        where = meta.get("namespace") or "(cluster)"
        summary = obj.get("summary") or {}
        log.info("%s %s %s: %s", what, obj.get("kind"), where,
                 ", ".join(f"{k} {v}" for k, v in summary.items() if v) or "no results")


def _content(obj: Mapping[str, Any]) -> Any:
    annotations = ((obj.get("metadata") or {}).get("annotations") or {})
    return ([obj.get(k) for k in CONTENT],
            {k: v for k, v in annotations.items() if k.startswith("policyd.io/")})
