"""`policyd ui` against the real API server, in headless Chromium (issue 31): the pages
are made from the cluster as it is at each request, simulate's pods link to their
explain page, and the what-if editor, starting from the cluster's SchedulingPolicy
objects, changes the grid when an edited policy is applied; a broken edit is shown
where it is broken, and the cluster is never written.

A screenshot of the edited page is kept when POLICYD_PAGE_SCREENSHOTS names a
directory (docs/images/ui-what-if.png was taken so).
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from policyd.cli.schedule_cmds import FieldValidation, load_input
from policyd.cli.ui_server import UiPages, UiSettings, serve
from policyd.devcluster import ControlPlane
from tests.browser import Browser
from tests.e2e.helpers import Cluster
from tests.e2e.test_cluster_policies import Policies, install_crd, policy

SCHEDULER = "policyd"  # the default profile's: served, and no daemon runs here


@pytest.fixture
def policies(cluster: Cluster) -> Iterator[Policies]:
    install_crd(cluster.client)
    p = Policies(cluster.client)
    try:
        yield p
    finally:
        for name in p.names:
            p.delete(name)


@pytest.fixture
def ui(control_plane: ControlPlane) -> Iterator[str]:
    kubeconfig = str(control_plane.kubeconfig_path)
    pages = UiPages(UiSettings(lambda: load_input(None, kubeconfig, None,
                                                  FieldValidation.strict)))
    server = serve(pages, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def text(browser: Browser, testid: str) -> str:
    return str(browser.js(f"document.querySelector('[data-testid={testid}]').textContent"))


def rejected_by(browser: Browser) -> dict[str, str]:
    """node -> its verdict cell's tip (the rejecting plugin and why), from the grid."""
    return dict(browser.js(
        "Object.fromEntries([...document.querySelectorAll('[data-testid=grid] tbody "
        "tr:not(.spacer)')].map(tr => [tr.cells[0].textContent, tr.cells[1].title]))"))


def apply_edit(browser: Browser, edit: str) -> None:
    """Put `edit` in the editor and press Apply (a real click), then wait for the page."""
    browser.js("document.querySelector('[data-testid=what-if]').open = true")
    browser.js(f"document.querySelector('[data-testid=policies]').value = {json.dumps(edit)}")
    browser.navigate(lambda: browser.click("[data-testid=apply]"))


def test_the_live_pages_and_a_what_if_edit(cluster: Cluster, policies: Policies, ui: str,
                                           browser: Browser, tmp_path: Path) -> None:
    ns = cluster.ns
    cluster.node("ui-ssd", labels={"disk": "ssd"})
    cluster.node("ui-hdd", labels={"disk": "hdd"})
    cluster.pod("web", SCHEDULER)
    policies.create(policy("ui-ssd-only", "UiSsdOnly", "node(s) are not SSD",
                           nodeLabels={"matchLabels": {"disk": "ssd"}}))

    # simulate: the cluster's pending pod, placed by the cluster's policy, links on.
    browser.open(ui + "/")
    row = browser.js(
        "[...document.querySelectorAll('[data-testid=grid] tbody tr:not(.spacer)')]"
        f".map(tr => [tr.cells[0].textContent, tr.cells[1].textContent])"
        f".find(r => r[0] === '{ns}/web')")
    assert row == [f"{ns}/web", "ui-ssd"]
    browser.navigate(lambda: browser.click(f"[data-testid=grid] a[href*='{ns}%2Fweb']"))

    # explain, as the link led: the chosen node, the other rejected by the policy.
    assert browser.js("location.pathname + location.search") == f"/explain?pod={ns}%2Fweb"
    assert text(browser, "verdict") == "chosen node: ui-ssd"
    grid = rejected_by(browser)
    assert grid["ui-hdd"] == "UiSsdOnly: node(s) are not SSD"
    # The editor starts from the policies in force: here the cluster's object.
    current = str(browser.js("document.querySelector('[data-testid=policies]').value"))
    assert "name: ui-ssd-only" in current and "disk: ssd" in current
    assert "resourceVersion" not in current and "managedFields" not in current

    # What if the policy wanted HDDs: the same page, the other node.
    apply_edit(browser, current.replace("disk: ssd", "disk: hdd"))
    assert text(browser, "verdict") == "chosen node: ui-hdd"
    assert rejected_by(browser)["ui-ssd"] == "UiSsdOnly: node(s) are not SSD"
    assert "edited" in text(browser, "what-if")
    shot = browser.screenshot(tmp_path / "ui-what-if.png")
    if out := os.environ.get("POLICYD_PAGE_SCREENSHOTS"):
        shutil.copy(shot, Path(out) / shot.name)
    # Nothing was written: the object in the cluster still wants SSDs.
    obj = policies.get("ui-ssd-only")
    assert obj["spec"]["filters"][0]["nodeLabels"] == {"matchLabels": {"disk": "ssd"}}
    # A fresh GET is the cluster's policies again.
    browser.navigate(lambda: browser.click("[data-testid=what-if] a"))
    assert text(browser, "verdict") == "chosen node: ui-ssd"

    # A broken edit: said where, the text kept for fixing, nothing explained.
    broken = current.replace("  filters:", "  filterz:")
    apply_edit(browser, broken)
    error = text(browser, "ui-error")
    assert error.startswith("what-if.yaml:") and "filterz" in error, error
    assert browser.js("document.querySelector('[data-testid=policies]').value") == broken
    assert browser.errors == []

    # The cluster changes, the page follows at the next request: a new node.
    cluster.node("ui-ssd-2", labels={"disk": "ssd"}, cpu="64")
    browser.open(f"{ui}/explain?pod={ns}/web")
    assert set(rejected_by(browser)) == {"ui-ssd", "ui-hdd", "ui-ssd-2"}
    assert browser.errors == []


def test_only_loopback_names_are_answered(ui: str) -> None:
    """A page elsewhere cannot point a name of its own at the server and read the
    cluster through it (DNS rebinding): another Host gets 421."""
    request = urllib.request.Request(ui + "/", headers={"Host": "attacker.example"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=30)
    assert err.value.code == 421
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(ui + "/nowhere", timeout=30)
    assert err.value.code == 404
