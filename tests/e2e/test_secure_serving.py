"""Secure serving against the real API server: bearer tokens of real ServiceAccounts
checked with TokenReview, access with SubjectAccessReview under the RBAC authorizer.

No token -> 401; a ServiceAccount without the non-resource permission -> 403; one with
it -> 200; /healthz, /readyz, /livez open; /debug/queue behind the same checks; the API
server unreachable -> cached decisions honoured for their TTL, then denied.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from policyd.daemon.serving import ALLOW_CACHE_TTL, DENY_CACHE_TTL, TOKEN_CACHE_TTL
from policyd.devcluster import ControlPlane
from policyd.devcluster.faultproxy import FaultProxy
from policyd.devcluster.ports import free_ports
from policyd.kube.client import ApiError
from tests.e2e.helpers import Cluster, DaemonFactory, ProcessFactory, metric, write_profile
from tests.polling import wait_for


def get(port: int, path: str, token: str | None = None) -> tuple[int, str]:
    """GET over HTTPS, the daemon's self-signed certificate accepted as it is."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    req = urllib.request.Request(f"https://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30, context=ctx) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@dataclass
class Tokens:
    reader: str  # may get /metrics and /debug/queue
    stranger: str  # a valid ServiceAccount without the permission
    late: str  # a valid, permitted ServiceAccount first seen during an outage


@pytest.fixture
def tokens(cluster: Cluster) -> Iterator[Tokens]:
    """ServiceAccounts with TokenRequest tokens, and a ClusterRole/Binding granting
    `get` on the non-resource URLs /metrics and /debug/queue to `reader` and `late`."""
    c, ns = cluster.client, cluster.ns
    role = f"e2e-metrics-reader-{uuid.uuid4().hex[:6]}"

    def token(name: str) -> str:
        c.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts",
                  body={"apiVersion": "v1", "kind": "ServiceAccount",
                        "metadata": {"name": name}})
        reply = c.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token",
                          body={"apiVersion": "authentication.k8s.io/v1",
                                "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}})
        return str(reply["status"]["token"])

    c.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", body={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": role},
        "rules": [{"nonResourceURLs": ["/metrics", "/debug/queue"], "verbs": ["get"]}]})
    c.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", body={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": role},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": n, "namespace": ns}
                     for n in ("reader", "late")]})
    try:
        yield Tokens(token("reader"), token("stranger"), token("late"))
    finally:
        for kind in ("clusterrolebindings", "clusterroles"):
            with contextlib.suppress(ApiError):
                c.request("DELETE", f"/apis/rbac.authorization.k8s.io/v1/{kind}/{role}")


def test_tokens_and_permissions_decide(cluster: Cluster, daemons: DaemonFactory,
                                       tokens: Tokens, tmp_path: Path) -> None:
    sched = f"policyd-{uuid.uuid4().hex[:6]}"
    port = free_ports(1)[0]
    d = daemons.start(write_profile(tmp_path, sched, policies=None), secure_port=port,
                      bind_address="127.0.0.1", metrics_bind_address="")
    assert d.http is None and d.https is not None
    cluster.node("n1")
    cluster.pod("visible-pod", sched, cpu="100")  # fits nowhere: stays in the queue
    wait_for(lambda: cluster.events("visible-pod", "FailedScheduling"), 30,
             "FailedScheduling")

    # Health: open to anyone, no token needed (kubelet probes carry none).
    for path in ("/healthz", "/readyz", "/livez"):
        assert get(port, path) == (200, "ok")
        assert get(port, path, "not-a-token") == (200, "ok")

    # /metrics/resources behind the same guard as /metrics, as kube-scheduler serves it.
    for path in ("/metrics", "/metrics/resources", "/debug/queue", "/debug/metrics-cache"):
        status, body = get(port, path)
        assert status == 401, (path, body)
        assert get(port, path, "not-a-token")[0] == 401
        status, body = get(port, path, tokens.stranger)
        assert status == 403, (path, body)
        assert f"system:serviceaccount:{cluster.ns}:stranger" in body
        assert "visible-pod" not in body

    status, body = get(port, "/metrics", tokens.reader)
    assert status == 200 and metric(body, "leader_election_master_status") == 1
    status, body = get(port, "/debug/queue", tokens.reader)
    assert status == 200 and "visible-pod" in body
    # Granted /metrics and /debug/queue, not the rest of /debug.
    assert get(port, "/debug/metrics-cache", tokens.reader)[0] == 403
    # No plain HTTP on the secure port.
    with pytest.raises((urllib.error.URLError, OSError)):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5)


