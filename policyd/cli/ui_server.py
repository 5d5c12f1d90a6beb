"""`policyd ui`'s pages: explain's and simulate's HTML pages (`html_page`) made on each
request from the cluster as it is then, with a what-if editor: the policies as YAML in
a form; posted back, the page is made again with the edited policies instead of the
current ones (files and the cluster's SchedulingPolicy objects alike), so an edit shows
its effect on the grid before it goes anywhere. Nothing is written to the cluster.

`UiPages` answers a request as (status, HTML) from plain values; `serve` puts it behind
a loopback HTTP server.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode, urlsplit

from policyd.cli.html_page import html_page
from policyd.cli.options import yaml_text
from policyd.cli.schedule_cmds import (
    ClusterInput,
    explain_pod,
    frameworks_for,
    gates_of,
    pod_key,
)
from policyd.errors import PolicydError
from policyd.model.k8snames import printable

if TYPE_CHECKING:
    from policyd.framework.runtime import Framework

# The name the edited policies are compiled under: what a problem in them is shown at.
WHAT_IF_FILE = "what-if.yaml"
# A posted form larger than this is refused (413): policies are text, not uploads.
MAX_FORM_BYTES = 2 * 1024 * 1024
# Object fields the editor leaves out of the cluster's SchedulingPolicy objects: the
# server's, not the policy's.
_SERVER_FIELDS = ("managedFields", "resourceVersion", "uid", "creationTimestamp",
                  "generation", "selfLink")


@dataclass(slots=True)
class UiSettings:
    """What `policyd ui` was started with: explain's and simulate's inputs."""

    read: Callable[[], ClusterInput]
    """The cluster as it is now: a live read (or the --cluster snapshot)."""
    config: Path | None = None
    policies: list[Path] = field(default_factory=list)
    seed: int | None = None
    cluster_policies: bool = False


class UiPages:
    """The pages, by path: `/` (simulate), `/explain?pod=NAMESPACE/NAME`. A POST with a
    `policies` field is the what-if: the same page with those policies."""

    def __init__(self, settings: UiSettings) -> None:
        self.settings = settings

    def answer(self, path: str, query: dict[str, list[str]],
               form: dict[str, list[str]] | None) -> tuple[int, str]:
        what_if = (form or {}).get("policies", [None])[0]
        if path in ("/", "/simulate"):
            return self._simulate(what_if)
        if path == "/explain":
            pod = (query.get("pod") or [""])[0]
            if not pod:
                return HTTPStatus.BAD_REQUEST, _error_page("name the pod: /explain?pod="
                                                           "NAMESPACE/NAME")
            return self._explain(pod, what_if)
        return HTTPStatus.NOT_FOUND, _error_page(
            f"no page {path}: / (simulate) or /explain?pod=NAMESPACE/NAME")

    # -- the two pages ---------------------------------------------------------------

    def _explain(self, ref: str, what_if: str | None) -> tuple[int, str]:
        source = self.settings.read()
        snap = source.snapshot
        key = pod_key(ref, source.namespace)
        ui = self._ui(source, what_if, pod=key)
        target = next((p for p in snap.pods if p.key == key), None)
        if target is None:
            return HTTPStatus.NOT_FOUND, _failed(
                "explain", ui, f"no pod {key} in the cluster at {source.where}")
        warnings: list[str] = []
        try:
            served = self._profiles(source, what_if, warnings)
        except PolicydError as exc:
            return HTTPStatus.OK, _failed("explain", ui, str(exc))
        done = explain_pod(snap, target, served, snap.notes + source.notes)
        return HTTPStatus.OK, html_page("explain", done.document(snap.warnings + warnings),
                                        f"policyd ui: {key}", ui=ui)

    def _simulate(self, what_if: str | None) -> tuple[int, str]:
        from policyd.engine.report import simulate_json
        from policyd.engine.simulate import simulate

        source = self.settings.read()
        snap = source.snapshot
        ui = self._ui(source, what_if)
        warnings: list[str] = []
        try:
            served = self._profiles(source, what_if, warnings)
        except PolicydError as exc:
            return HTTPStatus.OK, _failed("simulate", ui, str(exc))
        pending = [p for p in snap.pods if not p.node_name and not p.finished]
        result = simulate(served, snap.cluster(gates_of(served)), pending)
        document = simulate_json(result, notes=snap.notes + source.notes,
                                 warnings=snap.warnings + warnings)
        return HTTPStatus.OK, html_page("simulate", document, "policyd ui", ui=ui)

    # -- inputs --------------------------------------------------------------------------

    def _profiles(self, source: ClusterInput, what_if: str | None,
                  warnings: list[str]) -> dict[str, Framework]:
        """The frameworks by the schedulerName each serves, as explain's and simulate's."""
        from policyd.engine.profiles import serving_profiles

        return serving_profiles(self._frameworks(source, what_if, warnings),
                                default_profile=self.settings.config is None)

    def _frameworks(self, source: ClusterInput, what_if: str | None,
                    warnings: list[str]) -> dict[str, Framework]:
        s = self.settings
        if what_if is None:
            return frameworks_for(s.config, s.policies, s.seed, source.policies, warnings,
                                  cluster_policies_flag=s.cluster_policies)
        # The edited text is the whole set: it replaces the files and the cluster's
        # objects (which it starts as), compiled from a file so problems have a place.
        with tempfile.TemporaryDirectory(prefix="policyd-ui-") as tmp:
            path = Path(tmp) / WHAT_IF_FILE
            path.write_text(what_if)
            try:
                return frameworks_for(s.config, [path], s.seed, None, warnings)
            except PolicydError as exc:  # said at the editor's name, not the temp path
                raise PolicydError(str(exc).replace(f"{tmp}{os.sep}", "")) from None

    def current_policies(self, source: ClusterInput) -> str:
        """The policies in force as one YAML text: the files' (each after a comment
        naming it), then the cluster's SchedulingPolicy objects."""
        from policyd.policy.files import find_yaml_files
        from policyd.policy.policy_schema import KIND

        parts: list[str] = []
        for path, shown in find_yaml_files(self.settings.policies).files:
            try:
                text = path.read_text()
            except (OSError, UnicodeDecodeError):
                continue  # explain's compile says what is wrong with it
            if f"kind: {KIND}" in text:
                parts.append(f"# {shown}\n{text.strip()}\n")
        for obj in source.policies or ():
            meta = {k: v for k, v in (obj.get("metadata") or {}).items()
                    if k not in _SERVER_FIELDS}
            shown_obj = {k: v for k, v in obj.items() if k not in ("status", "metadata")}
            shown_obj["metadata"] = meta
            parts.append(f"# the cluster's SchedulingPolicy {meta.get('name', '')}\n"
                         + yaml_text(shown_obj))
        return "---\n".join(parts)

    def _ui(self, source: ClusterInput, what_if: str | None, pod: str = "") -> dict[str, Any]:
        """What page.js needs to draw the navigation and the editor."""
        pending = sorted(p.key for p in source.snapshot.pods
                         if not p.node_name and not p.finished)
        return {"pod": pod, "pods": pending[:5000], "where": source.where,
                "policies": what_if if what_if is not None
                else self.current_policies(source),
                "whatIf": what_if is not None,
                "action": "/explain?" + urlencode({"pod": pod}) if pod else "/"}


