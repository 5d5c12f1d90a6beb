"""The live demo: the real scheduler on a real (local) API server.

Starts the local control plane, loads the demo cluster, runs `policyd run` as its own
process against it, creates the demo pods, and reports where each went and why, from
what the API server says (the pod's node, its Scheduled / FailedScheduling events): the
same things `kubectl describe pod` shows.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from policyd.devcluster.controlplane import ControlPlane
from policyd.devcluster.errors import DevClusterError
from policyd.devcluster.kubeconfig import kube_client_from
from policyd.devcluster.replay import load_snapshot, read_objects
from policyd.kube.client import KubeClient


@dataclass
class Outcome:
    pod: str  # namespace/name
    node: str | None
    reason: str  # Scheduled, FailedScheduling, or "" when nothing happened in time
    message: str


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as r:  # loopback only
            return bool(r.status == 200)
    except OSError:
        return False


def _when(event: Mapping[str, Any]) -> datetime:
    """When an event last happened, by the first time field it has (as kubectl)."""
    stamp = (event.get("lastTimestamp") or event.get("eventTime")
             or event.get("firstTimestamp") or event["metadata"]["creationTimestamp"])
    return datetime.fromisoformat(stamp)


def _outcomes(kube: KubeClient, pods: list[dict[str, Any]]) -> list[Outcome]:
    out = []
    for obj in pods:
        meta = obj["metadata"]
        ns, name = meta.get("namespace") or "default", meta["name"]
        pod = kube.request("GET", f"/api/v1/namespaces/{quote(ns, safe='')}/pods/"
                                  f"{quote(name, safe='')}")
        events = kube.request(
            "GET", f"/api/v1/namespaces/{quote(ns, safe='')}/events",
            query={"fieldSelector": f"involvedObject.kind=Pod,involvedObject.name={name}"},
        ).get("items") or []
        events.sort(key=_when)
        last = events[-1] if events else None
        out.append(Outcome(f"{ns}/{name}", (pod.get("spec") or {}).get("nodeName"),
                           last.get("reason") if last else "",
                           last.get("message") if last else ""))
    return out


def run_live_demo(demo_dir: Path, *, timeout: float = 60.0,
                  say: Callable[[str], None] = print,
                  then: Callable[[list[Outcome], Path], None] | None = None
                  ) -> list[Outcome]:
    """Run the demo end to end and return each demo pod's outcome. `then`, if given,
    is called with the outcomes and the cluster's kubeconfig while the cluster and the
    daemon still run (for commands that read the cluster the daemon scheduled)."""
    profile = demo_dir / "profile.yaml"
    cluster_objects = read_objects(demo_dir / "cluster.yaml")
    pod_objects = read_objects(demo_dir / "pods.yaml")
    say("starting a local control plane (etcd, kube-apiserver) on 127.0.0.1 ...")
    with ControlPlane() as cp:
        loaded = load_snapshot(cp.kubeconfig_path, cluster_objects)
        say(f"loading the demo cluster: {loaded.summary()}")
        port = _free_port()
        log_path = Path(cp.kubeconfig_path).parent / "policyd.log"
        cmd = [sys.executable, "-m", "policyd", "run", "--config", str(profile),
               "--kubeconfig", str(cp.kubeconfig_path),
               "--metrics-bind-address", f"127.0.0.1:{port}", "--secure-port", "0",
               "-v", "2"]
        say("starting: policyd run --config " + str(profile))
        with log_path.open("w") as log:
            daemon = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                      env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            if not _wait(lambda: _ready(f"http://127.0.0.1:{port}/readyz"), timeout):
                tail = log_path.read_text()[-2000:]
                raise DevClusterError(f"policyd run did not become ready:\n{tail}")
            created = load_snapshot(cp.kubeconfig_path, pod_objects)
            say(f"creating the demo pods: {created.summary()}")
            with contextlib.closing(kube_client_from(cp.kubeconfig_path)) as kube:

                def settled() -> bool:
                    return all(o.node or o.reason == "FailedScheduling"
                               for o in _outcomes(kube, pod_objects))

                _wait(settled, timeout)
                outcomes = _outcomes(kube, pod_objects)
            if then is not None:
                then(outcomes, Path(cp.kubeconfig_path))
            return outcomes
        finally:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
