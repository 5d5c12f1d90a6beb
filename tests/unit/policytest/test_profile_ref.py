"""spec.profile: whole-scheduler cases run the named profile of a PolicydConfiguration
(its plugin set, weights and scoring strategy), the test's policy files join it, and a
profile that cannot run is reported where its problems are."""

from __future__ import annotations

from pathlib import Path

import pytest

from policyd.policytest.render import render
from policyd.policytest.run_tests import RunResult, run_tests

PROFILE = """\
apiVersion: policyd.io/v1alpha1
kind: PolicydConfiguration
policies: [policies]
profiles:
  - schedulerName: packer
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy: {type: MostAllocated}
  - schedulerName: spreader
  - schedulerName: zoned
    plugins:
      score:
        enabled: [{name: PreferZone, weight: 100}]
"""

# Prefers zone b; at its spec.weight of 1 the default spread wins, at the profile's 100
# it decides.
ZONE_POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: prefer-zone}
spec:
  pluginName: PreferZone
  weight: 1
  scores:
    - id: zone-b
      weight: 1
      labelValue: {label: zone, values: {b: 20}, default: 0}
      normalize: none
"""

# busy already runs 3 of its 4 CPUs (and memory in proportion, so that
# NodeResourcesBalancedAllocation is even everywhere): MostAllocated packs onto it, the
# default LeastAllocated spreads onto idle; far, half full, is in zone b.
NODES_AND_PODS = """\
  nodes:
    - {name: busy, labels: {zone: a}}
    - {name: idle, labels: {zone: a}}
    - {name: far, labels: {zone: b}}
  pods:
    - {name: load, nodeName: busy, requests: {cpu: "3", memory: 12Gi}}
    - {name: far-load, nodeName: far, requests: {cpu: 1500m, memory: 6Gi}}
    - {name: web, requests: {cpu: 500m, memory: 2Gi}}
"""


def suite(spec: str, tests: str, name: str = "t") -> str:
    return (f"apiVersion: policyd.io/v1alpha1\nkind: PolicyTest\nmetadata: {{name: {name}}}\n"
            f"spec:\n{spec}{NODES_AND_PODS}  tests:\n{tests}")


def run(tmp_path: Path, *docs: str) -> RunResult:
    (tmp_path / "policies").mkdir(exist_ok=True)
    (tmp_path / "policies" / "zone.yaml").write_text(ZONE_POLICY)
    (tmp_path / "profile.yaml").write_text(PROFILE)
    test = tmp_path / "t.yaml"
    test.write_text("---\n".join(docs))
    return run_tests([test])


def case(to: str) -> str:
    return f"    - {{name: placed, pod: web, scheduledTo: {to}}}\n"


@pytest.mark.parametrize(("scheduler", "node"), [
    ("packer", "busy"), ("spreader", "idle"), ("zoned", "far")])
def test_each_profile_places_the_pod_as_its_plugins_and_weights_say(
        tmp_path: Path, scheduler: str, node: str) -> None:
    others = {"busy", "idle", "far"} - {node}
    result = run(tmp_path,
                 suite(f"  profile: {{file: profile.yaml, schedulerName: {scheduler}}}\n",
                       case(node)),
                 *(suite(f"  profile: {{file: profile.yaml, schedulerName: {scheduler}}}\n",
                         case(o), name=f"not-{o}") for o in sorted(others)))
    assert result.problems == []
    assert [(c.suite.split("::")[1], c.passed) for c in result.cases] == [
        ("t", True), *((f"not-{o}", False) for o in sorted(others))]


def test_without_a_profile_the_default_one_runs(tmp_path: Path) -> None:
    # The same policy at its own weight (1) under the default profile: spread wins.
    result = run(tmp_path, suite("  policies: [policies/zone.yaml]\n", case("idle")))
    assert result.problems == [] and [c.passed for c in result.cases] == [True]


def test_per_policy_expectations_reach_the_profiles_policies(tmp_path: Path) -> None:
    tests = ("    - name: zone b scores\n      pod: web\n      policies:\n"
             "        PreferZone: {scores: {far: 20, busy: 0, idle: 0}}\n")
    result = run(tmp_path, suite("  profile: {file: profile.yaml, schedulerName: zoned}\n",
                                 tests))
    assert result.problems == [] and [c.passed for c in result.cases] == [True]


def test_the_tests_policy_files_join_the_profile(tmp_path: Path) -> None:
    (tmp_path / "extra.yaml").write_text(ZONE_POLICY.replace("prefer-zone", "avoid-b")
                                         .replace("PreferZone", "AvoidB")
                                         .replace("{b: 20}", "{a: 100}"))
    tests = ("    - name: joined\n      pod: web\n      policies:\n"
             "        AvoidB: {scores: {far: 0}}\n")
    result = run(tmp_path, suite("  profile: {file: profile.yaml, schedulerName: packer}\n"
                                 "  policies: [extra.yaml]\n", tests))
    assert result.problems == [] and [c.passed for c in result.cases] == [True]


def problems(result: RunResult) -> list[tuple[str, int, str]]:
    return [(Path(p.file).name, p.line, p.rule) for p in result.problems]


def test_a_broken_profile_is_reported_at_its_own_lines(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
                   "profiles:\n  - schedulerName: x\n    plugins:\n      score:\n"
                   "        enabled: [{name: NoSuchPlugin}]\n")
    result = run(tmp_path, suite("  profile: {file: bad.yaml}\n", case("busy")))
    assert problems(result) == [("bad.yaml", 7, "plugin-unknown"),
                                ("t.yaml", 5, "profile-ref")]
    assert result.cases == [] and result.bad_input and result.refused == 1
    assert render(result, "text").startswith("no tests run: 1 ")


@pytest.mark.parametrize(("ref", "said"), [
    ("{file: nowhere.yaml}", "nowhere.yaml': No such file or directory"),
    ("{file: /dev/null}", "not a regular file"),
    ('{file: "a\\0b"}', "contains a NUL character"),
    ("{file: " + "x" * 3000 + "}", "File name too long"),
    ("{file: policies}", "is a directory"),
    ("{file: profile.yaml}", "name one with schedulerName: profile.yaml has 'packer', "
                             "'spreader', 'zoned'"),
    ("{file: profile.yaml, schedulerName: nope}", "no profile has schedulerName 'nope'"),
])
def test_a_profile_that_cannot_run_says_why_once(tmp_path: Path, ref: str, said: str
                                                 ) -> None:
    tests = ("    - name: x\n      pod: web\n      scheduledTo: busy\n      policies:\n"
             "        PreferZone: {pass: [busy]}\n")
    result = run(tmp_path, suite(f"  profile: {ref}\n", tests))
    # One problem: not the policy or node names the cases use as well.
    assert [p.rule for p in result.problems] == ["profile-ref"]
    assert said in result.problems[0].message
    assert result.bad_input and result.cases == []


INLINE = """\
    - apiVersion: policyd.io/v1alpha1
      kind: SchedulingPolicy
      metadata: {name: inline}
      spec:
        pluginName: NotBusy
        filters:
          - {id: not-busy, message: busy node, nodeLabels: {matchExpressions: [
              {key: kubernetes.io/hostname, operator: NotIn, values: [busy]}]}}
