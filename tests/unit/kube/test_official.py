"""`policyd.kube.official` against the installed kubernetes client: the real
Configuration and ApiClient it builds from kubeconfig files written here, read through
the one module that knows their attributes. A client release that renames or drops one
of them fails here, not in the daemon."""

from __future__ import annotations

import base64
import socket
import ssl
from pathlib import Path

import pytest
import urllib3

from policyd.kube.client import KEEPALIVE_IDLE, POOL_SIZE, USER_AGENT, load_configuration
from policyd.kube.client import ConnectionSettings as Settings
from policyd.kube.http1 import Endpoint
from policyd.kube.official import (
    Connection,
    KubeConfigError,
    api_client_from,
    drop_idle_connections,
    host_pool,
    kubeconfig_contexts,
    new_api_client,
)
from policyd.pki import self_signed_serving_cert


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _kubeconfig(tmp_path: Path, cluster: str, user: str, namespace: str = "team-a"
                ) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{{cluster}}}}}]\n"
        f"users: [{{name: u, user: {{{user}}}}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u, namespace: "
        f"{namespace}}}}}, {{name: other, context: {{cluster: k, user: u}}}}]\n")
    return path


def _connection(path: Path) -> Connection:
    return Connection(new_api_client(load_configuration(Settings(kubeconfig=str(path)))),
                      USER_AGENT)


def test_a_token_and_a_ca_give_a_verifying_endpoint_and_a_bearer_header(
        tmp_path: Path) -> None:
    cert, _ = self_signed_serving_cert()
    path = _kubeconfig(tmp_path, "server: 'https://127.0.0.1:6443', "
                       f"certificate-authority-data: {_b64(cert)}, "
                       "tls-server-name: api.internal", "token: s3cret")
    conn = _connection(path)
    try:
        cfg = conn.api_client.configuration
        assert (cfg.connection_pool_maxsize, cfg.retries) == (POOL_SIZE, False)
        assert (socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE_IDLE) in cfg.socket_options
        assert conn.host == "https://127.0.0.1:6443"
        headers = conn.headers()
        assert headers == {"User-Agent": USER_AGENT}
        conn.authorize(headers, "POST", "/api/v1/namespaces/ns/pods/p/binding")
        assert headers == {"User-Agent": USER_AGENT, "authorization": "Bearer s3cret"}
        assert conn.headers() == {"User-Agent": USER_AGENT}  # a copy each time
        manager = conn.manager
        assert type(manager) is urllib3.PoolManager
        found = conn.endpoint(manager)
        assert found is not None
        endpoint, prefix = found
        assert prefix == ""
        assert (endpoint.host, endpoint.port, endpoint.server_hostname) == (
            "127.0.0.1", 6443, "api.internal")
        assert endpoint.socket_options == tuple(tuple(o) for o in cfg.socket_options)
        assert isinstance(endpoint.tls, ssl.SSLContext)
        assert endpoint.tls.verify_mode == ssl.CERT_REQUIRED
        # The kubeconfig's CA alone, not the system's.
        assert endpoint.tls.cert_store_stats()["x509"] == 1
        pool, pool_prefix = host_pool(manager, conn.host)
        assert (pool.host, pool.port, pool_prefix) == ("127.0.0.1", 6443, "")
        assert conn.drop_idle() == 0  # nothing connected yet
    finally:
        conn.close()


def test_a_client_certificate_sends_no_token_and_skip_verify_turns_checks_off(
        tmp_path: Path) -> None:
    cert, key = self_signed_serving_cert()
    path = _kubeconfig(tmp_path, "server: 'https://rancher.example/k8s/clusters/c-1', "
                       "insecure-skip-tls-verify: true",
                       f"client-certificate-data: {_b64(cert)}, "
                       f"client-key-data: {_b64(key)}")
    conn = _connection(path)
    try:
        headers = conn.headers()
        conn.authorize(headers, "GET", "/api/v1/nodes")
        assert "authorization" not in headers
        cfg = conn.api_client.configuration
        assert Path(cfg.cert_file).read_bytes() == cert  # the client wrote it out
        found = conn.endpoint(conn.manager)  # load_cert_chain: the key matches
        assert found is not None
        endpoint, prefix = found
        assert (endpoint.host, endpoint.port, prefix) == (
            "rancher.example", 443, "/k8s/clusters/c-1")
        assert endpoint.tls is not None and endpoint.tls.verify_mode == ssl.CERT_NONE
        assert host_pool(conn.manager, conn.host)[1] == "/k8s/clusters/c-1"
    finally:
        conn.close()


