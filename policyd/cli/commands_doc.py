"""docs/commands.md, generated from the real command tree so it cannot drift from `--help`.

`python -m policyd.cli.commands_doc` writes the page; `--check` only compares and exits 1
when the page differs (tests/unit/cli/test_commands_doc.py does the same). Everything a
command's `--help` says comes from click itself: the usage line, the help text, and each
argument's and option's names, value, help, default, range and choices, through the same
`get_help_record` that `--help` prints. Only the exit codes are written by hand, in
EXIT_CODES below, because no part of the command tree knows them; a command without an
entry there (or an entry without a command) is an error, so a new command cannot land
undocumented.

Nothing in the CLI imports this module: `policyd --help` and the file commands pay
nothing for it (tests/unit/cli/test_startup_imports.py).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import typer
from typer.core import TyperGroup

from policyd.cli.app import register_commands
from policyd.cli.generated_page import page_main
from policyd.cli.kubectl_plugin import PROG_NAME as KUBECTL_PROG
from policyd.cli.kubectl_plugin import build_app

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "commands.md"
COMMAND = "python -m policyd.cli.commands_doc"

# The hand-written part: what each command's exit codes mean, by command path. The
# codes are policyd/errors.py's; the meanings are each command's own contract (its help
# states them too, and its tests check them).
EXIT_CODES: Mapping[str, tuple[tuple[int, str], ...]] = {
    "policyd version": ((0, "always"),),
    "policyd lint": (
        (0, "no problem (warnings allowed unless `--strict`)"),
        (1, "problems found (with `--strict`, warnings too); a profile or a snapshot "
            "given to lint is one, naming the command that takes it"),
        (2, "usage error or unreadable input"),
    ),
    "policyd check-config": (
        (0, "the profile and its policies are valid"),
        (1, "problems found (with `--strict`, warnings too); a policy, PolicyTest or "
            "snapshot given as the profile is one, naming the command that takes it"),
        (2, "usage error or unreadable input"),
    ),
    "policyd test": (
        (0, "every test passed"),
        (1, "a test failed, or no tests were found"),
        (2, "usage error or unreadable input"),
    ),
    "policyd explain": (
        (0, "the pod fits a node"),
        (1, "the pod fits no node"),
        (2, "bad input: invalid YAML, a wrong kind (a profile, policy or PolicyTest "
            "given as a snapshot or pod file is named as such, with the command that "
            "takes it), a missing field, a bad quantity, an unknown field (unless "
            "`--validate` says otherwise), a pod no profile serves when there are several "
            "profiles and none serves default-scheduler, a live read the user may not "
            "make"),
    ),
    "policyd simulate": (
        (0, "every pod tried was placed"),
        (1, "some pod could not be placed, or a pending pod given with `--pods` was "
            "skipped or is held out of the queue (scheduling gates, a missing "
            "ResourceClaim)"),
        (2, "bad input (as for explain), a Node or Pod given twice, or "
            "`--all-schedulers` with pods no profile serves and several profiles, none "
            "serving default-scheduler"),
    ),
    "policyd audit": (
        (0, "no pod violates a policy, no bound pod holds a device its claim would not "
            "get today"),
        (1, "a pod violates a policy or holds such a device (with `--fail-on enforce`: "
            "only a violation of an Enforce-mode policy)"),
        (2, "bad input (as for explain)"),
    ),
    "policyd diff": (
        (0, "no bound pod becomes a violation of the new version"),
        (1, "a bound pod becomes a violation (with `--fail-on enforce`: only of an "
            "Enforce-mode policy or a built-in filter)"),
        (2, "bad input: a missing path, a revision git does not know, an invalid policy "
            "or profile, an unreadable cluster"),
    ),
    "policyd admit": (
        (0, "the admitted pod is printed"),
        (2, "bad input: a file without exactly one Pod, an unknown `--scheduler-name`, "
            "several profiles and none the default without `--scheduler-name`, an "
            "invalid profile or policy"),
    ),
    "policyd ui": (
        (0, "stopped by Ctrl-C (SIGINT)"),
        (1, "the listening address is in use or refused by the host"),
        (2, "usage error, a cluster that cannot be read, an invalid profile or policy "
            "(nothing is served)"),
    ),
    "policyd webhook": (
        (0, "stopped by SIGTERM/SIGINT"),
        (1, "the serving address is in use or refused by the host"),
        (2, "usage error, an unreadable serving certificate, an invalid profile or "
            "policy (nothing is served)"),
    ),
    "policyd run": (
        (0, "stopped by SIGTERM/SIGINT, after in-flight binds finished and the lease "
            "was released"),
        (1, "the profile or a policy is invalid (no request is sent to the API server), "
            "or the environment refused the daemon: a serving address already in use or "
            "refused by the host (one line naming the address)"),
        (2, "usage error: a malformed flag or address, an unreadable file"),
    ),
    "policyd demo": (
        (0, "every demo pod was either bound or told why not"),
        (1, "otherwise"),
        (2, "an `--explain` run failed with 2 (or more: explain's own code is the demo's)"),
    ),
    "policyd dev build": (
        (0, "the binaries are built or found (their directory is printed)"),
        (1, "failure: the build failed, a binary is missing"),
        (2, "usage error"),
    ),
    "policyd dev up": (
        (0, "the API server is ready (the `export KUBECONFIG=...` line is printed)"),
        (1, "failure: a port busy, a binary missing, a dev cluster already running"),
        (2, "usage error: a bad option, an unreadable snapshot file"),
    ),
    "policyd dev status": (
        (0, "the dev cluster runs and is ready"),
        (1, "it is not running, or not ready"),
        (2, "usage error"),
    ),
    "policyd dev down": (
        (0, "every process of the dev cluster is stopped (or none was running)"),
        (1, "failure: its recorded state cannot be read"),
        (2, "usage error"),
    ),
}

# Every command exits with these whatever it does (policyd/cli/app.py's error boundary).
BOUNDARY_EXIT_CODES = (
    (70, "internal error: a bug; one line names the file holding the traceback"),
    (130, "interrupted (Ctrl-C)"),
)

INTRO = """\
Every command and subcommand of `policyd` and of its kubectl plugin `kubectl policyd`:
usage, arguments and options (with their values, defaults and choices) exactly as
`--help` prints them, and what each exit code means. Output formats are the choices of
each command's `-o`/`--output` (also spelt `-f`/`--format`; a format two commands offer
means the same on both: yaml is always the json document); every command also takes
`--help`. Where a command's behaviour needs more than its help: [getting
started](getting-started.md), [explain, simulate and audit](explain-simulate-audit.md)
(their output, snapshot files, input checks), [running the daemon](running.md),
[development](development.md) (`policyd dev`) and the [policy
language](policy-language.md) (`lint`, `test`).

