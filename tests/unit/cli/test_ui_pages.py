"""`policyd ui`'s pages from plain inputs (the demo snapshot and policies): what each
path answers, the what-if editor's text and its effect, problems shown on the page,
and the command refusing bad input before it serves (exit 2). The live cluster and a
real browser: tests/e2e/test_ui.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from policyd.cli.schedule_cmds import FieldValidation, load_input
from policyd.cli.ui_cmd import parse_listen
from policyd.cli.ui_server import UiPages, UiSettings
from policyd.errors import PolicydError

REPO = Path(__file__).resolve().parents[3]
POD = "data/payments-db"


def _read() -> Any:
    source = load_input(REPO / "demo" / "cluster.yaml", None, None, FieldValidation.strict)
    from policyd.cli.schedule_cmds import load_pod_files
    from policyd.engine.inputs import merge_pods

    files, _ = load_pod_files([REPO / "demo" / "pods.yaml"], FieldValidation.strict)
    merged = merge_pods(source.snapshot.pods, files)
    source.snapshot.pods = merged.snapshot + merged.extra
    return source


@pytest.fixture
def pages() -> UiPages:
    return UiPages(UiSettings(_read, policies=[REPO / "policies"], seed=1))


def _data(page: str) -> dict[str, Any]:
    raw = page.split('id="policyd-data">', 1)[1].split("</script>", 1)[0]
    return dict(json.loads(raw))


def test_simulate_and_explain_pages(pages: UiPages) -> None:
    status, page = pages.answer("/", {}, None)
    data = _data(page)
    assert status == 200 and data["kind"] == "simulate"
    assert POD in [p["pod"] for p in data["document"]["placements"]]
    assert POD in data["ui"]["pods"] and data["ui"]["action"] == "/"
    status, page = pages.answer("/explain", {"pod": [POD]}, None)
    data = _data(page)
    assert status == 200 and data["kind"] == "explain"
    assert data["document"]["node"] == "node-b1"
    assert data["ui"]["action"] == "/explain?pod=data%2Fpayments-db"
    # The editor starts from the policy files in force, each named.
    assert f"# {REPO / 'policies' / 'hw-encrypt.yaml'}\n" in data["ui"]["policies"]
    assert data["ui"]["whatIf"] is False


def test_the_current_policies_applied_as_a_what_if_change_nothing(pages: UiPages) -> None:
    before = _data(pages.answer("/explain", {"pod": [POD]}, None)[1])
    text = before["ui"]["policies"]
    after = _data(pages.answer("/explain", {"pod": [POD]}, {"policies": [text]})[1])
    assert after["ui"]["whatIf"] is True and "error" not in after["ui"]
    assert after["document"]["nodes"] == before["document"]["nodes"]


def test_a_what_if_changes_the_grid(pages: UiPages) -> None:
    text = _data(pages.answer("/", {}, None)[1])["ui"]["policies"]
    # Without the hardware-encryption policy, the nodes it rejected are feasible.
    without = "---\n".join(d for d in text.split("---\n") if "name: hw-encrypt" not in d)
    assert without != text
    before = _data(pages.answer("/explain", {"pod": [POD]}, None)[1])["document"]
    after = _data(pages.answer("/explain", {"pod": [POD]}, {"policies": [without]})[1])
    rejected = {n["name"] for n in before["nodes"] if n.get("rejectedBy") == "HwEncrypt"}
    assert rejected and all(n.get("rejectedBy") != "HwEncrypt"
                            for n in after["document"]["nodes"])
    assert len(after["document"]["feasibleNodes"]) > len(before["feasibleNodes"])


def test_a_broken_what_if_is_shown_where_it_is_broken(pages: UiPages) -> None:
    broken = "apiVersion: policyd.io/v1alpha1\nkind: SchedulingPolicy\nmetadata: {name: x}\n" \
             "spec:\n  pluginName: X\n  filterz: []\n"
    for path, query in (("/", {}), ("/explain", {"pod": [POD]})):
        status, page = pages.answer(path, query, {"policies": [broken]})
        ui = _data(page)["ui"]
        assert status == 200
        assert ui["error"].startswith("what-if.yaml:6:3: error: unknown field 'filterz'")
        assert ui["policies"] == broken  # kept for fixing


@pytest.mark.parametrize(("path", "query", "status", "said"), [
    ("/explain", {"pod": ["data/nope"]}, 404, "no pod data/nope in the cluster"),
    ("/explain", {}, 400, "name the pod"),
    ("/nowhere", {}, 404, "no page /nowhere"),
])
def test_what_is_not_there(pages: UiPages, path: str, query: dict[str, list[str]],
                           status: int, said: str) -> None:
    got, page = pages.answer(path, query, None)
    assert got == status and said in _data(page)["ui"]["error"]


def test_listen_addresses() -> None:
    assert parse_listen("127.0.0.1:8377") == ("127.0.0.1", 8377)
    assert parse_listen("[::1]:0") == ("::1", 0)
    assert parse_listen(":9000") == ("127.0.0.1", 9000)
    for bad in ("8377", "host:", "host:http", "h:70000"):
        with pytest.raises(PolicydError, match="give HOST:PORT"):
            parse_listen(bad)


@pytest.mark.parametrize(("args", "said"), [
    (["--listen", "nowhere"], "--listen 'nowhere': give HOST:PORT"),
    (["--policies", "no/such/dir"], "no/such/dir"),
    (["--cluster-policies"], "--cluster-policies runs the live cluster"),
])
def test_bad_input_is_refused_before_serving(args: list[str], said: str) -> None:
    done = subprocess.run([sys.executable, "-m", "policyd", "ui", "--cluster",
                           str(REPO / "demo" / "cluster.yaml"), *args],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr
