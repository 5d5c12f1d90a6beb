"""The serving certificate given by --tls-cert-file/--tls-private-key-file, loaded again
when either file changes, as kube-scheduler's (k8s.io/apiserver's dynamic serving
certificate: a file watch plus a periodic check).

cert-manager, or a rotated Secret mounted as a volume, replaces the files while the
daemon runs; without this the daemon would serve the old certificate until it expired
and every scrape failed. A changed pair is loaded into a new TLS context, and the
server hands that one to the next handshake; connections already open keep theirs. A
pair that does not load (one file written and not yet the other, a key that does not
match) is refused with a warning naming the files, and the previous certificate keeps
serving until the files change again.
"""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Callable
from pathlib import Path

from policyd.clock import REAL_CLOCK, Clock
from policyd.daemon.serving import server_tls_context
from policyd.errors import PolicydError

log = logging.getLogger("policyd.daemon.serving_cert")

# Two stat calls per check; a rotation is served within this many seconds.
CHECK_INTERVAL = 10.0

_Stamp = tuple[int, int, int] | None


def _stamp(path: Path) -> _Stamp:
    """What changes when a file is rewritten or its Secret's symlink is swapped."""
    try:
        st = path.stat()
    except OSError:
        return None  # gone for a moment mid-rotation: a change like any other
    return st.st_ino, st.st_mtime_ns, st.st_size


class ServingCertificate:
    """Watches the two files; `install` receives each new context."""

    def __init__(self, cert_file: Path, key_file: Path,
                 install: Callable[[ssl.SSLContext], None], *,
                 clock: Clock = REAL_CLOCK) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.install = install
        self.clock = clock
        self._seen = self._stamps()  # the pair the daemon started with
        self.reloads = 0

    def _stamps(self) -> tuple[_Stamp, _Stamp]:
        return _stamp(self.cert_file), _stamp(self.key_file)

    def check(self) -> bool:
        """Load the pair again if either file changed since the last look; True when a
        new certificate now serves."""
        stamps = self._stamps()
        if stamps == self._seen:
            return False
        self._seen = stamps  # stamped before loading: a change during the load is seen
        try:
            ctx = server_tls_context(self.cert_file, self.key_file)
        except PolicydError as exc:
            log.warning("the serving certificate files changed but do not load; the "
                        "previous certificate keeps serving: %s", exc)
            return False
        self.install(ctx)
        self.reloads += 1
        log.info("serving certificate reloaded from %s", self.cert_file)
        return True

    def run(self, stop: threading.Event, interval: float = CHECK_INTERVAL) -> None:
        while not self.clock.wait(stop, interval):
            self.check()
