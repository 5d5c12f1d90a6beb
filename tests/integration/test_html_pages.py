"""`-o html` of explain, simulate and diff, as a person sees it: each page produced by
the real command, opened from disk in headless Chromium (tests/browser.py), with no
console error or exception; every node is in the explain grid (all rows at 20 nodes;
at 5,000 the grid keeps only the rows in view in the DOM, and scrolling and the filter
box reach any node), the chosen node is marked and first, clicking a rejection group
filters the grid to exactly that group, clicking a header sorts; simulate's pod x
blocking-plugin matrix and diff's tables hold what the JSON says. Hostile text (a
policy message with markup) shows as text. Screenshots go to the test's directory, and
to $POLICYD_PAGE_SCREENSHOTS when set (docs/images/ holds the ones looked at).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.browser import Browser

HOSTILE = "</script><img src=x onerror=alert(1)> not in zone a"
POLICY = f"""\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {{name: zone-a}}
spec:
  pluginName: ZoneA
  filters:
    - id: zone
      message: {json.dumps(HOSTILE)}
      nodeLabels:
        matchExpressions: [{{key: zone, operator: In, values: [a, c]}}]
"""
NARROWER = POLICY.replace("[a, c]", "[a]")


def snapshot(path: Path, nodes: int, pending: int, seed: int = 1) -> Path:
    rng = random.Random(seed)
    items: list[dict[str, Any]] = []
    for i in range(nodes):
        name = f"node-{i:05d}"
        cpu = rng.choice(["2", "4", "8"])
        items.append({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "labels": {"zone": rng.choice("abc"),
                                     "kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}})
        if rng.random() < 0.3:
            items.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": f"busy-{i}", "namespace": "default", "uid": f"u-busy-{i}"},
                "spec": {"nodeName": name, "containers": [{"name": "c", "image": "i",
                         "resources": {"requests": {"cpu": "1500m"}}}]},
                "status": {"phase": "Running"}})
    for j in range(pending):
        items.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"web-{j}", "namespace": "shop", "uid": f"u-web-{j}"},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {
                # web-0, the pod explain is asked about, fits some node; the others
                # may fit none (simulate's matrix needs them).
                "requests": {"cpu": "3" if j == 0 else rng.choice(["500m", "3", "7", "9"])}}}]}})
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def policyd(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "policyd", *map(str, args)],
                          capture_output=True, text=True, check=False, timeout=300)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pages")
    (d / "old").mkdir()
    (d / "new").mkdir()
    (d / "old" / "zone.yaml").write_text(POLICY)
    (d / "new" / "zone.yaml").write_text(NARROWER)
    return d


def shot(browser: Browser, work: Path, name: str) -> None:
    path = browser.screenshot(work / f"{name}.png")
    if out := os.environ.get("POLICYD_PAGE_SCREENSHOTS"):
        shutil.copy(path, Path(out) / path.name)


def page(work: Path, name: str, *args: str | Path) -> tuple[Path, dict[str, Any]]:
    """The command's html page, and its json document for comparison (one seed for
    both: ties are broken alike)."""
    args = (*args, "--seed", "1")
    html = policyd(*args, "-o", "html")
    assert html.returncode in (0, 1), html.stderr
    assert html.stdout.startswith("<!DOCTYPE html>")
    path = work / f"{name}.html"
    path.write_text(html.stdout)
    doc = json.loads(policyd(*args, "-o", "json").stdout)
    return path, doc


def rows(browser: Browser, grid: str = "grid") -> list[str]:
    """The first cell of each row the grid has in the DOM."""
    return list(browser.js(
        f"[...document.querySelectorAll('[data-testid=\"{grid}\"] tbody tr:not(.spacer)')]"
        ".map(tr => tr.firstChild.textContent)"))


def count(browser: Browser) -> str:
    return str(browser.js("document.querySelector('[data-testid=count]').textContent"))


def groups_of(doc: dict[str, Any]) -> Counter[str]:
    return Counter("feasible" if n["feasible"] else
                   f"{n['rejectedBy']}: {n['filters'][n['rejectedBy']]}" for n in doc["nodes"])


def test_explain_at_20_nodes_shows_every_node_and_filters_by_a_click(
        browser: Browser, work: Path) -> None:
    cluster = snapshot(work / "c20.json", 20, 1)
    path, doc = page(work, "explain-20", "explain", "shop/web-0", "--cluster", cluster,
                     "--policies", work / "old")
    browser.open(path)
    shown = rows(browser)
    assert sorted(shown) == sorted(n["name"] for n in doc["nodes"])  # every node
    assert doc["node"] and shown[0] == doc["node"]  # the chosen node first...
    assert browser.js("document.querySelector('tr.chosen').firstChild.textContent") == doc["node"]
    assert browser.js("document.querySelector('[data-testid=verdict]').textContent") == \
        f"chosen node: {doc['node']}"
    # The hostile message is text in the grid, and no element it spells was made.
    assert browser.js("document.querySelectorAll('img').length") == 0
    assert browser.js(f"document.body.textContent.includes({json.dumps(HOSTILE)})")
    shot(browser, work, "explain-20")
    # A click on a rejection group: exactly that group's nodes.
    groups = groups_of(doc)
    key, size = next((g, n) for g, n in groups.most_common() if g != "feasible")
    browser.click(f"[data-testid=groups] .chip[data-group={json.dumps(key)}]")
    assert count(browser) == f"{size} of 20 rows"
    expected = {n["name"] for n in doc["nodes"] if not n["feasible"]
                and f"{n['rejectedBy']}: {n['filters'][n['rejectedBy']]}" == key}
    assert set(rows(browser)) == expected
    browser.click(f"[data-testid=groups] .chip[data-group={json.dumps(key)}]")  # off again
    assert count(browser) == "20 rows"
    # A click on the TOTAL header sorts by it (ascending, then descending).
    browser.click("[data-testid=grid] th:last-child")
    browser.click("[data-testid=grid] th:last-child")
    totals = browser.js("[...document.querySelectorAll('[data-testid=grid] tbody "
                        "tr:not(.spacer)')].map(tr => tr.lastChild.textContent)")
    numbers = [int(t) for t in totals if t]
    assert numbers == sorted(numbers, reverse=True) and numbers
    assert browser.errors == []


def test_a_long_message_is_written_once_and_shown_cut(browser: Browser, work: Path) -> None:
    """A policy message may be 32,768 characters: repeated on each rejected node it is
    written once in the file, and its group's chip stays one line, cut, with the whole
    text as its title; its nodes are the ones a click on it shows."""
    message = ("node(s) are not in zone a or c " * 1100)[:32_000].strip()
    (work / "long").mkdir(exist_ok=True)
    (work / "long" / "zone.yaml").write_text(
        POLICY.replace(json.dumps(HOSTILE), json.dumps(message)))
    cluster = snapshot(work / "c200.json", 200, 1)
    path, doc = page(work, "explain-long", "explain", "shop/web-0", "--cluster", cluster,
                     "--policies", work / "long")
    rejected = [n for n in doc["nodes"] if n["rejectedBy"] == "ZoneA"]
    assert len(rejected) > 20
    assert path.stat().st_size < 2 * len(message) + 500_000
    browser.open(path)
    key = f"ZoneA: {message}"
    chip = f"[data-testid=groups] .chip[data-group={json.dumps(key)}]"
    assert browser.js(f"document.querySelector({json.dumps(chip)}).title") == key
    width = browser.js(f"document.querySelector({json.dumps(chip)}).offsetWidth")
    height = browser.js(f"document.querySelector({json.dumps(chip)}).offsetHeight")
    assert width < browser.js("window.innerWidth") and height < 40, (width, height)
    browser.click(chip)
    assert count(browser) == f"{len(rejected)} of 200 rows"
    assert set(rows(browser)) <= {n["name"] for n in rejected}
    shot(browser, work, "explain-long")
    assert browser.errors == []


def test_explain_at_5000_nodes_stays_virtual_and_reaches_every_node(
        browser: Browser, work: Path) -> None:
    cluster = snapshot(work / "c5000.json", 5000, 1)
    path, doc = page(work, "explain-5000", "explain", "shop/web-0", "--cluster", cluster,
                     "--policies", work / "old")
    took = browser.open(path)
    assert took < 20, f"the 5,000-node page took {took:.1f} s to render"
    assert count(browser) == "5000 rows"
    in_dom = rows(browser)
    assert len(in_dom) < 200  # virtualised: the rows in view, not 5,000
    assert in_dom[0] == doc["node"]
    shot(browser, work, "explain-5000")
    # Scrolling to the end shows the last node of the order.
    browser.js("document.querySelector('[data-testid=grid]').scrollTop = 1e9")
    time.sleep(0.2)
    browser.js("document.querySelector('[data-testid=grid]').dispatchEvent(new Event('scroll'))")
    last_sorted = rows(browser)[-1]
    assert last_sorted in {n["name"] for n in doc["nodes"]} and last_sorted != in_dom[-1]
    # The filter box finds any node.
    target = random.Random(3).choice(doc["nodes"])["name"]
    browser.type_into("[data-testid=search]", target)
    assert rows(browser) == [target] and count(browser) == "1 of 5000 rows"
    browser.js("const s = document.querySelector('[data-testid=search]'); s.value = '';"
               " s.dispatchEvent(new Event('input'))")
    # A group click at scale: the count is the group's.
    groups = groups_of(doc)
    key, size = next((g, n) for g, n in groups.most_common() if g != "feasible")
    browser.click(f"[data-testid=groups] .chip[data-group={json.dumps(key)}]")
    assert count(browser) == f"{size} of 5000 rows"
    shot(browser, work, "explain-5000-filtered")
    assert browser.errors == []


def test_simulate_shows_the_pod_by_blocking_plugin_matrix(browser: Browser, work: Path) -> None:
    cluster = snapshot(work / "c-sim.json", 30, 40, seed=2)
    path, doc = page(work, "simulate", "simulate", "--cluster", cluster, "--policies",
                     work / "old")
    browser.open(path)
    assert sorted(rows(browser)) == sorted(p["pod"] for p in doc["placements"])
    blocked = Counter(k for p in doc["placements"] for k in p.get("blockedBy", {}))
    assert blocked, "the generated pods must include unschedulable ones"
    headers = browser.js("[...document.querySelectorAll('[data-testid=grid] th')]"
                         ".map(th => th.textContent)")
    assert set(blocked) <= set(headers)
    plugin, pods = blocked.most_common(1)[0]
    browser.click(f"[data-testid=groups] .chip[data-group={json.dumps(plugin)}]")
    assert count(browser) == f"{pods} of {len(doc['placements'])} rows"
    assert set(rows(browser)) == {p["pod"] for p in doc["placements"]
                                  if plugin in p.get("blockedBy", {})}
    shot(browser, work, "simulate")
    assert browser.errors == []


def test_diff_shows_its_summary_and_tables(browser: Browser, work: Path) -> None:
    cluster = snapshot(work / "c-diff.json", 30, 20, seed=4)
    path, doc = page(work, "diff", "diff", work / "old", work / "new", "--cluster", cluster)
    browser.open(path)
    summary = browser.js("Object.fromEntries([...document.querySelectorAll("
                         "'[data-testid=summary] tr')].map(tr => [tr.firstChild.textContent,"
                         " tr.lastChild.textContent]))")
    assert summary == {k: str(v) if not isinstance(v, bool) else str(v).lower()
                       for k, v in doc["summary"].items()}
    assert doc["summary"]["newViolations"] > 0
    assert sorted(rows(browser, "New violations (bound pods)")) == sorted(
        v["pod"] for v in doc["newViolations"])
    shot(browser, work, "diff")
    assert browser.errors == []
