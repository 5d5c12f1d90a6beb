"""Numbers at their limits in a profile (issue 26, class 2): each is refused at its
line:column with upstream's bound, and what passes runs the same on both paths."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from policyd.config import plugins as pl
from policyd.config.loader import validate_config_file
from policyd.config.profile_schema import MAX_BACKOFF_SECONDS
from policyd.model.duration import MAX_DURATION_SECONDS, DurationTooLong, parse_duration
from tests.unit.config.conftest import Check, where

INT32 = "must be less than or equal to 2147483647 (kube-scheduler reads it as an int32)"


def _weight(w: str) -> str:
    return f"""\
        profiles:
          - schedulerName: policyd
            plugins:
              score:
                enabled:
                  - {{name: LowLatency, weight: {w}}}
        """


@pytest.mark.parametrize("weight", ["9223372036854775808", "2147483648", "9.2e16",
                                    "92000000000000000", "1e300", ".inf"])
def test_a_weight_beyond_int32_is_refused_at_its_line(check: Check, weight: str) -> None:
    problems = check(_weight(weight))
    # One problem each (`.inf` is "not an integer", not also out of range).
    assert where(problems) == [(9, 40, "schema" if weight == ".inf" else "out-of-range")]
    if weight != ".inf":
        assert INT32 in problems[0].message


@pytest.mark.parametrize("weight", ["2147483647", "5.0", "1"])
def test_weights_within_int32_pass(check: Check, weight: str) -> None:
    assert check(_weight(weight)) == []


@pytest.mark.parametrize(("body", "expected", "fragment"), [
    ("parallelism: 2147483648\n", [(4, 14, "out-of-range")], INT32),
    ("clientConnection: {burst: 2147483648}\n", [(4, 27, "out-of-range")], INT32),
    ("clientConnection: {qps: 1e39}\n", [(4, 25, "out-of-range")], "float32"),
    ("clientConnection: {qps: .nan}\n", [(4, 25, "out-of-range")],
     "Invalid value: .nan: not a finite number"),
    ("clientConnection: {qps: -.inf}\n", [(4, 25, "out-of-range")], "float32"),
    (f"podInitialBackoffSeconds: {MAX_BACKOFF_SECONDS + 1}\npodMaxBackoffSeconds: "
     f"{MAX_BACKOFF_SECONDS + 1}\n", [(4, 27, "out-of-range"), (5, 23, "out-of-range")],
     "9223372036 (the most whole seconds a Go time.Duration holds)"),
    ("podMaxBackoffSeconds: 99999999999999999999999\n", [(4, 23, "out-of-range")],
     "Invalid value: 99999999999999999999999"),
    ("clientConnection: {timeout: 2562048h}\n", [(4, 29, "client-connection")],
     "longer than 2562047h47m16.854775807s"),
    ("leaderElection: {leaseDuration: 9999999999999s}\n", [(4, 33, "leader-election")],
     "the longest a Go time.Duration (int64 nanoseconds) holds"),
    ("metricsProviders:\n  - {name: p, kind: probe, metric: m, port: 80, "
     "refreshInterval: 3000000h}\n", [(5, 66, "metrics-provider")], "longer than"),
])
def test_settings_beyond_upstream_types_are_refused(check: Check, body: str,
                                                    expected: list[tuple[int, int, str]],
                                                    fragment: str) -> None:
    problems = check(body)
    assert where(problems) == expected, [str(p) for p in problems]
    assert fragment in problems[0].message


def test_the_largest_values_upstream_takes_pass(check: Check) -> None:
    assert check(f"""\
        parallelism: 2147483647
        podInitialBackoffSeconds: {MAX_BACKOFF_SECONDS}
        podMaxBackoffSeconds: {MAX_BACKOFF_SECONDS}
        clientConnection: {{burst: 2147483647, qps: 3.4e38, timeout: 2562047h}}
        """) == []


@pytest.mark.parametrize(("args", "at", "fragment"), [
    ("{defaultingType: List, defaultConstraints: [{maxSkew: 2147483648, topologyKey: "
     "zone, whenUnsatisfiable: ScheduleAnyway}]}", "args.defaultConstraints[0].maxSkew",
     "2147483648 does not fit a 32-bit integer"),
    ("{defaultingType: List, defaultConstraints: [{maxSkew: 1, minDomains: 2147483648, "
     "topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]}",
     "args.defaultConstraints[0].minDomains", "does not fit a 32-bit integer"),
    ("{bindTimeoutSeconds: 9223372036854775808}", "args.bindTimeoutSeconds",
     "9223372036854775808 does not fit a 64-bit integer"),
    ("{minCandidateNodesAbsolute: 2147483648}", "args.minCandidateNodesAbsolute",
     "does not fit a 32-bit integer"),
    ("{filterTimeout: 2562048h}", "args.filterTimeout", "longer than 2562047h47m16"),
])
def test_plugin_args_beyond_upstream_types_are_refused(check: Check, args: str, at: str,
                                                       fragment: str) -> None:
    plugin = {"bindTimeoutSeconds": "VolumeBinding", "minCandidateNodesAbsolute":
              "DefaultPreemption", "filterTimeout": "DynamicResources"}.get(
                  at.split(".")[1], "PodTopologySpread")
    problems = check(f"""\
        profiles:
          - pluginConfig:
              - name: {plugin}
                args: {args}
        """)
    assert [(p.rule, p.path) for p in problems] == [
        ("plugin-args", f"profiles[0].pluginConfig[0].{at}")], [str(p) for p in problems]
    assert problems[0].line == 7
    assert fragment in problems[0].message


def test_total_score_overflow_is_refused_as_upstream_does() -> None:
    # The schema keeps each weight within int32, so only a profile that was not
    # validated reaches getScoreWeights' check: 2^63 / 100 is the most one plugin takes.
    limit = (2**63 - 1) // 100  # the most all weights may add up to
    problems: list[tuple[tuple[str | int, ...], str, str]] = []
    profile: dict[str, Any] = {"plugins": {"score": {"enabled": [
        {"name": "ImageLocality", "weight": limit},
        {"name": "TaintToleration", "weight": 1}]}}}
    pl.resolve_profile(profile, path=("profiles", 0),
                       report=lambda *p: problems.append(p))
    # ImageLocality alone takes all of MaxTotalScore: the next plugin overflows, and is
    # the one named.
    [(at, rule, message)] = problems
    assert at == ("profiles", 0, "plugins", "score", "enabled", 1, "weight")
    assert rule == "out-of-range"
    assert message.startswith("Invalid value: 1: total score of Score plugins could "
                              "overflow")
    assert "9223372036854775807, MaxTotalScore" in message
    problems.clear()
    profile["plugins"]["score"]["enabled"][0]["weight"] = limit - 1000  # room for all
    pl.resolve_profile(profile, path=(), report=lambda *p: problems.append(p))
    assert problems == []


def test_go_durations_end_at_int64_nanoseconds() -> None:
    assert parse_duration("2562047h") == 2562047 * 3600.0
    assert parse_duration("-2562047h") == -2562047 * 3600.0
    with pytest.raises(DurationTooLong):
        parse_duration("2562048h")
    with pytest.raises(DurationTooLong):
        parse_duration("9223372037s")
    assert pytest.approx(9223372036.854775807) == MAX_DURATION_SECONDS
    assert MAX_BACKOFF_SECONDS == 9223372036


CLUSTER = """\
apiVersion: v1
kind: Node
metadata: {name: n1, annotations: {myorg.io/latency-ms: "5"}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, annotations: {myorg.io/latency-ms: "50"}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default, labels: {myorg.io/latency-sensitive: "true"}}
spec: {schedulerName: policyd, containers: [{name: c, image: x}]}
"""


@pytest.mark.parametrize("weight", ["9223372036854775808", "2147483648", "9.2e16"])
def test_simulate_and_explain_refuse_the_profile_with_exit_2(
        tmp_path: Path, policy_dir: Path, weight: str) -> None:
    (tmp_path / "profile.yaml").write_text(
        "apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\npolicies: [pol]\n"
        + textwrap.dedent(_weight(weight)))
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    for command in (["simulate"], ["explain", "web"]):
        r = subprocess.run([sys.executable, "-m", "policyd", *command, "--cluster",
                            "cluster.yaml", "--config", "profile.yaml"],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "profile.yaml:9:" in r.stderr and INT32 in r.stderr
        assert "internal error" not in r.stderr


def test_the_largest_weight_gives_one_node_on_both_paths(tmp_path: Path,
                                                        policy_dir: Path) -> None:
    """At int32's largest weight the weighted sums stay within int64: the columnar
    (simulate's) and the reference (explain's) paths choose the same node."""
    from policyd.engine.cycle import schedule_one
    from policyd.model.cluster_files import load_snapshot

    path = tmp_path / "profile.yaml"
    path.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
                    "policies: [pol]\n" + textwrap.dedent(_weight("2147483647")))
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    _, frameworks, problems = validate_config_file(path)
    assert problems == []
    [fw] = frameworks.values()
    snap = load_snapshot(tmp_path / "cluster.yaml")
    [pod] = [p for p in snap.pods if p.name == "web"]
    fast = schedule_one(fw, pod, snap.cluster())
    reference = schedule_one(fw, pod, snap.cluster(), reference=True)
    assert fast.node == reference.node == "n1"
