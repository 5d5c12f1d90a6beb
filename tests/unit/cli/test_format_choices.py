"""Every command's output format is the one option `-o/--output` (kubectl's), with
`-f/--format` as its aliases; it offers exactly the formats its registry renders (the
names in --help and the ones accepted come from the registry, and a name outside it is
a usage error, exit 2), and a format name that two commands share means the same
thing."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from policyd.cli.app import register_commands
from policyd.cli.audit_cmd import AUDIT_FORMATS
from policyd.cli.check_config_cmd import CHECK_CONFIG_FORMATS
from policyd.cli.diff_report import DIFF_FORMATS
from policyd.cli.options import one_of
from policyd.cli.schedule_cmds import SCHEDULE_FORMATS
from policyd.lint.reporters import REPORTERS
from policyd.policytest.render import RENDERERS as TEST_RENDERERS

APP = register_commands()
# kubectl's spelling, and the one lint, test and check-config had first (CI uses it).
OUTPUT_FLAGS = ("-o", "--output", "-f", "--format")
ROOT = Path(__file__).resolve().parents[3]

# command -> its formats' registry, and whether typer lists them as a choice
# (`<a|b>`) or the help text names them (`a, b or c`).
COMMANDS: dict[str, tuple[Sequence[str], bool]] = {
    "lint": (list(REPORTERS), False),
    "check-config": (list(CHECK_CONFIG_FORMATS), False),
    "test": (list(TEST_RENDERERS), False),
    "audit": (list(AUDIT_FORMATS), True),
    "diff": (list(DIFF_FORMATS), True),
    "explain": (list(SCHEDULE_FORMATS), True),
    "simulate": (list(SCHEDULE_FORMATS), True),
}


def _option_line(command: str) -> str:
    """The option's entry in --help: its names, then its help (which click puts on the
    next lines when the names are long), as one line."""
    out = CliRunner().invoke(APP, [command, "--help"], terminal_width=200).output
    lines = out.splitlines()
    start = next(i for i, x in enumerate(lines) if "--output" in x)
    entry = [lines[start]]
    for x in lines[start + 1:]:
        if x.lstrip().startswith("-") or not x.strip():
            break
        entry.append(x)
    return " ".join(" ".join(entry).split())


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_names_the_registered_formats(command: str) -> None:
    names, is_choice = COMMANDS[command]
    line = _option_line(command)
    assert (f"<{'|'.join(names)}>" if is_choice else one_of(names)) in line, line


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_spells_the_option_alike(command: str) -> None:
    line = _option_line(command)
    for flag in OUTPUT_FLAGS:
        assert flag in line.replace(",", " ").split(), line


@pytest.mark.parametrize("flag", OUTPUT_FLAGS)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_format_outside_the_registry_is_a_usage_error(command: str, flag: str) -> None:
    result = CliRunner().invoke(APP, [command, flag, "xml", "x"])
    assert result.exit_code == 2, result.output
    assert "'xml' is not one of" in result.output


def test_shared_format_names_cover_the_kubectl_ones() -> None:
    """json on every command; yaml wherever a JSON document is printed (kubectl's
    `-o json|yaml`, which the plugin's help promises for its commands); junit on both
    commands whose results are test cases."""
    for command, (names, _) in COMMANDS.items():
        assert names[0] == "text" and "json" in names, command
    for command in ("explain", "simulate", "audit", "diff", "check-config"):
        assert "yaml" in COMMANDS[command][0], command
    assert "junit" in COMMANDS["test"][0] and "junit" in COMMANDS["audit"][0]


@pytest.mark.parametrize("flag", OUTPUT_FLAGS)
def test_each_spelling_picks_the_same_format(flag: str) -> None:
    policy = str(ROOT / "policies" / "env-prod.yaml")
    result = CliRunner().invoke(APP, ["lint", flag, "json", policy],
                                env={"GITHUB_ACTIONS": ""})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["summary"]["files"] == 1


def test_audit_yaml_is_its_json_document(tmp_path: Path) -> None:
    from ruamel.yaml import YAML

    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n")
    policies = str(ROOT / "policies" / "env-prod.yaml")
    outs = [CliRunner().invoke(APP, ["audit", "--cluster", str(cluster), "--policies",
                                     policies, "-o", fmt]) for fmt in ("json", "yaml")]
    assert [r.exit_code for r in outs] == [0, 0], [r.output for r in outs]
    assert YAML(typ="safe", pure=True).load(outs[1].stdout) == json.loads(outs[0].stdout)
