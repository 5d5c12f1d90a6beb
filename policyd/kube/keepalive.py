"""The keep-alive pool (`http1.Pool`) for a client's non-watch calls, set up from the
official client's Configuration with the TLS settings urllib3 would have used.

urllib3 got from the Configuration: certificate verification on or off, the CA (a file
or PEM data; the system's CAs when neither is given), the client certificate and key,
the SNI name (tls_server_name, else the host) which is also the name the certificate
must match, and the socket options (TCP keepalive). The context is built by urllib3's
own `create_urllib3_context`, so the protocol floor and options stay the same. Whatever
this module does not reproduce (a proxy, a hostname to assert other than the SNI name,
a pool manager that is not urllib3's plain one) leaves the client on urllib3.
"""

from __future__ import annotations

import socket
import ssl
import threading
from typing import Any

from policyd.kube.http1 import Endpoint, Pool


def endpoint_from(configuration: Any, manager: Any) -> tuple[Endpoint, str] | None:
    """The endpoint of `configuration`'s host and the path prefix of its URL, or None
    when its requests must stay on urllib3 (`manager` is the client's PoolManager)."""
    # urllib3 (~0.1 s) comes with the client; only needed once one is made.
    import urllib3
    from urllib3.util import create_urllib3_context, parse_url

    # A ProxyManager (or any other manager) tunnels or rewrites requests.
    if type(manager) is not urllib3.PoolManager or getattr(manager, "proxy", None):
        return None
    if getattr(configuration, "assert_hostname", None) is not None:
        return None
    url = parse_url(str(configuration.host))
    if url.scheme not in ("http", "https") or not url.host or url.auth or url.query:
        return None
    host = url.host.strip("[]")
    tls: ssl.SSLContext | None = None
    if url.scheme == "https":
        verify = bool(configuration.verify_ssl)
        tls = create_urllib3_context(cert_reqs=ssl.CERT_REQUIRED if verify else ssl.CERT_NONE)
        ca_file = configuration.ssl_ca_cert
        ca_data = getattr(configuration, "ca_cert_data", None)
        if ca_file or ca_data:
            tls.load_verify_locations(cafile=ca_file, cadata=ca_data)
        else:
            tls.load_default_certs()
        if configuration.cert_file:
            tls.load_cert_chain(configuration.cert_file, configuration.key_file)
        # HTTP/1.1 only: the API server would otherwise pick HTTP/2.
        tls.set_alpn_protocols(["http/1.1"])
    options = configuration.socket_options
    if options is None:  # urllib3's default
        options = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    endpoint = Endpoint(host, url.port or (443 if tls is not None else 80), tls,
                        configuration.tls_server_name or None,
                        tuple(tuple(o) for o in options))
    return endpoint, url.path or ""


class SharedPool:
    """The keep-alive pool of one official ApiClient, shared by every KubeClient on it
    (`with_own_limiter`), made when first needed and again if the client's pool manager
    was replaced."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._lock = threading.Lock()
        self._manager: Any = None
        self._pool: Pool | None = None
        self._prefix = ""

    def get(self, api: Any) -> tuple[Pool | None, str]:
        """The pool for `api` and its host's path prefix; (None, "") for urllib3."""
        manager = api.rest_client.pool_manager
        if manager is self._manager:
            return self._pool, self._prefix
        with self._lock:
            if manager is not self._manager:
                old = self._pool
                try:
                    found = endpoint_from(api.configuration, manager)
                except (OSError, ValueError):
                    # Unreadable CA or key files: urllib3 reports them on each call,
                    # as before.
                    found = None
                self._pool = Pool(found[0], self.maxsize) if found else None
                self._prefix = found[1] if found else ""
                self._manager = manager
                if old is not None:
                    old.close()
            return self._pool, self._prefix

    def drop_idle(self) -> int:
        pool = self._pool
        return pool.drop_idle() if pool is not None else 0

    def close(self) -> None:
        pool = self._pool
        if pool is not None:
            pool.close()
