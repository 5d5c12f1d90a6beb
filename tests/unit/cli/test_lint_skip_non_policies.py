"""`policyd lint --skip-non-policies`: in a repository where policies sit beside
manifests, kustomizations and CI files, lint only the policies — and still report a
broken policy, a misspelt policyd kind, and files that are not YAML at all."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from policyd.cli.app import register_commands
from policyd.lint.runner import lint_paths

POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: good}
spec:
  pluginName: Good
  filters:
    - {id: r, message: m, nodeLabels: {matchLabels: {env: prod}}}
"""
BROKEN_POLICY = POLICY.replace("pluginName: Good", "pluginName: good")  # not PascalCase

NOT_POLICIES = {
    "deployment": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
                  "---\napiVersion: v1\nkind: Service\nmetadata: {name: web}\n",
    "kustomization": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                     "resources: [deployment.yaml]\n",
    "workflow": "name: ci\non: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n"
                "    steps: [{run: make test}]\n",
    "compose-merge-keys": "x-base: &base\n  image: nginx\nservices:\n  web:\n    <<: *base\n",
    "duplicate-key": "apiVersion: v1\nkind: ConfigMap\ndata: {a: 1}\ndata: {b: 2}\n",
    "list": "- one\n- two\n",
    "scalar": "just text\n",
    "comments-only": "# values for this chart live elsewhere\n",
    "profile": "apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\nprofiles: []\n",
    "policy-test": "apiVersion: policyd.io/v1alpha1\nkind: PolicyTest\nmetadata: {name: t}\n",
}


def _lint(tmp_path: Path, files: dict[str, str], *, skip: bool) -> list[tuple[str, str]]:
    for name, text in files.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    result = lint_paths([tmp_path], skip_non_policies=skip)
    assert not result.bad_paths
    return [(Path(p.file).stem, p.rule) for p in result.report.problems]


@pytest.mark.parametrize("name", sorted(NOT_POLICIES))
def test_other_documents_are_skipped(tmp_path: Path, name: str) -> None:
    assert _lint(tmp_path, {name: NOT_POLICIES[name], "good": POLICY}, skip=True) == []


@pytest.mark.parametrize("name", sorted(set(NOT_POLICIES) - {"profile", "policy-test"}))
def test_without_the_flag_they_are_reported(tmp_path: Path, name: str) -> None:
    assert _lint(tmp_path, {name: NOT_POLICIES[name]}, skip=False) != []


@pytest.mark.parametrize(("files", "expected"), [
    pytest.param({"bad": BROKEN_POLICY, **NOT_POLICIES}, [("bad", "schema")],
                 id="broken-policy-among-manifests"),
    pytest.param({"mixed": NOT_POLICIES["deployment"] + "---\n" + BROKEN_POLICY},
                 [("mixed", "schema")], id="broken-policy-after-a-manifest"),
    pytest.param({"typo": POLICY.replace("kind: SchedulingPolicy", "kind: SchedulingPolcy")},
                 [("typo", "not-a-policy")], id="misspelt-kind-in-policyd-group"),
    pytest.param({"dup": POLICY + "metadata: {name: again}\n"},
                 [("dup", "yaml-duplicate-key")], id="duplicate-key-in-a-policy"),
    pytest.param({"helm": "metadata:\n  name: {{ .Values.name }}\n"},
                 [("helm", "yaml-complex-key")], id="helm-template"),
    pytest.param({"broken": "key: [unclosed\n"}, [("broken", "yaml-syntax")],
                 id="yaml-syntax-error"),
])
def test_policies_and_unreadable_yaml_are_still_checked(
        tmp_path: Path, files: dict[str, str], expected: list[tuple[str, str]]) -> None:
    assert _lint(tmp_path, files, skip=True) == expected


def test_cli_flag_and_exit_codes(tmp_path: Path) -> None:
    app = register_commands()
    for name, text in NOT_POLICIES.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    (tmp_path / "good.yaml").write_text(POLICY)
    runner = CliRunner()
    plain = runner.invoke(app, ["lint", str(tmp_path)])
    assert plain.exit_code == 1 and "not-a-policy" in plain.output
    skipping = runner.invoke(app, ["lint", "--skip-non-policies", str(tmp_path)])
    assert skipping.exit_code == 0, skipping.output
    (tmp_path / "bad.yaml").write_text(BROKEN_POLICY)
    failing = runner.invoke(app, ["lint", "--skip-non-policies", "--format", "json",
                                  str(tmp_path)])
    assert failing.exit_code == 1
    assert "bad.yaml" in failing.output and "deployment.yaml" not in failing.output


def test_help_documents_the_flag() -> None:
    out = CliRunner().invoke(register_commands(), ["lint", "--help"],
                             terminal_width=80).output
    assert "--skip-non-policies" in out and "not-a-policy" in out
