"""Headless Chromium (Debian's `chromium` package) driven over the DevTools protocol,
for testing policyd's HTML pages as a person sees them: load a file, collect console
errors and uncaught exceptions, evaluate JavaScript, click at an element's position
(real mouse events) and take screenshots.

The protocol client is `websocket-client` (a dependency of the Kubernetes client);
Chromium runs with the flags this machine needs (no sandbox as root, no background
networking: this network is closed) and a fresh profile directory.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import websocket

CHROMIUM = os.environ.get("POLICYD_CHROMIUM", "/usr/bin/chromium")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--remote-debugging-port=0")


class BrowserError(RuntimeError):
    pass


class Browser:
    """One Chromium and one page; `close()` ends both."""

    def __init__(self, width: int = 1400, height: int = 900) -> None:
        if not Path(CHROMIUM).exists():
            raise BrowserError(f"{CHROMIUM} not found: install Debian's chromium package "
                               "(hack/ensure-chromium.sh, which `make test` runs)")
        self.profile = tempfile.mkdtemp(prefix="policyd-chromium-")
        self.proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}",
                                      "about:blank"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        port = self._port()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            targets = json.load(r)
        page = next(t for t in targets if t.get("type") == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60,
                                              suppress_origin=True)
        self._ids = itertools.count(1)
        self.errors: list[str] = []  # console errors and uncaught exceptions
        self._events: list[dict[str, Any]] = []
        for method in ("Runtime.enable", "Log.enable", "Page.enable"):
            self.call(method)
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def _port(self) -> int:
        active = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if active.exists() and active.read_text().strip():
                return int(active.read_text().split()[0])
            if self.proc.poll() is not None:
                raise BrowserError(f"chromium exited with {self.proc.returncode}")
            time.sleep(0.05)
        raise BrowserError("chromium did not open its DevTools port in 30 s")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self._ids)
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == ident:
                if "error" in msg:
                    raise BrowserError(f"{method}: {msg['error']}")
                return dict(msg.get("result") or {})
            self._event(msg)

    def _event(self, msg: dict[str, Any]) -> None:
        method = msg.get("method", "")
        params = msg.get("params") or {}
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails") or {}
            self.errors.append("exception: " + str(
                (details.get("exception") or {}).get("description") or details.get("text")))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append("console.error: " + " ".join(
                str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
        elif method == "Log.entryAdded" and (params.get("entry") or {}).get("level") == "error":
            self.errors.append("log: " + str(params["entry"].get("text")))
        self._events.append(msg)

    def open(self, path: Path | str, timeout: float = 60) -> float:
        """Load a file (or a URL) and wait until the page says it is rendered
        (`body[data-ready]`); the seconds it took."""
        url = path if isinstance(path, str) else path.resolve().as_uri()
        return self.navigate(lambda: self.call("Page.navigate", url=url), timeout)

    def navigate(self, action: Callable[[], Any], timeout: float = 60) -> float:
        """Run `action` (a navigation: a load, a click that submits a form) and wait
        until the page it leads to is rendered; the seconds it took."""
        start = time.monotonic()
        self.js("window.policydLeft = true")  # gone once another document is loaded
        action()
        while time.monotonic() - start < timeout:
            if self.js("window.policydLeft !== true && document.body"
                       " && document.body.dataset.ready === 'true'"):
                return time.monotonic() - start
            if self.errors:
                raise BrowserError(f"the page failed: {self.errors}")
            time.sleep(0.05)
        raise BrowserError(f"the page did not finish rendering in {timeout} s")

    def js(self, expression: str) -> Any:
        reply = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                          awaitPromise=True)
        if "exceptionDetails" in reply:
            raise BrowserError(f"{expression}: {reply['exceptionDetails']}")
        return (reply.get("result") or {}).get("value")

    def click(self, selector: str) -> None:
        """A real click (mouse pressed and released) at the middle of the element."""
        box = self.js(f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
                      " if (!e) return null; e.scrollIntoView({block: 'center'});"
                      " const r = e.getBoundingClientRect();"
                      " return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        if box is None:
            raise BrowserError(f"nothing matches {selector}")
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1],
                      button="left", clickCount=1)

    def type_into(self, selector: str, text: str) -> None:
        self.click(selector)
        self.call("Input.insertText", text=text)

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            shutil.rmtree(self.profile, ignore_errors=True)
