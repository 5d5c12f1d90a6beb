"""/configz as kube-scheduler v1.36.3 serves it: both schedulers started on the local
control plane with the same KubeSchedulerConfiguration file, both pages read, and
compared field by field: the same component name, kind and apiVersion, the same
top-level fields and profile fields, the same values where the file sets them."""

from __future__ import annotations

import json
import ssl
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from policyd.devcluster.controlplane import ControlPlane
from policyd.devcluster.ports import free_ports
from tests.e2e.helpers import ProcessFactory
from tests.polling import wait_for


def _get(url: str) -> dict[str, Any] | None:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as reply:
            page: dict[str, Any] = json.load(reply)
            return page
    except OSError:
        return None


def test_configz_has_kube_schedulers_fields(control_plane: ControlPlane,
                                            processes: ProcessFactory,
                                            tmp_path: Path) -> None:
    scheduler = f"configz-{uuid.uuid4().hex[:6]}"
    config = tmp_path / "kube-scheduler.yaml"
    config.write_text(f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {control_plane.kubeconfig_path}
  qps: 120
  burst: 240
leaderElection:
  leaderElect: false
podMaxBackoffSeconds: 7
profiles:
  - schedulerName: {scheduler}
""")
    ks = control_plane.start_kube_scheduler(config, extra_args=[
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/configz"])
    try:
        theirs = wait_for(lambda: _get(f"https://127.0.0.1:{ks.port}/configz"), 30,
                          "kube-scheduler's /configz")
    finally:
        ks.stop()
    (port,) = free_ports(1)
    processes.start("--config", str(config), "--metrics-bind-address", f"127.0.0.1:{port}")
    ours = wait_for(lambda: _get(f"http://127.0.0.1:{port}/configz"), 30, "policyd's /configz")
    mine, upstream = ours["componentconfig"], theirs["componentconfig"]
    assert (mine["apiVersion"], mine["kind"]) == (upstream["apiVersion"], upstream["kind"])
    assert set(mine) == set(upstream), (sorted(mine), sorted(upstream))
    for field in ("podMaxBackoffSeconds", "podInitialBackoffSeconds", "parallelism"):
        assert mine[field] == upstream[field], field
    assert (mine["clientConnection"]["qps"], mine["clientConnection"]["burst"]) == (
        upstream["clientConnection"]["qps"], upstream["clientConnection"]["burst"])
    [profile], [their_profile] = mine["profiles"], upstream["profiles"]
    assert profile["schedulerName"] == their_profile["schedulerName"] == scheduler
    assert set(profile) == set(their_profile), (sorted(profile), sorted(their_profile))
