"""`policyd audit` as CI runs it: exit codes, the text summary, the JSON shape, JUnit
that parses, and which pods a profile's audit covers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
import typer

from policyd.cli import audit_cmd
from tests.cli_runs import run_cli

ROOT = Path(__file__).resolve().parents[3]

NODES = """\
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {env: prod, hw: "true"}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {env: staging}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
"""

ENV_PROD = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: env-prod}
spec:
  pluginName: EnvProd
  appliesTo: {labelSelector: {matchLabels: {tier: prod}}}
  filters:
    - id: prod-nodes-only
      message: node(s) are not production nodes
      nodeLabels:
        matchExpressions: [{key: env, operator: In, values: [prod]}]
"""
HW_AUDIT = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: hw-encrypt}
spec:
  pluginName: HwEncrypt
  mode: Audit
  appliesTo: {annotationSelector: {matchAnnotations: {hw: "true"}}}
  filters:
    - id: hw-node
      message: node(s) didn't offer hardware encryption
      annotationToNodeLabel: {annotation: hw, value: "true", label: hw, labelValue: "true"}
"""
PROFILE = """\
apiVersion: policyd.io/v1alpha1
kind: PolicydConfiguration
policies: [policies]
profiles:
  - schedulerName: policyd
"""


def pod(name: str, node: str, *, namespace: str = "shop", scheduler: str = "policyd",
        labels: str = "{}", annotations: str = "{}") -> str:
    return (f"---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: "
            f"{namespace}, labels: {labels}, annotations: {annotations}}}\n"
            f"spec:\n  schedulerName: {scheduler}\n  nodeName: {node}\n"
            "  containers: [{name: c, image: i, resources: {requests: {cpu: 100m}}}]\n"
            "status: {phase: Running}\n")


PODS = (pod("web-1", "n1", labels="{tier: prod}")
        + pod("web-2", "n2", labels="{tier: prod}")  # env-prod: n2 is staging
        + pod("db", "n2", namespace="data", annotations='{hw: "true"}')  # hw-encrypt
        + pod("batch", "n1", namespace="default", scheduler="default-scheduler")  # no policy
        + pod("legacy", "n2", scheduler="other", labels="{tier: prod}")  # env-prod
        + pod("ghost", "n9", labels="{tier: prod}"))  # n9 is not in the snapshot


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "cluster.yaml").write_text(NODES + PODS)
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "env-prod.yaml").write_text(ENV_PROD)
    (tmp_path / "policies" / "hw.yaml").write_text(HW_AUDIT)
    (tmp_path / "profile.yaml").write_text(PROFILE)
    return tmp_path


@pytest.fixture
def app() -> typer.Typer:
    a = typer.Typer()
    a.command("audit")(audit_cmd.audit)
    a.command("unused")(lambda: None)  # two commands: the command name is an argument
    return a


def run(app: typer.Typer, *args: str | Path) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) as `policyd` gives them: a PolicydError is its exit
    code with its one line, as the real error boundary prints it."""
    r = run_cli(app, ["audit", *args])
    return r.code, r.stdout, r.stderr


def test_violations_exit_1_grouped_by_policy_with_a_summary(app: typer.Typer,
                                                            files: Path) -> None:
    code, out, _ = run(app, "--cluster", files / "cluster.yaml",
                       "--policies", files / "policies")
    assert code == 1
    assert out.splitlines() == [
        "policy env-prod (Enforce, plugin EnvProd):",
        "  shop/legacy on n2: rule prod-nodes-only: node(s) are not production nodes",
        "  shop/web-2 on n2: rule prod-nodes-only: node(s) are not production nodes",
        "policy hw-encrypt (Audit, plugin HwEncrypt):",
        "  data/db on n2: rule hw-node: node(s) didn't offer hardware encryption",
        "skipped shop/ghost: bound to node n9, which is not in the cluster read (a node "
        "deleted, or a partial snapshot)",
        "3 pods violate 2 policies (env-prod: 2, hw-encrypt: 1); 5 pods checked",
        "1 bound pod not audited: 1 on a node not in the cluster read",
    ]


def test_no_violations_exit_0(app: typer.Typer, files: Path) -> None:
    code, out, _ = run(app, "--cluster", files / "cluster.yaml", "--policies",
                       files / "policies", "-n", "default")
    assert code == 0
    assert out.strip() == "no violations; 1 pod checked"


