"""docs/policy-language.md lists exactly the PolicyTest shorthand keys the code accepts,
and the less obvious ones (priority, nodeSelector) do what the docs say."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from policyd.policytest.run_tests import run_tests
from policyd.policytest.schema import NODE_SHORTHAND, POD_SHORTHAND

DOCS = Path(__file__).resolve().parents[3] / "docs" / "policy-language.md"


def _documented_rows(table_header: str) -> list[tuple[str, str]]:
    """(key, row) of the docs table whose header row starts with `| <table_header> |`."""
    lines = DOCS.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"| {table_header} |"))
    rows = []
    for ln in lines[start + 2:]:
        if not ln.startswith("|"):
            break
        m = re.match(r"\|\s*`([^`]+)`\s*\|", ln)
        assert m, f"row without a `key` in the {table_header!r} table: {ln}"
        rows.append((m.group(1), ln))
    return rows


@pytest.mark.parametrize(("header", "schema"), [("node key", NODE_SHORTHAND),
                                                ("pod key", POD_SHORTHAND)])
def test_docs_list_every_shorthand_key_and_no_other(header: str, schema: dict[str, object]
                                                    ) -> None:
    documented = [key for key, _ in _documented_rows(header)]
    accepted = list(schema["properties"])  # type: ignore[call-overload]
    assert sorted(documented) == sorted(accepted)
    assert len(documented) == len(set(documented))


@pytest.mark.parametrize(("header", "schema"), [("node key", NODE_SHORTHAND),
                                                ("pod key", POD_SHORTHAND)])
def test_docs_mark_exactly_the_required_keys(header: str, schema: dict[str, object]) -> None:
    required = {key for key, row in _documented_rows(header) if "(required)" in row}
    assert required == set(schema["required"])  # type: ignore[call-overload]


SUITE = """\
apiVersion: policyd.io/v1alpha1
kind: PolicyTest
metadata: {name: shorthand}
spec:
  policies:
    - apiVersion: policyd.io/v1alpha1
      kind: SchedulingPolicy
      metadata: {name: high}
      spec:
        pluginName: HighPriority
        appliesTo: {condition: "spec.priority > `1000`"}
        filters:
          - {id: ssd, message: "node(s) without ssd", nodeLabels: {matchLabels: {disk: ssd}}}
  nodes:
    - {name: ssd-1, labels: {disk: ssd, zone: a}}
    - {name: hdd-1, labels: {disk: hdd, zone: b}}
  pods:
    - {name: urgent, priority: 2000}
    - {name: routine, priority: 10}
    - {name: pinned, nodeSelector: {zone: b}}
  tests:
    - name: priority reaches the policy
      pod: urgent
      policies: {HighPriority: {applies: true, pass: [ssd-1]}}
      scheduledTo: ssd-1
    - name: low priority is left alone
      pod: routine
      policies: {HighPriority: {applies: false}}
    - name: nodeSelector reaches NodeAffinity
      pod: pinned
      scheduledTo: hdd-1
"""


def test_priority_and_node_selector_shorthand_take_effect(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    f.write_text(SUITE)
    result = run_tests([f])
    assert not result.problems and not result.bad_paths
    assert [c.name for c in result.cases if c.passed] == [
        "priority reaches the policy", "low priority is left alone",
        "nodeSelector reaches NodeAffinity"]
    # And they really decide: the opposite expectations fail.
    f.write_text(SUITE.replace("scheduledTo: hdd-1", "scheduledTo: ssd-1")
                 .replace("applies: false", "applies: true"))
    assert run_tests([f]).failed == 2
