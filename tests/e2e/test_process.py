"""`policyd run` as a real process: exit codes, no request on a bad profile, SIGTERM,
and two replicas with leader election (kill -9 of the leader hands over)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from policyd.devcluster.ports import free_ports
from tests.e2e.helpers import Cluster, ProcessFactory, metric, scrape, scrape_when, write_profile
from tests.polling import wait_for


class CountingListener:
    """A loopback TCP listener that counts connections (and never answers)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


def _kubeconfig_for(tmp: Path, port: int) -> Path:
    path = tmp / "loopback.kubeconfig"
    path.write_text(f"""\
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: "http://127.0.0.1:{port}"}}
users:
- name: u
  user: {{token: abc}}
contexts:
- name: c
  context: {{cluster: c, user: u}}
current-context: c
""")
    return path


def _policyd(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`policyd run`; no secure port unless `args` name one (tests run side by side)."""
    if not any(a.startswith("--secure-port") for a in args):
        args = ("--secure-port", "0", *args)
    return subprocess.run([sys.executable, "-m", "policyd", "run", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_bad_profile_exits_1_before_any_request(tmp_path: Path) -> None:
    listener = CountingListener()
    try:
        kubeconfig = _kubeconfig_for(tmp_path, listener.port)
        (tmp_path / "hw.yaml").write_text(
            (Path(__file__).parents[2] / "policies" / "hw-encrypt.yaml").read_text())
        profile = tmp_path / "profile.yaml"
        profile.write_text("""\
apiVersion: policyd.io/v1alpha1
kind: PolicydConfiguration
policies: [hw.yaml]
profiles:
- schedulerName: policyd
  plugins:
    filter:
      enabled:
      - name: hwEncrypt
""")
        result = _policyd("--config", str(profile), "--kubeconfig", str(kubeconfig),
                          "--metrics-bind-address", "")
        assert result.returncode == 1, result.stderr
        assert 'plugin "hwEncrypt" is not registered; did you mean "HwEncrypt"?' \
            in result.stderr
        assert f"{profile}:9:" in result.stderr  # file:line:column
        # A broken policy file is rejected the same way.
        (tmp_path / "hw.yaml").write_text("apiVersion: policyd.io/v1alpha1\nkind: Nope\n")
        profile.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
                           "policies: [hw.yaml]\n")
        result = _policyd("--config", str(profile), "--kubeconfig", str(kubeconfig),
                          "--metrics-bind-address", "")
        assert result.returncode == 1, result.stderr
        time.sleep(0.3)
        assert listener.connections == 0
    finally:
        listener.close()


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert _policyd("--config", str(tmp_path / "missing.yaml")).returncode == 2
    profile = tmp_path / "p.yaml"
    profile.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n")
    assert _policyd("--config", str(profile), "--no-such-flag").returncode == 2
    assert _policyd("--config", str(profile), "--log-format", "xml").returncode == 2
    # Unusable credentials or metrics address: one clear line, exit 2, no traceback.
    bad = _policyd("--config", str(profile), "--kubeconfig", str(profile))
    assert bad.returncode == 2 and "cannot use the cluster credentials" in bad.stderr
    kubeconfig = _kubeconfig_for(tmp_path, 9)
    bad = _policyd("--config", str(profile), "--kubeconfig", str(kubeconfig),
                   "--metrics-bind-address", "nonsense")
    assert bad.returncode == 2 and "cannot serve metrics on 'nonsense'" in bad.stderr


def _holder(cluster: Cluster, lease: str) -> str:
    obj = cluster.lease(lease) or {}
    return str((obj.get("spec") or {}).get("holderIdentity") or "")


def test_sigterm_stops_gracefully_and_releases_the_lease(
        cluster: Cluster, processes: ProcessFactory, tmp_path: Path) -> None:
    sched = f"policyd-{uuid.uuid4().hex[:6]}"
    profile = write_profile(tmp_path, sched, policies=None)
    port = free_ports(1)[0]
    proc = processes.start("--config", str(profile), "--identity", "solo",
                           "--metrics-bind-address", f"127.0.0.1:{port}")
    cluster.node("n1")
    wait_for(lambda: _holder(cluster, sched) == "solo", 30, "leadership")
    wait_for(lambda: scrape(port, "/readyz")[0] == 200, 30, "readyz")
    cluster.pod("p", sched)
    assert cluster.wait_bound("p") == "n1"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0, processes.log(0)
    assert _holder(cluster, sched) == ""  # released: a successor need not wait


def test_two_replicas_bind_every_pod_once_and_hand_over(
        cluster: Cluster, processes: ProcessFactory, tmp_path: Path) -> None:
    sched = f"policyd-{uuid.uuid4().hex[:6]}"
    profile = write_profile(tmp_path, sched, policies=None)
    ports = free_ports(2)
    replicas = [processes.start("--config", str(profile), "--identity", f"r{i}",
                                "--metrics-bind-address", f"127.0.0.1:{ports[i]}")
                for i in range(2)]
    for i in range(3):
        cluster.node(f"n{i}")
    leader = wait_for(lambda: _holder(cluster, sched), 30, "a leader")
    li = int(leader[1])
    other = 1 - li
    wait_for(lambda: all(scrape(p, "/readyz")[0] == 200 for p in ports), 30, "both ready")
    names = [f"a-{i}" for i in range(20)]
    for n in names:
        cluster.pod(n, sched)
    for n in names:
        cluster.wait_bound(n, timeout=30)
    texts = [scrape(p)[1] for p in ports]
    scheduled = [metric(t, "scheduler_schedule_attempts_total", result="scheduled")
                 for t in texts]
    assert scheduled[li] == 20 and scheduled[other] == 0
    assert metric(texts[other], "leader_election_master_status") == 0
    wait_for(lambda: all(len(cluster.events(pod=n, reason="Scheduled")) == 1
                         for n in names), 10, "one Scheduled event per pod")

    # kill -9 the leader: no release; the other replica takes over after the lease
    # duration (4s in the test profile) and schedules what comes next.
    replicas[li].send_signal(signal.SIGKILL)
    replicas[li].wait(10)
    started = time.monotonic()
    later = [f"b-{i}" for i in range(10)]
    for n in later:
        cluster.pod(n, sched)
    for n in later:
        cluster.wait_bound(n, timeout=30)
    assert time.monotonic() - started < 20
    assert _holder(cluster, sched) == f"r{other}"
    text = scrape_when(ports[other], "scheduler_schedule_attempts_total", 10,
                       result="scheduled")
    assert metric(text, "scheduler_schedule_attempts_total", result="scheduled") == 10
    assert metric(text, "policyd_bind_errors_total") == 0
    for n in names + later:
        assert len(cluster.events(pod=n, reason="Scheduled")) == 1, n


def _ipv6_port() -> int:
    with socket.socket(socket.AF_INET6) as s:
        s.bind(("::1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except (urllib.error.URLError, OSError):
        return 0, ""


@pytest.mark.parametrize("host", ["[::1]", "[::]"])
def test_metrics_are_served_on_ipv6(cluster: Cluster, processes: ProcessFactory,
                                    tmp_path: Path, host: str) -> None:
    try:
        port = _ipv6_port()
    except OSError:
        pytest.skip("no IPv6 loopback here")
    sched = f"policyd-{uuid.uuid4().hex[:6]}"
    profile = write_profile(tmp_path, sched, policies=None)
    proc = processes.start("--config", str(profile), "--metrics-bind-address",
                           f"{host}:{port}")
    cluster.node("n1")
    wait_for(lambda: _get(f"http://[::1]:{port}/readyz")[0] == 200, 30,
             "readyz on IPv6")
    assert proc.poll() is None, processes.log(0)
    assert _get(f"http://[::1]:{port}/healthz") == (200, "ok")
    status, text = _get(f"http://[::1]:{port}/metrics")
    assert status == 200 and "leader_election_master_status" in text
    if host == "[::]":  # the wildcard takes IPv4 too, as kube-scheduler's does
        assert scrape(port, "/healthz") == (200, "ok")
    cluster.pod("p", sched)
    assert cluster.wait_bound("p") == "n1"
    assert f"on {host}:{port}" in processes.log(0)


@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
def test_a_busy_metrics_port_is_a_runtime_failure(tmp_path: Path, family: str) -> None:
    """Exit 1 (the daemon cannot run here), not 2 (usage error), with one line naming
    the address; no request is sent to the API server."""
    af, host, shown = ((socket.AF_INET, "127.0.0.1", "127.0.0.1") if family == "ipv4"
                       else (socket.AF_INET6, "::1", "[::1]"))
    listener = CountingListener()
    try:
        holder = socket.socket(af)
    except OSError:
        pytest.skip(f"no {family} here")
    try:
        try:
            holder.bind((host, 0))
        except OSError:
            pytest.skip(f"no {family} loopback here")
        holder.listen(1)
        address = f"{shown}:{holder.getsockname()[1]}"
        profile = tmp_path / "p.yaml"
        profile.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n")
        result = _policyd("--config", str(profile),
                          "--kubeconfig", str(_kubeconfig_for(tmp_path, listener.port)),
                          "--metrics-bind-address", address)
        assert result.returncode == 1, result.stderr
        assert (f"cannot serve metrics on {address!r}: the address is already in use"
                in result.stderr)
        assert "Traceback" not in result.stderr
        assert listener.connections == 0
    finally:
        holder.close()
        listener.close()
