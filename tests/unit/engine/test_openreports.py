"""The audit as OpenReports objects: the mapping of each finding to a result, the
bound on results, and the objects `policyd audit -o openreports` prints validated
against the CRD deploy/ ships (its openAPIV3Schema, as the API server would)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import typer
from ruamel.yaml import YAML

from policyd.cli import audit_cmd
from policyd.engine.audit import AuditResult, CaseMismatch, PolicyChecks, Violation
from policyd.engine.openreports import (
    DROPPED_ANNOTATION,
    FAIL,
    MAX_TEXT,
    PASS,
    WARN,
    findings,
    report_object,
    reports,
)
from tests.cli_runs import run_cli
from tests.unit.cli.test_audit_cmd import ENV_PROD, HW_AUDIT, NODES, PODS

ROOT = Path(__file__).resolve().parents[3]
CRDS = {d["spec"]["names"]["kind"]: d["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        for d in YAML(typ="safe").load_all(
            (ROOT / "deploy" / "crds" / "openreports.io_reports.yaml").read_text()) if d}


def _result() -> AuditResult:
    checks = PolicyChecks("env-prod", "EnvProd", "Enforce",
                          pods=[("shop/a", "n1"), ("shop/b", "n2"), ("ops/c", "n2")],
                          rules=[("prod",), ("prod",), ()])
    audited = PolicyChecks("hw", "Hw", "Audit", pods=[("ops/c", "n2")], rules=[("hw",)])
    return AuditResult(
        violations=[Violation("shop/b", "n2", "env-prod", "EnvProd", "prod", "Enforce",
                              "node(s) are not production nodes"),
                    Violation("ops/c", "n2", "hw", "Hw", "hw", "Audit", "no hw")],
        skipped=[], checked=3, policies=[audited, checks],
        label_case=[CaseMismatch("n2", "env-prod", "EnvProd", "Env", "env")],
        uids={"shop/a": "u-a", "shop/b": "u-b", "ops/c": "u-c"})


def test_each_finding_maps_to_one_result() -> None:
    got = {(f.namespace, f.resource["name"], f.policy, f.rule_id, f.result)
           for f in findings(_result())}
    assert got == {
        ("shop", "a", "env-prod", "prod", PASS),
        ("shop", "b", "env-prod", "prod", FAIL),  # Enforce mode
        ("ops", "c", "hw", "hw", WARN),  # Audit mode
        # ops/c was not asked env-prod's rule (it does not apply): no result.
        ("", "n2", "env-prod", "node-label-key-case", WARN),
    }
    fail = next(f for f in findings(_result()) if f.result == FAIL)
    assert dict(fail.resource) == {"apiVersion": "v1", "kind": "Pod", "namespace": "shop",
                                   "name": "b", "uid": "u-b"}
    assert dict(fail.properties) == {"node": "n2", "plugin": "EnvProd", "mode": "Enforce"}


def test_one_report_per_namespace_and_a_cluster_report() -> None:
    objs = reports(findings(_result()), lambda _: 1700000000.0)
    assert sorted(objs) == ["", "ops", "shop"]
    assert objs[""]["kind"] == "ClusterReport" and "namespace" not in objs[""]["metadata"]
    shop = objs["shop"]
    assert (shop["kind"], shop["metadata"]["name"], shop["metadata"]["namespace"]) == (
        "Report", "policyd", "shop")
    assert shop["summary"] == {"pass": 1, "fail": 1, "warn": 0, "error": 0, "skip": 0}
    assert [r["result"] for r in shop["results"]] == ["fail", "pass"]  # most severe first
    assert shop["results"][0]["timestamp"] == {"seconds": 1700000000, "nanos": 0}
    for obj in objs.values():
        jsonschema.validate(obj, CRDS[obj["kind"]])


@pytest.mark.parametrize("cap", [1, 2, 5])
def test_a_report_keeps_at_most_max_results_the_most_severe_first(cap: int) -> None:
    many = [f for f in findings(_result()) if f.namespace == "shop"] * 3  # 6: 3 fail, 3 pass
    obj = report_object("shop", many, lambda _: 0.0, max_results=cap)
    kept = [r["result"] for r in obj["results"]]
    assert len(kept) == min(cap, 6)
    assert kept == sorted(kept, key=["fail", "warn", "error", "skip", "pass"].index)
    assert sum(obj["summary"].values()) == len(kept)
    assert obj["configuration"] == {"limits": {"maxResults": cap}}
    dropped = (obj["metadata"].get("annotations") or {}).get(DROPPED_ANNOTATION)
    assert dropped == (str(6 - cap) if cap < 6 else None)


@pytest.mark.parametrize(("pods", "message_length"), [(1000, 32_768), (3000, 900),
                                                       (200, 20)])
def test_a_report_stays_under_etcds_object_limit(pods: int, message_length: int) -> None:
    """A policy message may be 32,768 characters and a namespace may hold thousands of
    failing pods: the report the API server is sent stays under etcd's 1.5 MiB, its
    messages cut, its summary and dropped count telling what it holds."""
    message = ("node(s) are not production nodes " * 1000)[:message_length]
    violations = [Violation(f"shop/web-{i:05d}-{'x' * 200}", f"node-{i}", "env-prod",
                            "EnvProd", "prod", "Enforce", message) for i in range(pods)]
    result = AuditResult(violations=violations, skipped=[], checked=pods, policies=[],
                         uids={v.pod: f"uid-{i}" for i, v in enumerate(violations)})
    obj = report_object("shop", findings(result), lambda _: 0.0, max_results=pods)
    size = len(json.dumps(obj))
    assert size < 1_400_000, size  # etcd's default limit is 1.5 MiB (1,572,864 bytes)
    kept = obj["results"]
    assert kept and all(len(r["message"]) <= MAX_TEXT for r in kept)
    assert obj["summary"]["fail"] == len(kept)
    dropped = int((obj["metadata"].get("annotations") or {}).get(DROPPED_ANNOTATION, 0))
    assert len(kept) + dropped == pods
    if pods * min(message_length, MAX_TEXT) < 500_000:
        assert dropped == 0  # small reports keep everything
    jsonschema.validate(obj, CRDS["Report"])


def test_audit_prints_them_as_a_list_the_crd_accepts(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(NODES + PODS)
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "env-prod.yaml").write_text(ENV_PROD)
    (tmp_path / "policies" / "hw.yaml").write_text(HW_AUDIT)
    app = typer.Typer()
    app.command("audit")(audit_cmd.audit)
    app.command("unused")(lambda: None)
    out = run_cli(app, ["audit", "--cluster", str(tmp_path / "cluster.yaml"), "--policies",
                        str(tmp_path / "policies"), "-o", "openreports"])
    assert out.code == 1  # the exit code is the audit's, whatever the format
    doc: dict[str, Any] = YAML(typ="safe").load(out.stdout)
    assert (doc["apiVersion"], doc["kind"]) == ("v1", "List")
    by_ns = {o["metadata"].get("namespace", ""): o for o in doc["items"]}
    for obj in doc["items"]:
        jsonschema.validate(obj, CRDS[obj["kind"]])
    fails = {(r["resources"][0]["name"], r["policy"]) for o in doc["items"]
             for r in o["results"] if r["result"] == "fail"}
    warns = {(r["resources"][0]["name"], r["policy"]) for o in doc["items"]
             for r in o["results"] if r["result"] == "warn"}
    # The same violations `-o json` lists: Enforce ones fail, the Audit one warns.
    assert fails == {("web-2", "env-prod"), ("legacy", "env-prod")}
    assert warns == {("db", "hw-encrypt")}
    assert by_ns["shop"]["summary"]["pass"] == 1  # web-1 on a prod node
