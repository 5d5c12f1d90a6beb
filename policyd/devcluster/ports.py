"""Free loopback ports for the control plane's listeners.

Tests, a `policyd dev up` cluster and other developers' clusters must be able to run at
the same time on one machine, so no port is fixed: the kernel hands out free ones. All
sockets are held open until every port is chosen, so one call never returns the same
port twice. (Another process can still take a port between our close and the server's
bind; the control plane retries its start when that happens.)
"""

from __future__ import annotations

import socket

LOOPBACK = "127.0.0.1"


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """`count` distinct ports that were free on `host` a moment ago."""
    if count < 0:
        raise ValueError("count must not be negative")
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    """Whether a TCP listener could bind `host:port` now (for user-chosen ports)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Same option the Go servers set: a port in TIME_WAIT after a previous run is free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True