"""


def test_an_inline_policy_joins_the_profile(tmp_path: Path) -> None:
    # The packer would take busy; the inline filter, enabled in the profile, forbids it.
    spec = "  profile: {file: profile.yaml, schedulerName: packer}\n  policies:\n" + INLINE
    tests = ("    - name: joined\n      pod: web\n      scheduledTo: far\n      policies:\n"
             "        NotBusy: {fail: {busy: busy node}, pass: [idle, far]}\n")
    result = run(tmp_path, suite(spec, tests))
    assert result.problems == [] and [c.passed for c in result.cases] == [True]


def test_an_inline_policy_with_a_profile_policys_name_is_refused(tmp_path: Path) -> None:
    spec = ("  profile: {file: profile.yaml, schedulerName: packer}\n  policies:\n"
            + INLINE.replace("NotBusy", "PreferZone"))
    result = run(tmp_path, suite(spec, case("busy")))
    assert [(p.line, p.rule) for p in result.problems] == [(11, "duplicate-name")]
    assert "zone.yaml, which the profile loads" in result.problems[0].message


def test_config_runs_the_profile_for_tests_that_name_none(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "zone.yaml").write_text(ZONE_POLICY)
    (tmp_path / "profile.yaml").write_text(PROFILE)
    test = tmp_path / "t.yaml"
    own = "  profile: {file: profile.yaml, schedulerName: spreader}\n"
    test.write_text(suite("  policies: [policies/zone.yaml]\n", case("busy"), name="cli")
                    + "---\n" + suite(own, case("idle"), name="own"))
    ref = {"file": str(tmp_path / "profile.yaml"), "schedulerName": "packer"}
    result = run_tests([test], profile=ref)  # type: ignore[arg-type]
    assert result.problems == []
    assert [(c.suite.split("::")[1], c.passed) for c in result.cases] == [
        ("cli", True), ("own", True)]
    result = run_tests([test], profile={"file": str(tmp_path / "profile.yaml")})
    assert [(p.line, p.column, p.rule) for p in result.problems] == [(1, 1, "profile-ref")]
    assert result.problems[0].message.startswith("--config: name one with schedulerName")


def test_the_config_option(tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from policyd.cli import test_cmd

    app = typer.Typer()
    app.command("test")(test_cmd.test)
    app.callback()(lambda: None)
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "zone.yaml").write_text(ZONE_POLICY)
    (tmp_path / "profile.yaml").write_text(PROFILE)
    test = tmp_path / "t.yaml"
    test.write_text(suite("  policies: [policies/zone.yaml]\n", case("far")))

    def invoke(*args: str) -> tuple[int, str]:
        # Wide enough that click's error box never folds the temporary path (longer
        # under pytest-xdist's per-worker directories).
        r = CliRunner().invoke(app, ["test", str(test), *args], env={"COLUMNS": "1000"})
        return r.exit_code, r.stdout + r.stderr

    assert invoke("--config", str(tmp_path / "profile.yaml"), "--scheduler-name",
                  "zoned") == (0, f"PASS {test}::t :: placed\n1 passed, 0 failed\n")
    code, out = invoke("--config", str(tmp_path / "profile.yaml"), "--scheduler-name",
                       "packer")
    assert code == 1 and "expected the pod on far, but it was scheduled to busy" in out
    code, out = invoke("--scheduler-name", "zoned")
    assert code == 2 and "needs --config" in out
    code, out = invoke("--config", str(tmp_path / "nope.yaml"))
    assert code == 2 and "nope.yaml': No such" in out
    code, out = invoke("--config", "/dev/null")
    assert code == 2 and "not a regular file" in out


def test_the_example_profiles_test_passes() -> None:
    # examples/profiles/tests/ tests the example profile as it ships.
    root = Path(__file__).resolve().parents[3]
    result = run_tests([root / "examples" / "profiles" / "tests"])
    assert result.problems == []
    assert [(c.name, c.passed) for c in result.cases] == [
        ("the profile packs onto the fuller node (the default profile would spread)", True),
        ("but not past a policy's filter", True)]
