"""The serving certificate is loaded again when its files change: a new pair serves
from the next handshake on, a pair that does not load leaves the previous one serving."""

from __future__ import annotations

import os
import socket
import ssl
import threading
from pathlib import Path

from policyd.daemon.metrics import HealthServer, Metrics
from policyd.daemon.serving import server_tls_context
from policyd.daemon.serving_cert import ServingCertificate
from policyd.pki import self_signed_serving_cert


def _served_cert(port: int) -> bytes:
    """The DER certificate the server presents to a new connection."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            ctx.wrap_socket(raw) as conn:
        der = conn.getpeercert(binary_form=True)
    assert der is not None
    return der


def _der(pem: bytes) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem.decode())


def _write(cert_file: Path, key_file: Path, cert: bytes, key: bytes, stamp: int) -> None:
    cert_file.write_bytes(cert)
    key_file.write_bytes(key)
    for f in (cert_file, key_file):  # a distinct mtime even on a coarse clock
        os.utime(f, ns=(stamp, stamp))


def test_a_rotated_pair_serves_from_the_next_handshake_and_a_bad_one_never(
        tmp_path: Path) -> None:
    cert_file, key_file = tmp_path / "tls.crt", tmp_path / "tls.key"
    first, second, third = (self_signed_serving_cert(()) for _ in range(3))
    _write(cert_file, key_file, *first, stamp=1_000_000_000)
    server = HealthServer("127.0.0.1:0", Metrics(), lambda: True,
                          tls=server_tls_context(cert_file, key_file))
    reloader = ServingCertificate(cert_file, key_file,
                                  lambda ctx: setattr(server.server, "tls", ctx))
    server.start()
    try:
        assert not reloader.check()  # unchanged: nothing loaded
        assert _served_cert(server.port) == _der(first[0])

        _write(cert_file, key_file, *second, stamp=2_000_000_000)
        assert reloader.check() and reloader.reloads == 1
        assert _served_cert(server.port) == _der(second[0])

        # Mid-rotation: the new certificate is written, its key not yet.
        _write(cert_file, key_file, third[0], second[1], stamp=3_000_000_000)
        assert not reloader.check()
        assert _served_cert(server.port) == _der(second[0])
        key_file.unlink()  # gone for a moment: still the previous one
        assert not reloader.check()
        assert _served_cert(server.port) == _der(second[0])
        _write(cert_file, key_file, *third, stamp=4_000_000_000)
        assert reloader.check() and reloader.reloads == 2
        assert _served_cert(server.port) == _der(third[0])
    finally:
        server.stop()


def test_run_checks_until_stopped(tmp_path: Path) -> None:
    cert_file, key_file = tmp_path / "tls.crt", tmp_path / "tls.key"
    first, second = self_signed_serving_cert(()), self_signed_serving_cert(())
    _write(cert_file, key_file, *first, stamp=1_000_000_000)
    installed = threading.Event()
    reloader = ServingCertificate(cert_file, key_file, lambda _ctx: installed.set())
    stop = threading.Event()
    runner = threading.Thread(target=reloader.run, args=(stop, 0.01))
    runner.start()
    try:
        _write(cert_file, key_file, *second, stamp=2_000_000_000)
        assert installed.wait(5)
    finally:
        stop.set()
        runner.join(5)
    assert not runner.is_alive()
