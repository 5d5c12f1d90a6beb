"""`policyd check-config`: exit codes, the lint formats, no cluster, no Kubernetes client,
and `explain`/`simulate --config` going through the same validation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from policyd.cli.check_config_cmd import check_config

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "profiles" / "policyd.yaml"
BROKEN = ROOT / "tests" / "unit" / "config" / "profiles" / "broken.yaml"
BAD_YAML = ROOT / "tests" / "unit" / "config" / "profiles" / "bad-yaml.yaml"

# Every mistake in broken.yaml, in file order.
BROKEN_PROBLEMS = [
    (6, 27, "out-of-range"),
    (8, 23, "backoff"),
    (14, 19, "plugin-unknown"),
    (15, 19, "extension-point"),
    (18, 9, "plugin-config-duplicate"),
    (20, 39, "plugin-args"),
    (21, 20, "duplicate-scheduler-name"),
    (26, 15, "plugin-config-unused"),
    (28, 5, "schema"),
]


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command()(check_config)
    return app


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(_app(), list(args), env={"GITHUB_ACTIONS": ""})
    return result.exit_code, result.stdout


def test_valid_profile_exits_0() -> None:
    code, out = invoke(str(EXAMPLE))
    assert code == 0
    assert out.endswith("no problems\n")


def test_broken_profile_reports_everything_and_exits_1() -> None:
    code, out = invoke(str(BROKEN), "--format", "json")
    assert code == 1
    doc = json.loads(out)
    got = [(p["line"], p["column"], p["rule"]) for p in doc["problems"]]
    assert got == BROKEN_PROBLEMS
    assert doc["summary"]["errors"] == len(BROKEN_PROBLEMS)


def test_text_format_names_file_line_column_and_path() -> None:
    code, out = invoke(str(BROKEN))
    assert code == 1
    assert (f"{BROKEN}:14:19: error: plugin \"hwEncrypt\" is not registered; did you mean "
            "\"HwEncrypt\"? [plugin-unknown] (at profiles[0].plugins.filter.enabled[0].name)"
            ) in out
    assert (f"{BROKEN}:6:27: error: Invalid value: 101: not in valid range [0-100] "
            "[out-of-range] (at percentageOfNodesToScore)") in out
    assert (f"{BROKEN}:21:20: error: Duplicate value: \"policyd\"") in out


def test_github_format() -> None:
    code, out = invoke(str(BROKEN), "--format", "github")
    assert code == 1
    assert f"::error file={BROKEN},line=14,col=19" in out
    # Annotations and the summary name the command that ran, not `policyd lint`.
    annotations = [line for line in out.splitlines() if line.startswith("::")]
    assert len(annotations) == len(BROKEN_PROBLEMS)
    assert all(",title=policyd check-config (" in line for line in annotations)
    assert "policyd lint" not in out
    assert out.splitlines()[-1].startswith("policyd check-config: 9 error(s)")


def test_sarif_format() -> None:
    code, out = invoke(str(BROKEN), "-f", "sarif")
    assert code == 1
    sarif = json.loads(out)
    assert sarif["runs"][0]["tool"]["driver"]["name"] == "policyd check-config"
    results = sarif["runs"][0]["results"]
    assert [(r["locations"][0]["physicalLocation"]["region"]["startLine"], r["ruleId"])
            for r in results] == [(line, rule) for line, _, rule in BROKEN_PROBLEMS]


def test_yaml_syntax_error_exits_1() -> None:
    code, out = invoke(str(BAD_YAML))
    assert code == 1
    assert "[yaml-syntax]" in out


@pytest.mark.parametrize("args", [["/nonexistent/profile.yaml"], [str(ROOT / "tests")],
                                  [str(EXAMPLE), "--format", "xml"]])
def test_unreadable_or_usage_exits_2(args: list[str]) -> None:
    code, _ = invoke(*args)
    assert code == 2


def test_warnings_pass_unless_strict(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
                    "clientConnection: {kubeconfig: /nonexistent/kubeconfig}\n")
    assert invoke(str(path))[0] == 0
    assert invoke(str(path), "--strict")[0] == 1


def test_real_command_is_fast_and_never_imports_the_kubernetes_client() -> None:
    code = (
        "import sys, time\n"
        "sys.argv = ['policyd', 'check-config', sys.argv[1]]\n"
        "from policyd.cli.app import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    rc = e.code\n"
        "print('RC', rc, 'K8S', any(m == 'kubernetes' or m.startswith('kubernetes.')"
        " for m in sys.modules))\n"
    )
    env = {**os.environ, "GITHUB_ACTIONS": ""}
    for profile, rc in ((EXAMPLE, 0), (BROKEN, 1)):
        proc = subprocess.run([sys.executable, "-c", code, str(profile)], capture_output=True,
                              text=True, env=env, cwd=ROOT, timeout=60)
        assert f"RC {rc} K8S False" in proc.stdout, proc.stderr


def test_explain_with_an_invalid_profile_shows_positions(tmp_path: Path) -> None:
    from policyd.cli.schedule_cmds import frameworks_for
    from policyd.errors import EXIT_USAGE, InputFileError

    with pytest.raises(InputFileError) as exc:
        frameworks_for(BROKEN, [], seed=1)
    assert exc.value.exit_code == EXIT_USAGE
    text = str(exc.value)
    assert f"{BROKEN}:14:19: plugin \"hwEncrypt\" is not registered" in text
    assert "9 problem(s)" in text


def test_explain_with_a_valid_profile_and_extra_policies(tmp_path: Path) -> None:
    from policyd.cli.schedule_cmds import frameworks_for

    path = tmp_path / "p.yaml"
    path.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
                    "profiles: [{schedulerName: a}, {schedulerName: b}]\n")
    frameworks = frameworks_for(path, [ROOT / "policies" / "hw-encrypt.yaml"], seed=1)
    assert set(frameworks) == {"a", "b"}
    assert "HwEncrypt" in [p.name for p in frameworks["a"].filter_plugins]
    assert set(frameworks_for(EXAMPLE, [], seed=1)) == {"policyd", "policyd-secure"}


def test_feature_gates_flag_is_validated_as_run_takes_it(tmp_path: Path) -> None:
    """check-config answers for the configuration `policyd run --feature-gates ...`
    would run: the flag's gates over the profile's, their dependencies checked, and a
    gate policyd refuses a usage error (exit 2), as run says it."""
    profile = tmp_path / "gang.yaml"
    profile.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
                       "profiles:\n  - schedulerName: policyd\n")
    code, out = invoke(str(profile), "--feature-gates", "GangScheduling=true")
    assert code == 1
    assert "GangScheduling is enabled, but depends on features that are disabled: " \
           "[GenericWorkload] (with --feature-gates applied)" in out
    code, out = invoke(str(profile), "--feature-gates", "GenericWorkload=true",
                       "--feature-gates", "GangScheduling=true", "-o", "json")
    assert code == 0
    gates = json.loads(out)["effective"]["featureGates"]
    assert (gates["GenericWorkload"], gates["GangScheduling"]) == (True, True)
    refused = subprocess.run(
        [sys.executable, "-m", "policyd", "check-config", str(profile), "--feature-gates",
         "TopologyAwareWorkloadScheduling=true"], capture_output=True, text=True, check=False)
    assert refused.returncode == 2
    assert refused.stderr.startswith("policyd: error: invalid argument "
                                     "'TopologyAwareWorkloadScheduling=true' for "
                                     "\"--feature-gates\" flag: ")
