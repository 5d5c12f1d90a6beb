"""The lint run (every problem in one pass, exit codes) and each reporter's format."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from policyd.cli import lint_cmd
from policyd.lint.reporters import REPORTERS, Report, get_reporter
from policyd.lint.runner import lint_paths
from policyd.problems import Problem

ROOT = Path(__file__).resolve().parents[3]

GOOD = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: good
spec:
  pluginName: Good
  filters:
    - id: r
      message: m
      nodeLabels:
        matchLabels: {env: prod}
"""

BAD = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: bad
spec:
  pluginName: bad
  filters:
    - id: r
      message: m
      nodeLabels:
        matchLabels: {Env: prod}
      extra: 1
"""


def write(tmp: Path, name: str, text: str | bytes) -> Path:
    p = tmp / name
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    return p


def test_examples_are_clean() -> None:
    result = lint_paths([ROOT / "policies"], strict=True)
    assert result.report.problems == []
    assert result.exit_code == 0
    assert result.report.files >= 8


def test_every_problem_of_every_file_in_one_run(tmp_path: Path) -> None:
    write(tmp_path, "a/good.yaml", GOOD)
    write(tmp_path, "a/b/bad.yml", BAD)
    write(tmp_path, "a/broken.yaml", "a: [1\n")
    write(tmp_path, "a/.hidden/x.yaml", "not: scanned\n")
    write(tmp_path, "a/notes.txt", "ignored")
    result = lint_paths([tmp_path / "a"])
    got = [(Path(p.file).name, p.line, p.column, p.rule, p.level)
           for p in result.report.problems]
    assert got == [
        ("bad.yml", 6, 15, "schema", "error"),
        ("bad.yml", 11, 23, "key-case", "warning"),
        ("bad.yml", 12, 7, "schema", "error"),
        ("broken.yaml", 2, 1, "yaml-syntax", "error"),
        ("good.yaml", 11, 23, "key-case", "warning"),
    ]
    assert result.report.files == 3
    assert result.exit_code == 1


def test_warnings_fail_only_with_strict(tmp_path: Path) -> None:
    p = write(tmp_path, "w.yaml", GOOD.replace("{env: prod}", "{Kubernetes.io/os: linux}")
              .replace("Kubernetes.io", "kubernetes.io").replace("/os", "/OS"))
    assert [x.rule for x in lint_paths([p]).report.problems] == ["key-case"]
    assert lint_paths([p]).exit_code == 0
    assert lint_paths([p], strict=True).exit_code == 1


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    good = write(tmp_path, "good.yaml", GOOD)
    result = lint_paths([good, tmp_path / "nope.yaml"])
    assert result.exit_code == 2
    assert result.bad_paths == [f"{tmp_path / 'nope.yaml'}: no such file or directory"]


def test_directory_without_yaml_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert lint_paths([tmp_path / "empty"]).exit_code == 2


def test_unreadable_file_is_a_usage_error(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    p = write(tmp_path, "secret.yaml", GOOD)
    real_open = os.open

    def deny(path: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(path).name == "secret.yaml":
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)

    # Permissions do not stop root (CI containers), so simulate the failure (every file
    # is opened by policyd.model.bounded_read, with os.open).
    monkeypatch.setattr(os, "open", deny)
    result = lint_paths([p, write(tmp_path, "good.yaml", GOOD)])
    assert result.exit_code == 2
    assert result.bad_paths == [f"{p}: cannot read file: Permission denied"]
    assert [x.rule for x in result.report.problems] == ["file-unreadable"]


def test_same_file_twice_is_linted_once(tmp_path: Path) -> None:
    p = write(tmp_path, "good.yaml", GOOD)
    result = lint_paths([p, tmp_path])
    assert result.report.files == 1 and result.report.problems == []


PROBLEMS = [
    Problem("a.yaml", 3, 5, "schema", "error", "unknown field 'x'", "spec.x"),
    Problem("a.yaml", 9, 7, "jmespath", "error", "invalid JMESPath: incomplete expression",
            "spec.filters[0].jmespath", ("a.[b", "    ^")),
    Problem("dir/b,c.yaml", 2, 1, "key-case", "warning", "50% of: keys\nsecond line", "x"),
    Problem("d.yaml", 0, 0, "file-unreadable", "error", "cannot read file"),
]


def test_reporters_are_found_by_name() -> None:
    assert REPORTERS, "no lint reporters registered"
    for name in REPORTERS:
        assert get_reporter(name)(Report([], 1)), name
    with pytest.raises(KeyError):
        get_reporter("xml")


def _lint_cli(*args: str) -> tuple[int, str, str]:
    app = typer.Typer()
    app.command("lint")(lint_cmd.lint)

    @app.callback()
    def _root() -> None:
        """A group, so that the command is invoked by name as in policyd."""

    result = CliRunner().invoke(app, ["lint", *args], env={"GITHUB_ACTIONS": ""})
    return result.exit_code, result.stdout, result.output


@pytest.mark.parametrize("name", sorted(REPORTERS))
def test_lint_format_is_each_registered_reporter(name: str, tmp_path: Path) -> None:
    # `--format NAME` prints exactly what the registry's reporter renders, and --help
    # names it: the choice is the registry, not a list beside it.
    path = write(tmp_path, "bad.yaml", BAD)
    code, out, _ = _lint_cli("--format", name, str(path))
    assert code == 1
    assert out == get_reporter(name)(lint_paths([str(path)]).report)
    assert name in _lint_cli("--help")[1]


def test_lint_format_follows_the_registry(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    path = write(tmp_path, "good.yaml", GOOD)
    # junit_xml is a reporter module (policyd test and audit use it), not a lint format.
    code, _, output = _lint_cli("--format", "junit", str(path))
    assert code == 2
    assert f"'junit' is not one of {', '.join(REPORTERS)}" in output
    monkeypatch.setitem(REPORTERS, "junit", "policyd.lint.reporters.text")
    assert _lint_cli("--format", "junit", str(path))[:2] == (
        0, "1 file checked, no problems\n")


def test_text_reporter() -> None:
    out = get_reporter("text")(Report(PROBLEMS, 4))
    lines = out.splitlines()
    assert lines[0] == "a.yaml:3:5: error: unknown field 'x' [schema] (at spec.x)"
    assert lines[2:4] == ["    a.[b", "        ^"]
    assert lines[-2] == "d.yaml: error: cannot read file [file-unreadable]"
    assert lines[-1] == "3 error(s), 1 warning(s) in 4 files"
    assert get_reporter("text")(Report([], 1)) == "1 file checked, no problems\n"


def test_json_reporter() -> None:
    doc = json.loads(get_reporter("json")(Report(PROBLEMS, 4, strict=True)))
    assert doc["summary"] == {"files": 4, "errors": 3, "warnings": 1, "strict": True,
                              "failed": True}
    assert doc["problems"][0] == {"file": "a.yaml", "line": 3, "column": 5,
                                  "path": "spec.x", "rule": "schema", "level": "error",
                                  "message": "unknown field 'x'"}
    assert doc["problems"][1]["detail"] == ["a.[b", "    ^"]


def test_github_reporter_escapes() -> None:
    lines = get_reporter("github")(Report(PROBLEMS, 4)).splitlines()
    assert lines[0] == ("::error file=a.yaml,line=3,col=5,title=policyd lint (schema)::"
                        "unknown field 'x' (at spec.x)")
    assert lines[1].endswith("(at spec.filters[0].jmespath)%0Aa.[b%0A    ^")
    assert lines[2] == ("::warning file=dir/b%2Cc.yaml,line=2,col=1,title=policyd lint "
                        "(key-case)::50%25 of: keys%0Asecond line (at x)")
    assert lines[3] == ("::error file=d.yaml,title=policyd lint (file-unreadable)::"
                        "cannot read file")


def test_sarif_reporter() -> None:
    doc = json.loads(get_reporter("sarif")(Report(PROBLEMS, 4)))
    assert doc["version"] == "2.1.0"
    run = doc["runs"][0]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert rules == sorted({p.rule for p in PROBLEMS})
    first = run["results"][0]
    assert first["ruleId"] == "schema" and first["level"] == "error"
    assert rules[first["ruleIndex"]] == "schema"
    assert first["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "a.yaml"}, "region": {"startLine": 3, "startColumn": 5}}
    assert "region" not in run["results"][3]["locations"][0]["physicalLocation"]


# --- no input crashes lint: mutated policies -------------------------------------

EXAMPLE_TEXTS = [p.read_text() for p in sorted((ROOT / "policies").glob("*.yaml"))]


def _mutate(text: str, rng: random.Random, n: int) -> str:
    chars = list(text)
    for _ in range(n):
        op = rng.randrange(5)
        i = rng.randrange(len(chars) + 1)
        if op == 0 and chars:
            del chars[min(i, len(chars) - 1)]
        elif op == 1:
            chars.insert(i, rng.choice(list(":-[]{}&*!|>'\"#\t \n0aZ/.~%@`\x00\xe9")))
        elif op == 2 and chars:
            j = rng.randrange(len(chars))
            chars[min(i, len(chars) - 1)], chars[j] = chars[j], chars[min(i, len(chars) - 1)]
        elif op == 3:
            line_start = text.rfind("\n", 0, i) + 1
            chars[line_start:line_start] = list(rng.choice(["  ", "- ", "? ", "\t"]))
        else:
            chars[i:i] = list(rng.choice(["yes", "null", "1e9", "*a", "&a", "<<: {}",
                                          "[[[[", "!!python/object:x", "Env", "Gt"]))
    return "".join(chars)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(EXAMPLE_TEXTS), st.integers(0, 2**32 - 1), st.integers(1, 12))
def test_mutated_policies_never_crash_lint(tmp_path_factory: Any, text: str, seed: int,
                                           n: int) -> None:
    mutated = _mutate(text, random.Random(seed), n)
    path = tmp_path_factory.mktemp("fuzz") / "p.yaml"
    path.write_bytes(mutated.encode("utf-8", "surrogatepass"))
    result = lint_paths([path])
    assert result.exit_code in (0, 1)
    for p in result.report.problems:
        assert p.file == str(path)
        assert p.line >= 1 and p.column >= 1


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 200) | st.floats(allow_nan=False) |
    st.sampled_from(["", "x", "In", "Gt", "prod", "1Gi", "foo.[", "`1`", "env", "-1"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(
        st.sampled_from(["id", "message", "key", "operator", "values", "matchLabels",
                         "matchExpressions", "nodeLabels", "headroom", "resource",
                         "quantity", "percent", "weight", "normalize", "labelValue",
                         "label", "values", "numeric", "allocation", "strategy",
                         "resources", "jmespath", "annotationToNodeLabel", "annotation",
                         "useAnnotationValue", "maxPodsPerNode", "namespaces",
                         "include", "condition", "labelSelector"]), children, max_size=4),
    max_leaves=20)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(JSONISH, max_size=3), st.lists(JSONISH, max_size=3), JSONISH)
def test_structurally_random_specs_never_crash(filters: list[Any], scores: list[Any],
                                              applies: Any) -> None:
    from tests.unit.policy.conftest import check_docs, make_policy

    doc = make_policy(filters=filters, scores=scores, appliesTo=applies)
    result = check_docs(doc)  # must not raise; valid ones compile
    if not any(p.level == "error" for p in result.problems):
        assert len(result.compiled) == 1


def test_case_trap_fixture_warns_as_documented() -> None:
    result = lint_paths([ROOT / "policies" / "env-prod.yaml",
                         Path(__file__).parent / "fixtures" / "case-trap.yaml"])
    got = [(Path(p.file).name, p.line, p.column, p.rule, p.level)
           for p in result.report.problems]
    assert got == [
        ("env-prod.yaml", 16, 9, "key-case", "warning"),
        ("case-trap.yaml", 9, 21, "key-case", "warning"),
        ("case-trap.yaml", 14, 34, "key-case", "warning"),
    ]
    assert result.exit_code == 0
    assert lint_paths([Path(__file__).parent / "fixtures"], strict=True).exit_code == 1


MIXED = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: mixed
spec:
  pluginName: Mixed
  filters:
    - id: prod
      message: not prod
      nodeLabels: {matchLabels: {env: prod}}
    - id: room
      message: full
      headroom: {resource: cpu, percent: 20}
    - id: gpu
      message: no gpu
      requireExtendedResource: {name: example.com/gpu}
---
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: watched
spec:
  pluginName: Watched
  mode: Audit
  filters:
    - id: room
      message: full
      headroom: {resource: cpu, percent: 20}
"""


def test_require_autoscaler_visible_makes_each_invisible_rule_an_error(tmp_path: Path
                                                                       ) -> None:
    path = tmp_path / "mixed.yaml"
    path.write_text(MIXED)
    assert lint_paths([path]).exit_code == 0  # without the option: nothing to say
    result = lint_paths([path], require_autoscaler_visible=True)
    assert result.exit_code == 1
    found = [(p.rule, p.line, p.message) for p in result.report.problems]
    # The Enforce-mode policy's headroom and extended-resource rules, at each rule;
    # the node label rule is projected, the Audit-mode policy filters nothing.
    assert found == [
        ("autoscaler-invisible", 11, "filter rule 'room' (headroom) is not visible to "
         "cluster-autoscaler or Karpenter: no kube-scheduler constraint expresses it"),
        ("autoscaler-invisible", 14, "filter rule 'gpu' (requireExtendedResource) is not "
         "visible to cluster-autoscaler or Karpenter: only when the pod requests the "
         "resource itself")]
