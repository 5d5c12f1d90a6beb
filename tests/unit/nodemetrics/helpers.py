"""Shared helpers: provider configs, a hand-driven clock, a fake Prometheus on loopback."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from policyd.config.model import MetricQuery, MetricsProviderConfig


def provider_config(kind: str = "prometheus", **kw: Any) -> MetricsProviderConfig:
    base = MetricsProviderConfig(name="p", kind=kind, refresh_interval=10.0, timeout=1.0,
                                 max_age=30.0, max_backoff=80.0)
    if kind == "prometheus":
        base = replace(base, url="http://127.0.0.1:1",
                       queries=(MetricQuery("latency_ms", "lat"),))
    elif kind == "probe":
        base = replace(base, metric="rtt_ms", port=1)
    else:
        base = replace(base, metric="load", annotation="example.com/load")
    return replace(base, **kw)


def vector(*series: tuple[dict[str, str], Any]) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": m, "value": [time.time(), v]} for m, v in series]}}).encode()


Responder = Callable[[str, dict[str, str]], tuple[int, bytes, float]]


@contextmanager
def loopback_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve `handler` on a free 127.0.0.1 port in a thread; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def fake_prometheus(respond: Responder) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A loopback HTTP server answering /api/v1/query with respond(query, headers) ->
    (status, body, delay seconds). Yields (base url, requests seen)."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlparse(self.path)
            query = parse_qs(url.query).get("query", [""])[0]
            headers = {k.lower(): v for k, v in self.headers.items()}
            seen.append({"path": url.path, "query": query, **headers})
            status, body, delay = respond(query, headers)
            if delay:
                time.sleep(delay)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass  # the client gave up (timeout): fine

        def log_message(self, format: str, *args: object) -> None:
            pass

    with loopback_server(Handler) as url:
        yield url, seen