@pytest.mark.parametrize(("namespace", "hint"), [
    ("shpo", "; did you mean namespace shop?"),  # a typo: the closest one that has pods
    ("Data", "; did you mean namespace data?"),  # case
    ("payments", ""),                            # nothing close: no guess
])
def test_a_namespace_no_pod_is_in_is_named_with_the_closest(
        app: typer.Typer, files: Path, namespace: str, hint: str) -> None:
    code, out, err = run(app, "--cluster", files / "cluster.yaml", "--policies",
                         files / "policies", "-n", namespace)
    assert code == 0  # nothing audited is not a violation, but it is said
    assert out.strip() == "no violations; 0 pods checked"
    assert (f"policyd: warning: no pod is in namespace {namespace}{hint}: no pod audited"
            in err.splitlines())


def test_a_namespace_with_pods_gets_no_namespace_warning(app: typer.Typer,
                                                         files: Path) -> None:
    _, _, err = run(app, "--cluster", files / "cluster.yaml", "--policies",
                    files / "policies", "-n", "data")
    assert "namespace" not in err


def test_fail_on_enforce_ignores_audit_mode_violations(app: typer.Typer,
                                                       files: Path) -> None:
    args = ("--cluster", files / "cluster.yaml", "--policies", files / "policies" / "hw.yaml")
    code, out, _ = run(app, *args)
    assert code == 1 and "data/db on n2" in out
    code, out, _ = run(app, *args, "--fail-on", "enforce")
    assert code == 0 and "data/db on n2" in out  # reported, not failing


@pytest.mark.parametrize("bad", ["missing-cluster", "no-policies", "broken-policy",
                                 "unknown-field", "bad-format"])
def test_bad_input_exits_2(app: typer.Typer, files: Path, bad: str) -> None:
    cluster, policies = files / "cluster.yaml", files / "policies"
    extra: list[str | Path] = ["--policies", policies]
    if bad == "missing-cluster":
        cluster = files / "nope.yaml"
    elif bad == "no-policies":
        extra = []
    elif bad == "broken-policy":
        (policies / "env-prod.yaml").write_text(ENV_PROD.replace("nodeLabels", "nodeLabelz"))
    elif bad == "unknown-field":
        cluster.write_text(NODES + PODS.replace("nodeName", "nodeNam", 1))
    else:
        extra += ["-o", "xml"]
    code, _, err = run(app, "--cluster", cluster, *extra)
    assert code == 2, err


def test_json_shape(app: typer.Typer, files: Path) -> None:
    code, out, _ = run(app, "--cluster", files / "cluster.yaml", "--policies",
                       files / "policies", "-o", "json")
    assert code == 1
    doc = json.loads(out)
    assert set(doc) == {"version", "violations", "policies", "skipped", "labelCase",
                        "devices", "exempted", "summary", "warnings"}
    assert doc["version"] == 1
    assert doc["violations"][0] == {
        "pod": "shop/legacy", "node": "n2", "policy": "env-prod", "plugin": "EnvProd",
        "rule": "prod-nodes-only", "mode": "Enforce",
        "message": "node(s) are not production nodes"}
    assert [(v["pod"], v["mode"]) for v in doc["violations"]] == [
        ("shop/legacy", "Enforce"), ("shop/web-2", "Enforce"), ("data/db", "Audit")]
    assert doc["policies"] == [
        {"policy": "env-prod", "plugin": "EnvProd", "mode": "Enforce", "checked": 3,
         "violating": 2},
        {"policy": "hw-encrypt", "plugin": "HwEncrypt", "mode": "Audit", "checked": 1,
         "violating": 1}]
    assert doc["skipped"] == [{"pod": "shop/ghost", "node": "n9", "kind": "node-missing",
                               "reason": doc["skipped"][0]["reason"]}]
    assert doc["labelCase"] == [] and doc["devices"] == []
    assert doc["summary"] == {"checked": 5, "violatingPods": 3, "violations": 3,
                              "violatedPolicies": 2, "skipped": 1, "labelCase": 0,
                              "devices": 0, "exempted": 0}


# A GPU on n1 tainted NoExecute since its claim was allocated, and a claim whose device
# the driver no longer publishes; the pods hold them whatever the policies say.
DEVICES = """---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec: {selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n1-gpus}
spec:
  driver: gpu.example.com
  nodeName: n1
  pool: {name: n1, generation: 1, resourceSliceCount: 1}
  devices: [{name: g0, taints: [{key: health, value: failed, effect: NoExecute}]}]
""" + "".join(f"""---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: {name}, namespace: ml, uid: {name}-uid}}
spec: {{devices: {{requests: [{{name: gpu, exactly: {{deviceClassName: gpu}}}}]}}}}
status:
  allocation:
    devices: {{results: [{{request: gpu, driver: gpu.example.com, pool: n1,
                          device: {device}}}]}}
  reservedFor: [{{resource: pods, name: {name}, uid: {name}-pod}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: ml, uid: {name}-pod}}
spec:
  nodeName: n1
  resourceClaims: [{{name: gpu, resourceClaimName: {name}}}]
  containers: [{{name: c, image: i}}]
status: {{phase: Running}}
""" for name, device in (("trainer", "g0"), ("orphan", "g7")))


