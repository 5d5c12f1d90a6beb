"""The keep-alive pool (`http1.Pool`) for a client's non-watch calls, shared by every
KubeClient on one official ApiClient, set up from the endpoint and TLS context
`policyd.kube.official.endpoint_from` reads off the client's Configuration (None: the
calls stay on urllib3)."""

from __future__ import annotations

import threading
from typing import Any

from policyd.kube.http1 import Pool
from policyd.kube.official import Connection


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

    def get(self, connection: Connection) -> tuple[Pool | None, str]:
        """The pool for `connection` and its host's path prefix; (None, "") for
        urllib3."""
        manager = connection.manager
        if manager is self._manager:
            return self._pool, self._prefix
        with self._lock:
            if manager is not self._manager:
                old = self._pool
                try:
                    found = connection.endpoint(manager)
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
