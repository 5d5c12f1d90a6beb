"""policyd's device selectors against kube-scheduler's own CEL, case by case.

tests/unit/cel/data/upstream_table.json is what k8s.io/dynamic-resource-allocation
v0.36.3's cel package (the cache kube-scheduler's DynamicResources plugin builds, with
v1.36's default features) made of every case in tools/celtable/cases.json: the compile
error, or the match or runtime error for the case's device, and the API server's cost
estimate. Every text must be equal, except for the differences listed below, which
must still differ (so that one fixed is taken off the list)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from policyd.cel import (
    CEL_SELECTOR_MAX_COST,
    CelCompileError,
    CelRuntimeError,
    compile_device_selector,
)

TABLE = json.loads((Path(__file__).parent / "data" / "upstream_table.json").read_text())
ROWS = {row["name"]: row for row in TABLE}

# Known differences, each with why (the package docstrings say more).
KNOWN = {
    "has on driver": "cel-cpp's checker folds has(device.driver) into the variable "
                     "device.driver (a string); upstream's device is an object",
    "device alone": "`device` is not a variable here, only its four fields are",
    "wrong arg count": "cel-cpp reports a call with no matching arity as an undeclared "
                       "reference",
    "invalid regex literal": "cel-go's compile-time literal validators (regex, duration, "
                             "timestamp, homogeneous literals) are not in cel-cpp: the "
                             "error comes at run time",
    "duration literal invalid": "as above",
    "mixed list literal": "as above",
    "bind whole": "a domain map used whole gets no empty maps for missing domains",
    "isSorted": "Kubernetes' lists library is not available",
    "sets": "cel-go's sets extension is not available",
    "lists ext": "cel-go's lists extension is not available",
    "two var": "two-variable comprehensions are not available",
    "ip": "Kubernetes' IP library is not available",
    "url": "Kubernetes' URL library is not available",
    "uint negative": "cel-go folds constants when the program is built and fails there",
    "double to int overflow": "as above",
    "map literal duplicate": "cel-go keeps the last of duplicate literal keys, cel-cpp "
                             "fails",
}


def _outcome(row: dict[str, Any]) -> tuple[dict[str, Any], int | None]:
    try:
        selector = compile_device_selector(row["expression"])
    except CelCompileError as e:
        return {"compileError": str(e)}, None
    try:
        return {"match": selector.matches(row["driver"], row["device"])}, selector.max_cost
    except CelRuntimeError as e:
        return {"runtimeError": str(e)}, selector.max_cost


def _upstream(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in ("compileError", "match", "runtimeError") if k in row}


def test_the_table_has_the_known_cases() -> None:
    assert len(TABLE) > 150
    assert set(KNOWN) <= set(ROWS)


@pytest.mark.parametrize("name", sorted(set(ROWS) - set(KNOWN)))
def test_same_outcome_as_kube_scheduler(name: str) -> None:
    row = ROWS[name]
    outcome, cost = _outcome(row)
    assert outcome == _upstream(row)
    if cost is not None and row.get("maxCost") is not None \
            and row["maxCost"] <= CEL_SELECTOR_MAX_COST:
        # A selector the API server admits is never refused for its cost here.
        assert cost <= CEL_SELECTOR_MAX_COST


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_known_differences_still_differ(name: str) -> None:
    outcome, _ = _outcome(ROWS[name])
    assert outcome != _upstream(ROWS[name]), f"{name} now agrees: take it off KNOWN"
