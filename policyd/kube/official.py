"""The one module that reads the official `kubernetes` client (and the urllib3 objects
it holds): everything else in policyd.kube gets plain things from here.

The client does what it does well: it loads kubeconfig or in-cluster credentials
(including token refresh) and holds a urllib3 PoolManager. What policyd needs of it is
read here only: the host URL, the TLS settings as an `http1.Endpoint` with its
`ssl.SSLContext` (`endpoint_from`), the credentials as a token provider
(`Connection.authorize`), the pool manager and its pool for the host (watches, and
setups the keep-alive pool does not reproduce), and the pools' idle connections. Every
attribute name of `Configuration`/`ApiClient` and every client helper policyd relies on
is here, so a client release is checked in one place (`tests/unit/kube/test_official.py`
reads the real objects a kubeconfig file gives).
"""

from __future__ import annotations

import contextlib
import os
import queue
import socket
import ssl
from typing import Any

from policyd.errors import PolicydError
from policyd.kube.http1 import Endpoint


class KubeConfigError(PolicydError):
    """No usable credentials (no kubeconfig, not in a cluster)."""


# A kubeconfig with a few embedded certificates is kilobytes; kubectl's largest are
# merged ones of a few hundred clusters. Past this it is not a kubeconfig.
MAX_KUBECONFIG_BYTES = 16 * 1024 * 1024


def _check_kubeconfig_file(path: str) -> None:
    """Refuse what the client would hang on or read without end before it opens
    `path`: it opens the file blocking and reads it whole (a named pipe nobody writes
    waits forever, /dev/zero reads until memory runs out). Only a regular file of at
    most MAX_KUBECONFIG_BYTES goes on; `OSError`/`KubeConfigError` otherwise."""
    import stat

    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        what = "a directory" if stat.S_ISDIR(st.st_mode) else \
            "a named pipe" if stat.S_ISFIFO(st.st_mode) else "not a regular file"
        raise KubeConfigError(f"kubeconfig {path!r} is {what}: give the kubeconfig file "
                              "itself")
    if st.st_size > MAX_KUBECONFIG_BYTES:
        raise KubeConfigError(f"kubeconfig {path!r} is larger than the limit of 16 MiB")


def load_configuration(kubeconfig: str | None, context: str | None, *, pool_size: int,
                       socket_options: list[tuple[int, int, int]]) -> Any:
    """A client Configuration from kubeconfig or the pod's service account, with the
    client's own errors (bad kubeconfig, missing service account files) turned into one
    clear KubeConfigError. Reads files only: no request is sent."""
    # kubernetes (~0.6 s) only once a client is made, not for this module's types.
    # PyYAML comes with the client (it parses kubeconfigs with it); no stubs installed.
    import yaml  # type: ignore[import-untyped]
    from kubernetes.config.config_exception import ConfigException

    try:
        return _load_configuration(kubeconfig, context, pool_size, socket_options)
    # The client parses the file with PyYAML and lets its errors (not UTF-8, two
    # documents, bad syntax) through.
    except (ConfigException, yaml.YAMLError) as exc:
        raise KubeConfigError(f"cannot use the cluster credentials: {_one_line(exc)}"
                              ) from None
    except OSError as exc:
        raise KubeConfigError(f"cannot read the cluster credentials: {exc}") from None


def _load_kubeconfig_file(config: Any, path: str, context: str | None, cfg: Any) -> None:
    """The client's `load_kube_config` of `path` into `cfg`, once the path is known to
    be a file it can read whole."""
    _check_kubeconfig_file(path)
    try:
        config.load_kube_config(config_file=path, context=context, client_configuration=cfg)
    except UnicodeDecodeError as exc:  # the client reads it as text, without the path
        raise KubeConfigError(f"kubeconfig {path!r} is not UTF-8 text: {exc}") from None
    except (TypeError, AttributeError, KeyError) as exc:
        # The client indexes what it parsed without checking its shape (`42`, a list,
        # `clusters: 5`): the file is not a kubeconfig, not a bug of ours.
        raise KubeConfigError(_not_a_kubeconfig(path, exc)) from None