def test_devices_bound_pods_would_not_get_today_are_findings(
        app: typer.Typer, tmp_path: Path, files: Path) -> None:
    cluster = tmp_path / "devices.yaml"
    cluster.write_text(NODES + DEVICES)
    code, out, _ = run(app, "--cluster", cluster, "--policies", files / "policies")
    assert code == 1  # --fail-on any: device findings fail the run
    assert out.splitlines() == [
        "devices bound pods hold that their claims would not get today:",
        "  ml/orphan on n1: claim ml/orphan: device gpu.example.com/n1/g7 is no longer "
        "published in a ResourceSlice",
        "  ml/trainer on n1: claim ml/trainer: device gpu.example.com/n1/g0 has taint "
        "health=failed:NoExecute, which request gpu does not tolerate: the device taint "
        "eviction evicts the pod",
        "no violations; 2 pods checked; 2 pods hold devices they would not get today"]
    code, out, _ = run(app, "--cluster", cluster, "--policies", files / "policies",
                       "-o", "json")
    doc = json.loads(out)
    assert [(f["pod"], f["kind"], f["device"]) for f in doc["devices"]] == [
        ("ml/orphan", "device-gone", "gpu.example.com/n1/g7"),
        ("ml/trainer", "evicting-taint", "gpu.example.com/n1/g0")]
    assert doc["summary"]["devices"] == 2
    # Only Enforce-mode policy violations fail the run with --fail-on enforce.
    code, _, _ = run(app, "--cluster", cluster, "--policies", files / "policies",
                     "--fail-on", "enforce")
    assert code == 0
    code, out, _ = run(app, "--cluster", cluster, "--policies", files / "policies",
                       "-o", "junit")
    suites = {s.get("name"): s for s in ET.fromstring(out).iter("testsuite")}
    assert [f.get("message") for f in suites["devices"].iter("failure")] == [
        "device-gone: claim ml/orphan", "evicting-taint: claim ml/trainer"]


# n3 says `Env` and `HW` where the policies read `env` and `hw`; n4 has both spellings
# of `env` (the policy's own is there: nothing hides it).
CASE_NODES = NODES + """---
apiVersion: v1
kind: Node
metadata: {name: n3, labels: {Env: prod, HW: "true"}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: n4, labels: {Env: prod, env: prod}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
"""


def test_a_node_label_differing_from_a_policys_only_by_case_is_a_finding(
        app: typer.Typer, files: Path) -> None:
    (files / "cluster.yaml").write_text(CASE_NODES + PODS)
    args = ("--cluster", files / "cluster.yaml", "--policies", files / "policies")
    code, out, _ = run(app, *args)
    assert code == 1  # the violations above, not the findings
    lines = out.splitlines()
    at = lines.index("node label keys that differ from a policy's only by case (the "
                     "policy never matches them; not counted as violations):")
    assert lines[at + 1:at + 3] == [
        '  n3: policy env-prod: node has label "Env", policy wants "env"',
        '  n3: policy hw-encrypt: node has label "HW", policy wants "hw"']
    assert not any(line.startswith("  n4:") for line in lines)
    code, out, _ = run(app, *args, "-o", "json")
    doc = json.loads(out)
    assert doc["labelCase"][0] == {
        "node": "n3", "policy": "env-prod", "plugin": "EnvProd", "nodeKey": "Env",
        "policyKey": "env", "message": 'node has label "Env", policy wants "env"'}
    assert doc["summary"]["labelCase"] == 2


def test_label_case_findings_alone_do_not_fail_the_run(app: typer.Typer,
                                                       files: Path) -> None:
    (files / "cluster.yaml").write_text(CASE_NODES)
    code, out, _ = run(app, "--cluster", files / "cluster.yaml", "--policies",
                       files / "policies")
    assert code == 0
    assert '  n3: policy env-prod: node has label "Env", policy wants "env"' in out
    assert out.splitlines()[-1] == "no violations; 0 pods checked"


