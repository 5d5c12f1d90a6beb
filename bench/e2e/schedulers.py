"""The schedulers under test, each started against a fresh control plane the same way:
same API server, same client QPS/burst, same bench schedulerName.

- kube-scheduler v1.36 (built by the project), the default profile under the bench
  schedulerName, at `--v=0` and with `enableContentionProfiling: false`: its v1
  configuration defaults contention profiling to true with profiling
  (pkg/scheduler/apis/config/v1/defaults.go), which costs it a few percent (the mutex
  and block profiles sample every contended lock), and policyd has nothing like it.
  "kube-scheduler-contention-profiling" keeps that default, only as an explicit
  comparison row.
- policyd (`policyd run` as a subprocess) at `-v 0` (its quietest: operations only),
  leader election off like kube-scheduler's, the example policies only for PolicyMix.
- the null scheduler (`bench.e2e.null_scheduler`): binds round-robin, evaluates nothing;
  "null-events" also posts each pod's Scheduled event, as the two real schedulers do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.e2e.shapes import SCHEDULER_NAME
from policyd.devcluster import ControlPlane
from policyd.devcluster.featuregates import format_gates
from policyd.devcluster.ports import LOOPBACK, free_ports

POLICIES = Path(__file__).resolve().parents[2] / "policies"
KUBE_SCHEDULER = "kube-scheduler"
KUBE_SCHEDULER_CONTENTION = "kube-scheduler-contention-profiling"
# The name the earlier protocol gave the row without contention profiling; its runs in
# old results files are still read (and shown) under it.
KUBE_SCHEDULER_NO_CONTENTION = "kube-scheduler-no-contention"
POLICYD = "policyd"
NULL = "null"
NULL_EVENTS = "null-events"
SCHEDULERS = (KUBE_SCHEDULER, POLICYD, NULL, NULL_EVENTS, KUBE_SCHEDULER_CONTENTION)
# Every name a results file may hold, in table order.
KNOWN_SCHEDULERS = (*SCHEDULERS, KUBE_SCHEDULER_NO_CONTENTION)
LOG_VERBOSITY = 0
# policyd binds in a pool this wide (its default, the profile's parallelism); the null
# scheduler is given the same. kube-scheduler binds each pod in its own goroutine.
PARALLEL_BINDS = 16


def is_kube_scheduler(scheduler: str) -> bool:
    return scheduler in (KUBE_SCHEDULER, KUBE_SCHEDULER_CONTENTION,
                         KUBE_SCHEDULER_NO_CONTENTION)


def posts_events(scheduler: str) -> bool:
    """Whether the scheduler posts a Scheduled event per pod (all but plain null)."""
    return scheduler != NULL


def is_null(scheduler: str) -> bool:
    """The null scheduler, with or without events: it honours no constraint."""
    return scheduler in (NULL, NULL_EVENTS)


def pod_flavour(scheduler: str) -> str:
    """Whose pod bodies a scheduler gets (PolicyMix: nodeSelector or annotation)."""
    return KUBE_SCHEDULER if is_kube_scheduler(scheduler) else POLICYD


@dataclass
class Running:
    """A started scheduler: its process, where its /metrics are, how to stop it."""

    name: str
    pid: int
    stop: Callable[[], None]
    alive: Callable[[], bool]
    log_path: Path
    metrics_url: str | None = None
    config: dict[str, Any] = field(default_factory=dict)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def kube_scheduler_config(qps: float, burst: int, contention_profiling: bool
                          ) -> dict[str, Any]:
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"qps": qps, "burst": burst},
        "profiles": [{"schedulerName": SCHEDULER_NAME}]}
    if not contention_profiling:
        config["enableContentionProfiling"] = False
    return config


def start(scheduler: str, cp: ControlPlane, workdir: Path, *, qps: float, burst: int,
          policies: bool, cpus: frozenset[int] | None = None) -> Running:
    """Start `scheduler`; `cpus` pins it (every thread) to those CPUs. kube-scheduler
    runs with the control plane's feature gates (`ControlPlane(feature_gates=...)`),
    and so does policyd (`--feature-gates`, when there are any)."""
    if is_kube_scheduler(scheduler):
        return _start_kube_scheduler(scheduler, cp, workdir, qps, burst, cpus,
                                     contention_profiling=scheduler != KUBE_SCHEDULER)
    if scheduler == POLICYD:
        return _start_policyd(cp, workdir, qps, burst, policies, cpus,
                              gates=format_gates(cp.feature_gates))
    if is_null(scheduler):
        return _start_null(scheduler, cp, workdir, qps, burst, cpus)
    raise ValueError(f"unknown scheduler {scheduler!r}")


def _start_kube_scheduler(name: str, cp: ControlPlane, workdir: Path, qps: float,
                          burst: int, cpus: frozenset[int] | None, *,
                          contention_profiling: bool) -> Running:
    path = workdir / "kube-scheduler.json"
    path.write_text(json.dumps(kube_scheduler_config(qps, burst, contention_profiling)))
    # Not waiting for /readyz: the caller reads the process's CPU time from its start,
    # and the warm-up pod's bind is the proof of readiness for every scheduler alike.
    ks = cp.start_kube_scheduler(path, wait=False, cpus=cpus,
                                 extra_args=[f"--v={LOG_VERBOSITY}"])
    return Running(name, ks.pid, ks.stop, ks.alive, ks.log_path,
                   metrics_url=f"https://{LOOPBACK}:{ks.port}/metrics",
                   config={**json.loads(ks.config_path.read_text()),
                           "argv": list(ks.process.argv[1:])})


def _subprocess(name: str, argv: list[str], workdir: Path, metrics_url: str | None,
                config: dict[str, Any], cpus: frozenset[int] | None) -> Running:
    log_path = workdir / f"{name}.log"
    log = log_path.open("wb")
    # The affinity is set in the child before exec, so every thread inherits it.
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                            preexec_fn=None if cpus is None
                            else lambda: os.sched_setaffinity(0, cpus))

    def stop() -> None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()

    return Running(name, proc.pid, stop, lambda: proc.poll() is None, log_path,
                   metrics_url=metrics_url, config=config)


def _start_policyd(cp: ControlPlane, workdir: Path, qps: float, burst: int,
                   policies: bool, cpus: frozenset[int] | None, gates: str = "") -> Running:
    profile = workdir / "policyd.yaml"
    profile.write_text(
        "apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
        "leaderElection:\n  leaderElect: false\n"
        + (f"policies:\n- {POLICIES}\n" if policies else "")
        + f"profiles:\n- schedulerName: {SCHEDULER_NAME}\n")
    (port,) = free_ports(1)
    argv = [sys.executable, "-m", "policyd", "run", "--config", str(profile),
            "--kubeconfig", str(cp.kubeconfig_path),
            "--metrics-bind-address", f"{LOOPBACK}:{port}", "--secure-port", "0",
            "--kube-api-qps", str(qps), "--kube-api-burst", str(burst),
            "--parallel-binds", str(PARALLEL_BINDS), "-v", str(LOG_VERBOSITY),
            *(["--feature-gates", gates] if gates else [])]
    return _subprocess(POLICYD, argv, workdir, f"http://{LOOPBACK}:{port}/metrics",
                       {"profile": profile.read_text(), "argv": argv[1:]}, cpus)


def _start_null(name: str, cp: ControlPlane, workdir: Path, qps: float, burst: int,
                cpus: frozenset[int] | None) -> Running:
    argv = [sys.executable, "-m", "bench.e2e.null_scheduler",
            "--kubeconfig", str(cp.kubeconfig_path), "--scheduler-name", SCHEDULER_NAME,
            "--kube-api-qps", str(qps), "--kube-api-burst", str(burst),
            "--parallel-binds", str(PARALLEL_BINDS),
            *(["--events"] if name == NULL_EVENTS else [])]
    return _subprocess(name, argv, workdir, None, {"argv": argv[1:]}, cpus)