def test_plain_http_has_no_tls_and_a_proxy_stays_on_urllib3(tmp_path: Path) -> None:
    conn = _connection(_kubeconfig(tmp_path, "server: 'http://127.0.0.1:8080'",
                                   "token: t"))
    try:
        assert conn.endpoint(conn.manager) == (
            Endpoint("127.0.0.1", 8080, None, None,
                     tuple(tuple(o) for o in conn.api_client.configuration.socket_options)),
            "")
        proxy = urllib3.ProxyManager("http://proxy.example:3128")
        assert conn.endpoint(proxy) is None
        assert host_pool(proxy, conn.host) == (None, "")
    finally:
        conn.close()


def test_drop_idle_connections_reads_the_pools_of_a_real_manager(tmp_path: Path) -> None:
    manager = urllib3.PoolManager(maxsize=2)
    pool = manager.connection_from_url("http://127.0.0.1:1")
    conn = pool._new_conn()
    assert pool.pool is not None
    pool.pool.get(block=False)  # a free slot taken, as urllib3 does ...
    pool.pool.put(conn, block=False)  # ... and the idle connection put back
    assert drop_idle_connections(manager) == 1
    assert drop_idle_connections(manager) == 0
    assert pool.pool.qsize() == 2  # both slots free again


def test_contexts_and_the_client_from_a_kubeconfig(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path, "server: 'https://127.0.0.1:6443'", "token: t")
    contexts, current = kubeconfig_contexts(str(path))
    assert [c["name"] for c in contexts] == ["c", "other"]
    assert current is not None and current["context"]["namespace"] == "team-a"
    api = api_client_from(path)
    try:
        assert api.configuration.host == "https://127.0.0.1:6443"
    finally:
        api.close()
    (tmp_path / "broken").write_text("apiVersion: v1\nkind: Config\n")
    with pytest.raises(ValueError):
        kubeconfig_contexts(str(tmp_path / "broken"))


def test_unusable_credentials_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError, match="does not exist"):
        load_configuration(Settings(kubeconfig=str(tmp_path / "missing")))
    path = _kubeconfig(tmp_path, "server: 'https://127.0.0.1:6443'", "token: t")
    with pytest.raises(KubeConfigError, match="cannot use the cluster credentials"):
        load_configuration(Settings(kubeconfig=str(path), context="nope"))


def _fifo(path: Path) -> None:
    import os

    os.mkfifo(path)


def _write(data: bytes) -> object:
    return lambda path: path.write_bytes(data)


@pytest.mark.parametrize(("make", "message"), [
    # Paths the client would open blocking or read without end (`policyd run` connects
    # through here too): refused before it opens them.
    (_fifo, "is a named pipe: give the kubeconfig file itself"),
    (lambda path: path.symlink_to("/dev/zero"), "is not a regular file"),
    (lambda path: path.mkdir(), "is a directory"),
    # What the client parses itself and lets through as PyYAML's or Python's errors.
    (_write(b"a: 1\n---\nb: 2\n"), "kubeconfig:2:1: but found another document"),
    (_write(b"clusters: [1\n"), "kubeconfig:2:1: expected ',' or ']'"),
    (_write(b"\xff\xfe\x00k"), "is not UTF-8 text"),
    (_write(b"42\n"), "is not a kubeconfig"),
    (_write(b"contexts: [{name: c, context: [1]}]\ncurrent-context: c\n"),
     "Expected key cluster in"),
    (_write(b"clusters: 5\ncontexts: 7\nusers: x\ncurrent-context: c\n"),
     "is not a kubeconfig"),
], ids=["fifo", "dev-zero", "directory", "two-documents", "yaml-error", "not-utf8",
        "scalar", "context-a-list", "clusters-a-number"])
def test_a_kubeconfig_that_is_not_one_is_one_line_naming_it(
        tmp_path: Path, make: object, message: str) -> None:
    path = tmp_path / "kubeconfig"
    make(path)  # type: ignore[operator]
    with pytest.raises(KubeConfigError) as err:
        load_configuration(Settings(kubeconfig=str(path)))
    text = str(err.value)
    assert message in text and str(path) in text and "\n" not in text, text
    with pytest.raises(ValueError, match="kubeconfig"):  # explain's namespace lookup
        kubeconfig_contexts(str(path))
