"""Writing kubeconfig files for the local control plane.

Everything that talks to the cluster (kubectl, the Python client, kube-scheduler,
policyd itself) is configured through a kubeconfig, so this is the one hand-off point.
Credentials are embedded (``*-data`` fields) so the file stays valid when copied, and
the file is JSON — a subset of YAML that every kubeconfig reader accepts — to avoid a
YAML writer here.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

from policyd.kube.client import ConnectionSettings, KubeClient


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def kubeconfig_dict(
    server: str,
    ca_pem: bytes,
    *,
    client_cert_pem: bytes | None = None,
    client_key_pem: bytes | None = None,
    token: str | None = None,
    name: str = "policyd-dev",
    user: str = "admin",
) -> dict[str, Any]:
    """A kubeconfig with one cluster, one user (certificate or bearer token), one context."""
    has_cert = client_cert_pem is not None and client_key_pem is not None
    if has_cert == (token is not None):
        raise ValueError("give either a client certificate and key, or a token")
    credentials: dict[str, str]
    if client_cert_pem is not None and client_key_pem is not None:
        credentials = {
            "client-certificate-data": _b64(client_cert_pem),
            "client-key-data": _b64(client_key_pem),
        }
    else:
        assert token is not None
        credentials = {"token": token}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": name,
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
            }
        ],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user}}],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(path: Path, config: dict[str, Any]) -> Path:
    """Write `config` to `path`, readable by its owner only (it holds admin credentials)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Create with 0600 from the start instead of chmod after: no window where it's readable.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(config, handle, indent=2)
        handle.write("\n")
    path.chmod(0o600)
    return path


def kube_client_from(path: Path) -> KubeClient:
    """policyd's own client for the kubeconfig at `path` (caller closes it). No
    client-side rate limit and a long read bound, as the official client had: loading
    a snapshot is a burst of creates into an API server that is ours alone."""
    return KubeClient.connect(ConnectionSettings(kubeconfig=str(path), qps=0, timeout=120.0,
                                                 read_timeout=120.0))