Every command, whatever it does, also exits with:
"""


def _cell(text: str, code: bool = False) -> str:
    """`text` fit for one markdown table cell (in a code span when `code`)."""
    text = " ".join(text.split()).replace("|", "\\|")
    # `*.yaml, *.yml` in prose would start an emphasis; in a code span it is literal.
    return f"`{text}`" if code else text.replace("*", "\\*")


def _help(ctx: typer.Context) -> list[str]:
    """A command's help as markdown paragraphs (click's text, unwrapped), if it has any."""
    paras = inspect.cleandoc(ctx.command.help or "").split("\n\n")
    text = "\n\n".join(" ".join(p.split()) for p in paras if p.strip())
    return [text, ""] if text else []


def _walk(ctx: typer.Context) -> Iterator[typer.Context]:
    """`ctx` and the context of every command below it, in `--help` order."""
    yield ctx
    command = ctx.command
    if isinstance(command, TyperGroup):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _walk(typer.Context(sub, info_name=name, parent=ctx))


def _params_table(ctx: typer.Context) -> list[str]:
    # `--help` is every command's; the intro says so once.
    rows = [(names, text) for names, text in _signature(ctx) if names != "--help"]
    if not rows:
        return []
    lines = ["| argument or option | what it is |", "|---|---|"]
    lines += [f"| {_cell(names, code=True)} | {_cell(text)} |" for names, text in rows]
    return [*lines, ""]


def _exit_table(codes: tuple[tuple[int, str], ...]) -> list[str]:
    lines = ["| exit | when |", "|---:|---|"]
    return [*lines, *(f"| {code} | {_cell(meaning)} |" for code, meaning in codes), ""]


def _signature(ctx: typer.Context) -> list[tuple[str, str]]:
    """What `--help` shows of a command's parameters, to tell two commands apart."""
    return [record for p in ctx.command.get_params(ctx)
            if (record := p.get_help_record(ctx)) is not None]


