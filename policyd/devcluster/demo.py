"""The live demo: the real scheduler on a real (local) API server.

Starts the local control plane, loads the demo cluster, runs `policyd run` as its own
process against it, creates the demo pods, and reports where each went and why, from
what the API server says (the pod's node, its Scheduled / FailedScheduling events): the
same things `kubectl describe pod` shows.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policyd.devcluster.controlplane import ControlPlane
from policyd.devcluster.errors import DevClusterError
from policyd.devcluster.replay import load_snapshot, read_objects


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


def _outcomes(core: Any, pods: list[dict[str, Any]]) -> list[Outcome]:
    out = []
    for obj in pods:
        meta = obj["metadata"]
        ns, name = meta.get("namespace") or "default", meta["name"]
        pod = core.read_namespaced_pod(name, ns)
        events = core.list_namespaced_event(
            ns, field_selector=f"involvedObject.kind=Pod,involvedObject.name={name}").items
        events.sort(key=lambda e: (e.last_timestamp or e.event_time or e.first_timestamp
                                   or e.metadata.creation_timestamp))
        last = events[-1] if events else None
        out.append(Outcome(f"{ns}/{name}", pod.spec.node_name,
                           last.reason if last else "", last.message if last else ""))
    return out


def run_live_demo(demo_dir: Path, *, timeout: float = 60.0,
                  say: Callable[[str], None] = print) -> list[Outcome]:
    """Run the demo end to end and return each demo pod's outcome."""
    from kubernetes import client

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
            core = client.CoreV1Api(cp.api_client())

            def settled() -> bool:
                return all(o.node or o.reason == "FailedScheduling"
                           for o in _outcomes(core, pod_objects))

            _wait(settled, timeout)
            return _outcomes(core, pod_objects)
        finally:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
