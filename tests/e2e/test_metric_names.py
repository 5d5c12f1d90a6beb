"""policyd's /metrics and /metrics/resources against kube-scheduler v1.36.3's, live: both
schedulers run on the local control plane, each binds a pod and fails one, both pages
are scraped, and for every metric family both serve the name's type (# TYPE), its
label names and, for histograms, its bucket boundaries must be the same. The shared
part must also cover the list policyd promises (`PROMISED`), so a rename on either side
fails here instead of silently dropping out of the comparison."""

from __future__ import annotations

import json
import ssl
import urllib.request
import uuid
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from policyd.devcluster.controlplane import ControlPlane
from policyd.devcluster.ports import free_ports
from tests.e2e.helpers import Cluster, ProcessFactory, scrape, write_profile
from tests.polling import wait_for

# Families both serve once each scheduler has bound a pod and failed another (a
# family with no sample yet is not exposed by kube-scheduler's registry). Not promised:
# scheduler_plugin_execution_duration_seconds, which each side times in a random 10% of
# cycles, so it is compared only in the runs where both did; its bounds are pinned to
# kube-scheduler's in tests/unit/daemon/test_metrics.py.
PROMISED = {
    "scheduler_schedule_attempts_total", "scheduler_scheduling_attempt_duration_seconds",
    "scheduler_scheduling_algorithm_duration_seconds", "scheduler_pending_pods",
    "scheduler_unschedulable_pods", "scheduler_pod_scheduling_sli_duration_seconds",
    "scheduler_pod_scheduling_attempts", "scheduler_framework_extension_point_duration_seconds",
    "scheduler_plugin_evaluation_total", "scheduler_queue_incoming_pods_total",
    "scheduler_event_handling_duration_seconds", "scheduler_cache_size",
    "scheduler_inflight_events", "scheduler_preemption_attempts_total",
}
RESOURCES = {"kube_pod_resource_request"}


def _https(port: int, path: str) -> str:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}{path}", timeout=5,
                                    context=context) as reply:
            return str(reply.read().decode())
    except OSError:
        return ""


Shape = tuple[str, frozenset[str], tuple[float, ...]]


def _shapes(text: str) -> dict[str, Shape]:
    """name -> (type, label names, bucket boundaries) of every family with a sample."""
    out: dict[str, Shape] = {}
    for family in text_string_to_metric_families(text):
        if not family.samples:
            continue
        labels: set[str] = set()
        # Compared as numbers: Go writes le="1", Python le="1.0", the same bound.
        buckets: set[float] = set()
        for sample in family.samples:
            labels |= set(sample.labels) - {"le"}
            if sample.name.endswith("_bucket"):
                buckets.add(float(sample.labels["le"]))
        # The parser strips _total from counters; the exposed name has it.
        name = f"{family.name}_total" if family.type == "counter" else family.name
        out[name] = (family.type, frozenset(labels), tuple(sorted(buckets)))
    return out


def _compare(ours: dict[str, Shape], theirs: dict[str, Shape], promised: set[str]
             ) -> None:
    assert not promised - ours.keys(), f"policyd serves no {sorted(promised - ours.keys())}"
    assert not promised - theirs.keys(), \
        f"kube-scheduler served no {sorted(promised - theirs.keys())}"
    shared = ours.keys() & theirs.keys()
    differ = {n: (ours[n], theirs[n]) for n in sorted(shared) if ours[n] != theirs[n]}
    assert not differ, json.dumps({n: [list(map(str, a)), list(map(str, b))]
                                   for n, (a, b) in differ.items()}, indent=1)


def test_shared_metrics_have_kube_schedulers_names_types_labels_and_buckets(
        cluster: Cluster, control_plane: ControlPlane, processes: ProcessFactory,
        tmp_path: Path) -> None:
    kube, mine = f"kube-m-{uuid.uuid4().hex[:6]}", f"policyd-m-{uuid.uuid4().hex[:6]}"
    config = tmp_path / "kube-scheduler.json"
    config.write_text(json.dumps({
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration", "profiles": [{"schedulerName": kube}]}))
    ks = control_plane.start_kube_scheduler(config, extra_args=[
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,"
        "/metrics/resources"])
    try:
        (port,) = free_ports(1)
        processes.start("--config", str(write_profile(tmp_path, mine, policies=None)),
                        "--metrics-bind-address", f"127.0.0.1:{port}")
        cluster.node("m-node", cpu="4")
        for s in (kube, mine):
            cluster.pod(f"fits-{s}", s)
            cluster.pod(f"too-big-{s}", s, cpu="64")
        for s in (kube, mine):
            cluster.wait_bound(f"fits-{s}", timeout=30)
            wait_for(lambda s=s: cluster.events(pod=f"too-big-{s}",  # type: ignore[misc]
                                                reason="FailedScheduling"),
                     30, f"{s}'s FailedScheduling")
        theirs = _shapes(_https(ks.port, "/metrics"))
        their_resources = _shapes(_https(ks.port, "/metrics/resources"))
    finally:
        ks.stop()
    status, text = scrape(port)
    assert status == 200
    _compare(_shapes(text), theirs, PROMISED)
    status, resources = scrape(port, "/metrics/resources")
    assert status == 200
    _compare(_shapes(resources), their_resources, RESOURCES)
    # The same sample for the same pod: the bound pod's cpu request in cores.
    assert f'pod="fits-{mine}"' in resources and 'unit="cores"' in resources
