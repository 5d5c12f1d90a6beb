"""`policyd run --log-format json` writes what kube-scheduler's `--logging-format json`
writes (klog's JSON format), so one log pipeline parses both: the two schedulers run
side by side on the local control plane at -v 2, each binds a pod, and their "bound"
lines are compared key by key: the same keys of the same JSON types, the pod as klog
writes an object reference, `v` where kube-scheduler has it."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

from policyd.devcluster.controlplane import ControlPlane
from tests.e2e.helpers import Cluster, ProcessFactory, write_profile
from tests.polling import wait_for

CALLER = re.compile(r"^[\w.-]+/[\w.-]+:\d+$")


def _lines(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def _bound_line(lines: list[dict[str, Any]], pod: str) -> dict[str, Any] | None:
    for line in lines:
        ref = line.get("pod")
        if isinstance(ref, dict) and ref.get("name") == pod and "bound" in line["msg"].lower():
            return line
    return None


def _shape(line: dict[str, Any]) -> dict[str, str]:
    return {key: type(value).__name__ for key, value in line.items()}


def test_policyd_json_lines_parse_as_kube_schedulers(
        cluster: Cluster, control_plane: ControlPlane, processes: ProcessFactory,
        tmp_path: Path) -> None:
    kube, policyd = f"kube-log-{uuid.uuid4().hex[:6]}", f"policyd-log-{uuid.uuid4().hex[:6]}"
    config = tmp_path / "kube-scheduler.json"
    config.write_text(json.dumps({
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration", "profiles": [{"schedulerName": kube}]}))
    ks = control_plane.start_kube_scheduler(config,
                                            extra_args=["--logging-format=json", "-v=2"])
    try:
        processes.start("--config", str(write_profile(tmp_path, policyd, policies=None)),
                        "--metrics-bind-address", "127.0.0.1:0",
                        "--log-format", "json", "-v", "2")
        cluster.node("log-node", cpu="4")
        for s in (kube, policyd):
            cluster.pod(f"log-{s}", s)
        for s in (kube, policyd):
            cluster.wait_bound(f"log-{s}", timeout=30)
        wait_for(lambda: _bound_line(_lines(ks.log_path.read_text(errors="replace")),
                                     f"log-{kube}") is not None, 10, "kube-scheduler's line")
        wait_for(lambda: _bound_line(_lines(processes.log(0)), f"log-{policyd}") is not None,
                 10, "policyd's line")
    finally:
        ks.stop()
    theirs = _bound_line(_lines(ks.log_path.read_text(errors="replace")), f"log-{kube}")
    ours = _bound_line(_lines(processes.log(0)), f"log-{policyd}")
    assert theirs is not None and ours is not None
    # Every key kube-scheduler's bound line has that policyd has too, of the same JSON
    # type (kube-scheduler adds counts policyd does not log: evaluatedNodes, ...).
    shared = {"ts", "caller", "msg", "v", "pod", "node"}
    assert shared <= theirs.keys() and shared <= ours.keys(), (theirs, ours)
    assert {k: _shape(theirs)[k] for k in shared} == {k: _shape(ours)[k] for k in shared}
    for line, pod in ((theirs, f"log-{kube}"), (ours, f"log-{policyd}")):
        assert line["pod"] == {"name": pod, "namespace": cluster.ns}
        assert line["node"] == "log-node"
        assert CALLER.match(line["caller"]), line["caller"]
        assert line["v"] >= 1
    # Both stamp milliseconds since the epoch, a few seconds apart at most.
    assert abs(theirs["ts"] - ours["ts"]) < 60_000
    # Every JSON line of policyd's is a klog one: ts, msg and caller, no level of its own,
    # and `v` or (an error) none.
    for line in _lines(processes.log(0)):
        assert {"ts", "caller", "msg"} <= line.keys() and "level" not in line