def _not_a_kubeconfig(path: str, exc: Exception) -> str:
    return (f"kubeconfig {path!r} is not a kubeconfig (a mapping of clusters, users and "
            f"contexts): {_one_line(exc)}")


def _one_line(exc: Exception) -> str:
    """The client's or PyYAML's error as one line: PyYAML's `FILE:LINE:COLUMN:
    problem`, as policyd says a file's problems, instead of its indented lines."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is not None and problem:
        return f"{mark.name}:{mark.line + 1}:{mark.column + 1}: {problem}"
    return " ".join(str(exc).split())


def _load_configuration(kubeconfig: str | None, context: str | None, pool_size: int,
                        socket_options: list[tuple[int, int, int]]) -> Any:
    from kubernetes import client
    from kubernetes import config as kube_config

    # Typed as Any: the client's loaders are untyped.
    config: Any = kube_config
    cfg = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path:
        # A KUBECONFIG list is merged by the client only for its first file here:
        # we take the first existing path, as kubectl does for the current context.
        first = next((p for p in path.split(os.pathsep) if p and os.path.exists(p)), None)
        if first is None:
            raise KubeConfigError(f"kubeconfig {path!r} does not exist")
        _load_kubeconfig_file(config, first, context, cfg)
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=cfg)
    else:
        default = os.path.expanduser("~/.kube/config")
        if not os.path.exists(default):
            raise KubeConfigError("no kubeconfig: pass --kubeconfig, set KUBECONFIG, or "
                                   "run in a cluster")
        _load_kubeconfig_file(config, default, context, cfg)
    cfg.connection_pool_maxsize = pool_size
    cfg.socket_options = socket_options
    # Our own retry loops decide what to retry and when; urllib3's silent retries
    # would hide the timeouts that count against a call.
    cfg.retries = False
    return cfg


def tcp_keepalive_options(idle: int, interval: int, count: int
                          ) -> list[tuple[int, int, int]]:
    """urllib3's default socket options plus TCP keepalive (options the platform lacks
    are left out by the client's helper)."""
    # kubernetes (~0.6 s) only once a client is made, not for this module's types.
    from kubernetes.utils.keepalive import tcp_keepalive_socket_options

    return list(tcp_keepalive_socket_options(idle, interval, count))


def new_api_client(configuration: Any) -> Any:
    """The official ApiClient on `configuration` (what `Connection` wraps)."""
    # kubernetes (~0.6 s) only once a client is made, not for this module's types.
    from kubernetes import client

    return client.ApiClient(configuration)


def api_client_from(kubeconfig: str | os.PathLike[str]) -> Any:
    """The official client's own `ApiClient` for a kubeconfig file, with its defaults
    (for the typed API classes; the caller closes it). Here so that no other package
    imports the client."""
    # kubernetes (~0.6 s) only once a client is made, not for this module's types.
    from kubernetes import config as kube_config

    return kube_config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]