def test_junit_parses_with_a_suite_per_policy_and_a_failure_per_violation(
        app: typer.Typer, files: Path) -> None:
    code, out, _ = run(app, "--cluster", files / "cluster.yaml", "--policies",
                       files / "policies", "--format", "junit")
    assert code == 1
    root = ET.fromstring(out.encode())
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures")) == ("4", "3")
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {"policy env-prod (Enforce)", "policy hw-encrypt (Audit)"}
    env = suites["policy env-prod (Enforce)"]
    assert (env.get("tests"), env.get("failures")) == ("3", "2")
    cases = {c.get("name"): c.findall("failure") for c in env.iter("testcase")}
    assert set(cases) == {"shop/web-1 on n1", "shop/web-2 on n2", "shop/legacy on n2"}
    assert cases["shop/web-1 on n1"] == []
    [failure] = cases["shop/web-2 on n2"]
    assert failure.get("message") == "rule prod-nodes-only: node(s) are not production nodes"
    assert len(root.findall(".//failure")) == 3


def test_a_profile_audits_its_own_pods_unless_all_schedulers(app: typer.Typer,
                                                             files: Path) -> None:
    base = ("--cluster", files / "cluster.yaml", "--config", files / "profile.yaml",
            "-o", "json")
    code, out, _ = run(app, *base)
    doc = json.loads(out)
    assert code == 1
    assert [v["pod"] for v in doc["violations"]] == ["shop/web-2", "data/db"]
    not_served = {s["pod"] for s in doc["skipped"] if s["kind"] == "not-served"}
    assert not_served == {"default/batch", "shop/legacy"}
    assert doc["summary"]["checked"] == 3
    # The Audit-mode policy is audited from the profile too, with its mode.
    assert {(p["policy"], p["mode"]) for p in doc["policies"]} == {
        ("env-prod", "Enforce"), ("hw-encrypt", "Audit")}
    code, out, _ = run(app, *base, "--all-schedulers")
    doc = json.loads(out)
    assert [v["pod"] for v in doc["violations"]] == ["shop/legacy", "shop/web-2", "data/db"]
    assert [s["kind"] for s in doc["skipped"]] == ["node-missing"]
    assert doc["summary"]["checked"] == 5


def test_the_command_is_registered_and_its_help_says_scores_are_not_audited() -> None:
    r = subprocess.run([sys.executable, "-m", "policyd", "audit", "--help"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "Scores are not audited" in " ".join(r.stdout.split())


def test_every_skip_kind_has_words_in_the_text_summary() -> None:
    from policyd.engine import audit as engine_audit

    kinds = {engine_audit.FINISHED, engine_audit.TERMINATING, engine_audit.NODE_MISSING,
             engine_audit.NOT_SERVED}
    assert set(audit_cmd._SKIP_WORDS) == kinds
    assert set(audit_cmd._LISTED_SKIPS) <= kinds


SCOPED_ENV_PROD = ENV_PROD.replace("  appliesTo:", """\
  mode: Audit
  scopedModes: [{mode: Enforce, namespaces: ["prod-*"]}]
  exceptions:
    - {name: old-web, reason: moving (TICKET-7), expires: "2999-01-01T00:00:00Z",
       rules: [prod-nodes-only], match: {namespaces: [prod-b]}}
    - {name: unused, reason: nothing here, expires: "2999-01-01T00:00:00Z",
       rules: ["*"], match: {namespaces: [gone]}}
  appliesTo:""")


def test_scoped_modes_decide_fail_on_enforce_and_exemptions_are_listed(
        app: typer.Typer, tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(
        NODES + pod("a", "n2", namespace="dev", labels="{tier: prod}")
        + pod("b", "n2", namespace="prod-b", labels="{tier: prod}"))
    (tmp_path / "p.yaml").write_text(SCOPED_ENV_PROD)
    args = ("--cluster", tmp_path / "cluster.yaml", "--policies", tmp_path / "p.yaml")
    # dev/a: an Audit-mode finding (dev is outside prod-*); prod-b/b: exempted.
    code, out, _ = run(app, *args, "--fail-on", "enforce")
    assert code == 0 and "dev/a on n2" in out
    assert "prod-b/b" in out and "old-web" in out and "TICKET-7" in out
    code, out, _ = run(app, *args, "-o", "json")
    doc = json.loads(out)
    assert [(v["pod"], v["mode"]) for v in doc["violations"]] == [("dev/a", "Audit")]
    assert [(e["pod"], e["rule"], e["exception"]) for e in doc["exempted"]] == [
        ("prod-b/b", "prod-nodes-only", "old-web")]
    assert any("unused" in w for w in doc["warnings"])
    code, out, _ = run(app, *args, "-o", "yaml")
    assert "exception: old-web" in out
    code, out, _ = run(app, *args, "-o", "junit")
    root = ET.fromstring(out)
    (skipped,) = root.iter("skipped")
    assert "old-web (moving (TICKET-7); expires 2999-01-01T00:00:00Z)" in skipped.get(
        "message", "")
    assert root.get("skipped") == "1"