def test_unreachable_api_server_cached_then_closed(
        control_plane: ControlPlane, cluster: Cluster, tokens: Tokens,
        tmp_path: Path) -> None:
    """The daemon reaches the API server through a proxy that is then shut: decisions
    it has are honoured for their TTL, nothing new is allowed, and after the TTL
    everything but health is refused."""
    assert control_plane.apiserver_port is not None
    proxy = FaultProxy.for_control_plane(control_plane)
    daemons = DaemonFactory(proxy.kubeconfig(control_plane, tmp_path),
                            tmp_path)
    try:
        sched = f"policyd-{uuid.uuid4().hex[:6]}"
        port = free_ports(1)[0]
        # A lease that outlives the test: losing leadership is not what is tested.
        daemons.start(write_profile(tmp_path, sched, policies=None, lease_duration="60s",
                                    renew_deadline="50s"),
                      secure_port=port, bind_address="127.0.0.1")
        assert get(port, "/metrics", tokens.reader)[0] == 200
        assert get(port, "/metrics", tokens.stranger)[0] == 403
        decided = time.monotonic()
        proxy.refusing = True
        proxy.cut()
        # Within the TTL: the cached answers stand, a token never seen is refused.
        assert get(port, "/metrics", tokens.reader)[0] == 200
        assert get(port, "/metrics", tokens.stranger)[0] == 403
        assert get(port, "/metrics", tokens.late)[0] == 401
        assert get(port, "/debug/queue", tokens.reader)[0] == 403  # never asked: closed
        for path in ("/healthz", "/readyz", "/livez"):  # no review needed: still open
            assert get(port, path) == (200, "ok")
        assert time.monotonic() - decided < min(TOKEN_CACHE_TTL, ALLOW_CACHE_TTL,
                                                DENY_CACHE_TTL), "test too slow"
        # After the TTL: closed, for everyone.
        time.sleep(max(TOKEN_CACHE_TTL, ALLOW_CACHE_TTL, DENY_CACHE_TTL)
                   - (time.monotonic() - decided) + 0.5)
        for token in (tokens.reader, tokens.stranger, tokens.late, None):
            status, _ = get(port, "/metrics", token)
            assert status in (401, 403), (token, status)
        assert get(port, "/healthz") == (200, "ok")
        # The API server back: answered again.
        proxy.refusing = False
        wait_for(lambda: get(port, "/metrics", tokens.reader)[0] == 200, 30,
                 "the reader allowed again")
    finally:
        daemons.stop_all()
        proxy.close()


def test_policyd_run_serves_https_with_delegated_auth(
        cluster: Cluster, processes: ProcessFactory, tokens: Tokens,
        tmp_path: Path) -> None:
    """The real command: secure serving by default (here on a free port), no plain
    HTTP unless asked for."""
    sched = f"policyd-{uuid.uuid4().hex[:6]}"
    port = free_ports(1)[0]
    proc = processes.start("--config", str(write_profile(tmp_path, sched, policies=None)),
                           "--secure-port", str(port), "--bind-address", "127.0.0.1")
    wait_for(lambda: get(port, "/readyz") == (200, "ok") if _listening(port) else False,
             30, "readyz over HTTPS")
    assert proc.poll() is None, processes.log(0)
    assert get(port, "/metrics")[0] == 401
    assert get(port, "/metrics", tokens.stranger)[0] == 403
    status, body = get(port, "/metrics", tokens.reader)
    assert status == 200 and "scheduler_pending_pods" in body
    log = processes.log(0)
    assert f"over HTTPS on 127.0.0.1:{port} (self-signed certificate)" in log
    assert "plain HTTP" not in log


def _served_der(port: int) -> bytes | None:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection(("127.0.0.1", port), 5) as raw, \
                ctx.wrap_socket(raw) as conn:
            return conn.getpeercert(binary_form=True)
    except OSError:
        return None