def _section(ctx: typer.Context, exit_codes: Mapping[str, tuple[tuple[int, str], ...]],
             level: int) -> list[str]:
    path = ctx.command_path
    usage = " ".join([path, *ctx.command.collect_usage_pieces(ctx)])
    lines = [f"{'#' * level} `{path}`", "", "```", f"Usage: {usage}", "```", "",
             *_help(ctx)]
    if isinstance(ctx.command, TyperGroup):
        subs = [c.command_path for c in _walk(ctx)][1:]
        return [*lines, "Subcommands: " + ", ".join(f"`{s}`" for s in subs) + ".", ""]
    lines += _params_table(ctx)
    return [*lines, *_exit_table(exit_codes[path])]


def _root(app: typer.Typer, prog: str) -> typer.Context:
    return typer.Context(typer.main.get_command(app), info_name=prog)


def render(exit_codes: Mapping[str, tuple[tuple[int, str], ...]] = EXIT_CODES) -> str:
    """The whole page. Raises ValueError when EXIT_CODES and the command tree disagree."""
    policyd = list(_walk(_root(register_commands(), "policyd")))
    leaves = {c.command_path for c in policyd[1:] if not isinstance(c.command, TyperGroup)}
    if leaves != set(exit_codes):
        raise ValueError(
            f"EXIT_CODES in {__name__} and the command tree differ: commands without exit "
            f"codes {sorted(leaves - set(exit_codes))}, entries without a command "
            f"{sorted(set(exit_codes) - leaves)}")
    by_name = {c.command_path.removeprefix("policyd "): c for c in policyd[1:]}
    out = ["# Commands", "",
           f"<!-- Generated by `{COMMAND}` from the command tree; do not edit by hand. -->",
           "", INTRO, *_exit_table(BOUNDARY_EXIT_CODES), "## `policyd`", "",
           *_help(policyd[0])]
    for ctx in policyd[1:]:
        out += _section(ctx, exit_codes, ctx.command_path.count(" ") + 2)
    plugin = list(_walk(_root(build_app(), KUBECTL_PROG)))
    out += [f"## `{KUBECTL_PROG}`", "",
            "`pip install` puts `kubectl-policyd` on PATH, so kubectl runs it for "
            f"`{KUBECTL_PROG} ...`.", "", *_help(plugin[0])]
    for ctx in plugin[1:]:
        name = ctx.command_path.removeprefix(KUBECTL_PROG + " ")
        twin = by_name.get(name)
        if twin is not None and _signature(twin) == _signature(ctx) \
                and twin.command.help == ctx.command.help:
            anchor = f"policyd-{name}".replace(" ", "-")
            out += [f"### `{ctx.command_path}`", "",
                    f"The same command as [`policyd {name}`](#{anchor}): the same "
                    "arguments, options and exit codes.", ""]
        else:
            out += _section(ctx, {ctx.command_path: exit_codes[f"policyd {name}"]}, 3)
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    return page_main(argv, command=COMMAND, description=__doc__.split("\n\n")[0],
                     page=PAGE, regenerate=lambda _current: render(),
                     stale=" differs from the command tree",
                     check_help="exit 1 if the page differs from the command tree")


if __name__ == "__main__":
    sys.exit(main())