def _failed(kind: str, ui: dict[str, Any], message: str) -> str:
    """`kind`'s page with nothing to show but `message`, above the editor: policies
    that do not compile (a what-if's, or the files' edited since the start), a pod not
    there. The editor keeps its text."""
    ui["error"] = printable(message)
    document: dict[str, Any] = (
        {"pod": ui.get("pod", ""), "nodes": [], "error": message} if kind == "explain"
        else {"placements": [], "scheduled": 0, "unschedulable": 0, "errors": 0})
    return html_page(kind, document, "policyd ui", ui=ui)


def _error_page(message: str) -> str:
    return _failed("simulate", {"pods": [], "policies": "", "whatIf": False, "pod": "",
                                "where": "", "action": "/"}, message)


# -- serving ---------------------------------------------------------------------------

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def serve(pages: UiPages, host: str, port: int) -> ThreadingHTTPServer:
    """A started HTTP server answering with `pages` (its own thread; `shutdown()`
    stops it). Bound to loopback, it answers only requests naming a loopback host: a
    web page elsewhere cannot point a name of its own at it and read the cluster."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "policyd-ui"

        def do_GET(self) -> None:
            self._answer(None)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_FORM_BYTES:
                self._send(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                           _error_page(f"the form is over {MAX_FORM_BYTES} bytes"))
                return
            body = self.rfile.read(length).decode("utf-8", errors="replace")
            self._answer(parse_qs(body, keep_blank_values=True))

        def _answer(self, form: dict[str, list[str]] | None) -> None:
            if host in LOOPBACK_HOSTS and not self._loopback_host():
                self._send(HTTPStatus.MISDIRECTED_REQUEST,
                           _error_page("this server answers loopback names only"))
                return
            url = urlsplit(self.path)
            try:
                status, page = pages.answer(url.path, parse_qs(url.query), form)
            except PolicydError as exc:  # the cluster could not be read
                status, page = HTTPStatus.BAD_GATEWAY, _error_page(printable(str(exc)))
            self._send(status, page)

        def _loopback_host(self) -> bool:
            name = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]")
            return name in LOOPBACK_HOSTS

        def _send(self, status: int, page: str) -> None:
            data = page.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per request on the terminal would drown the URL printed

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="policyd-ui", daemon=True).start()
    return server


__all__ = ["UiPages", "UiSettings", "serve"]