def test_policyd_run_serves_a_rotated_certificate_without_a_restart(
        cluster: Cluster, processes: ProcessFactory, tmp_path: Path) -> None:
    """--tls-cert-file's pair replaced on disk (cert-manager, a rotated Secret): the
    running daemon serves the new certificate within its check interval."""
    from policyd.daemon.serving_cert import CHECK_INTERVAL
    from policyd.pki import self_signed_serving_cert

    cert_file, key_file = tmp_path / "tls.crt", tmp_path / "tls.key"
    first, second = self_signed_serving_cert(()), self_signed_serving_cert(())
    cert_file.write_bytes(first[0])
    key_file.write_bytes(first[1])
    port = free_ports(1)[0]
    sched = f"policyd-{uuid.uuid4().hex[:6]}"
    proc = processes.start("--config", str(write_profile(tmp_path, sched, policies=None)),
                           "--secure-port", str(port), "--bind-address", "127.0.0.1",
                           "--tls-cert-file", str(cert_file),
                           "--tls-private-key-file", str(key_file))
    der = [ssl.PEM_cert_to_DER_cert(pem.decode()) for pem in (first[0], second[0])]
    wait_for(lambda: _served_der(port) == der[0], 30, "the first certificate served")
    cert_file.write_bytes(second[0])
    key_file.write_bytes(second[1])
    wait_for(lambda: _served_der(port) == der[1], CHECK_INTERVAL + 20,
             "the rotated certificate served")
    assert proc.poll() is None, processes.log(0)
    assert f"serving certificate reloaded from {cert_file}" in processes.log(0)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 1).close()
        return True
    except OSError:
        return False


# -- the command's flags: checked before any request --------------------------------------

@pytest.mark.parametrize(("flags", "says"), [
    (["--bind-address", "localhost"], "--bind-address 'localhost': not an IP address"),
    (["--bind-address", "[::]"], "--bind-address '[::]': not an IP address"),
    (["--authorization-always-allow-paths", "healthz"], "it must start with /"),
    (["--authorization-always-allow-paths", "/a*/b"], "only a trailing *"),
    (["--tls-cert-file", "{tmp}/nope.crt", "--tls-private-key-file", "{tmp}/nope.key"],
     "--tls-cert-file '{tmp}/nope.crt': not a readable file"),
    (["--tls-cert-file", "{tmp}/p.yaml"], "give both or neither"),
    (["--tls-cert-file", "{tmp}/p.yaml", "--tls-private-key-file", "{tmp}/p.yaml"],
     "not a valid PEM certificate and matching key"),
    (["--secure-port", "70000"], "--secure-port"),
    (["--secure-port", "-1"], "--secure-port"),
])
def test_bad_serving_flags_exit_2_before_any_request(tmp_path: Path, flags: list[str],
                                                     says: str) -> None:
    from tests.e2e.test_process import CountingListener, _kubeconfig_for, _policyd

    listener = CountingListener()
    try:
        profile = tmp_path / "p.yaml"
        profile.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n")
        args = [f.format(tmp=tmp_path) for f in flags]
        if "--secure-port" not in args:
            args += ["--secure-port", str(free_ports(1)[0])]
        result = _policyd("--config", str(profile), "--kubeconfig",
                          str(_kubeconfig_for(tmp_path, listener.port)), *args)
        assert result.returncode == 2, result.stderr
        assert says.format(tmp=tmp_path) in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
        time.sleep(0.3)
        assert listener.connections == 0
    finally:
        listener.close()


def test_a_busy_secure_port_is_a_runtime_failure(tmp_path: Path) -> None:
    from tests.e2e.test_process import CountingListener, _kubeconfig_for, _policyd

    listener = CountingListener()
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        profile = tmp_path / "p.yaml"
        profile.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n")
        result = _policyd("--config", str(profile), "--kubeconfig",
                          str(_kubeconfig_for(tmp_path, listener.port)),
                          "--bind-address", "127.0.0.1", "--secure-port", str(port))
        assert result.returncode == 1, result.stderr
        assert (f"cannot serve HTTPS on '127.0.0.1:{port}': the address is already in use"
                in result.stderr)
        assert listener.connections == 0
    finally:
        holder.close()
        listener.close()