def kubeconfig_contexts(path: str) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The contexts of the kubeconfig at `path` and its current one, as the client
    parses them; ValueError for a file it cannot use."""
    # kubernetes (~0.6 s) only when a live read is asked for.
    import yaml
    from kubernetes import config as kube_config
    from kubernetes.config.config_exception import ConfigException

    try:
        _check_kubeconfig_file(path)
        contexts, current = kube_config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=path)
    except (ConfigException, KubeConfigError, yaml.YAMLError) as exc:
        raise ValueError(_one_line(exc)) from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"kubeconfig {path!r} is not UTF-8 text: {exc}") from None
    except (TypeError, AttributeError, KeyError) as exc:  # as in _load_kubeconfig_file
        raise ValueError(_not_a_kubeconfig(path, exc)) from None
    return list(contexts or []), current


class Connection:
    """What policyd.kube uses of one official ApiClient: its host, its credentials as
    a token provider, its TLS settings as an endpoint, and its urllib3 pool manager
    (read on each use: a client whose manager was replaced is followed)."""

    def __init__(self, api_client: Any, user_agent: str) -> None:
        self.api_client = api_client
        api_client.user_agent = user_agent

    @property
    def host(self) -> str:
        """The API server's URL, with the path prefix of a path-routing proxy."""
        return str(self.api_client.configuration.host)

    @property
    def manager(self) -> Any:
        """The client's urllib3 PoolManager (or ProxyManager)."""
        return self.api_client.rest_client.pool_manager

    def headers(self) -> dict[str, str]:
        """A new copy of the client's default headers (User-Agent)."""
        return dict(self.api_client.default_headers)

    def authorize(self, headers: dict[str, str], method: str, path: str) -> None:
        """Add the bearer token to `headers` (refreshed by the client's hook when it
        expires); a client certificate is in the TLS context instead."""
        self.api_client.update_params_for_auth(headers, None, ["BearerToken"], path,
                                               method, None)

    def endpoint(self, manager: Any) -> tuple[Endpoint, str] | None:
        """`endpoint_from` this client's Configuration and `manager`."""
        return endpoint_from(self.api_client.configuration, manager)

    def drop_idle(self) -> int:
        """`drop_idle_connections` of the client's pool manager."""
        rest = getattr(self.api_client, "rest_client", None)
        return drop_idle_connections(getattr(rest, "pool_manager", None))

    def close(self) -> None:
        self.api_client.close()


def host_pool(manager: Any, host: str) -> tuple[Any, str]:
    """The API server's connection pool in `manager` and the path of the host URL,
    or (None, "") when requests must go through the manager: through a proxy, an
    https request is tunnelled and an http one sends the absolute URL, which only
    the ProxyManager knows how to do."""
    if getattr(manager, "proxy", None) is not None or \
            not hasattr(manager, "connection_from_url"):
        return None, ""
    # urllib3 (~0.1 s) comes with the client; only needed once one is made.
    from urllib3.util import parse_url

    return manager.connection_from_url(host), parse_url(host).path or ""


def endpoint_from(configuration: Any, manager: Any) -> tuple[Endpoint, str] | None:
    """The endpoint of `configuration`'s host and the path prefix of its URL, or None
    when its requests must stay on urllib3 (`manager` is the client's PoolManager).

    urllib3 got from the Configuration: certificate verification on or off, the CA (a
    file or PEM data; the system's CAs when neither is given), the client certificate
    and key, the SNI name (tls_server_name, else the host) which is also the name the
    certificate must match, and the socket options (TCP keepalive). The context is
    built by urllib3's own `create_urllib3_context`, so the protocol floor and options
    stay the same. Whatever this does not reproduce (a proxy, a hostname to assert
    other than the SNI name, a pool manager that is not urllib3's plain one) leaves
    the client on urllib3."""
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


def drop_idle_connections(pool_manager: Any) -> int:
    """Close every idle connection in a urllib3 PoolManager's pools and return how
    many: after one connection was found silent, the ones opened before it through
    the same proxy are as likely frozen. Connections in use are left to their own
    timeouts; a pool stays usable (its free slots are refilled, so the next request
    dials a new connection)."""
    dropped = 0
    pools = getattr(pool_manager, "pools", None)
    if pools is None:
        return 0
    for key in list(pools.keys()):
        pool = pools.get(key)
        idle = getattr(pool, "pool", None)  # the pool's queue of connections / None
        if idle is None:
            continue
        taken: list[Any] = []
        while True:
            try:
                taken.append(idle.get(block=False))
            except queue.Empty:
                break
        for conn in taken:
            if conn is not None:
                dropped += 1
                # Closing a broken socket can fail: nothing is left to do then.
                with contextlib.suppress(Exception):
                    conn.close()
            try:
                idle.put(None, block=False)
            except queue.Full:  # refilled meanwhile by connections returned to it
                break
    return dropped
