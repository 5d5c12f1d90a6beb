"""`policyd demo`: the scheduler's main job on the embedded demo, start to finish."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from policyd.errors import EXIT_OK, EXIT_PROBLEMS, InputFileError

if TYPE_CHECKING:
    from policyd.devcluster.demo import Outcome


def demo(
    directory: Annotated[Path, typer.Option("--dir", help="Demo directory with cluster.yaml, "
                                            "pods.yaml and profile.yaml.")] = Path("demo"),
    timeout: Annotated[float, typer.Option(help="Seconds to wait for every pod's "
                                           "outcome.")] = 60.0,
    explain: Annotated[list[str] | None, typer.Option(
        "--explain", help="NAMESPACE/NAME of a demo pod to explain afterwards with "
        "`policyd explain` against the live cluster the daemon scheduled (repeatable).")
    ] = None,
) -> None:
    """Start a local control plane, load the demo cluster, run `policyd run` against it,
    create the demo pods, and show where each went and why (from the pods' events).

    With --explain, `policyd explain` then reads that same cluster, with the daemon's
    profile, while it still runs: its message for a pending pod is the daemon's
    FailedScheduling message. Exit 0 when every pod was either bound or told why not,
    1 otherwise (or explain's own exit code when it failed with 2 or more)."""
    for name in ("cluster.yaml", "pods.yaml", "profile.yaml"):
        if not (directory / name).is_file():
            raise InputFileError(f"missing {name}", where=str(directory))
    from policyd.devcluster.demo import run_live_demo
    from policyd.devcluster.errors import DevClusterError

    explain_failed = 0

    def show_and_explain(outcomes: list[Outcome], kubeconfig: Path) -> None:
        nonlocal explain_failed
        _show(outcomes)
        for pod in explain or []:
            explain_failed = explain_failed or _explain_live(pod, kubeconfig, directory)

    try:
        outcomes = run_live_demo(directory, timeout=timeout,
                                 say=lambda line: typer.echo(f"[demo] {line}", err=True),
                                 then=show_and_explain)
    except DevClusterError as exc:
        typer.echo(f"policyd: error: {exc}", err=True)
        raise typer.Exit(EXIT_PROBLEMS) from None
    if explain_failed:
        raise typer.Exit(explain_failed)
    settled = all(o.node or o.reason == "FailedScheduling" for o in outcomes)
    raise typer.Exit(EXIT_OK if settled else EXIT_PROBLEMS)


def _show(outcomes: list[Outcome]) -> None:
    width = max(len(o.pod) for o in outcomes)
    typer.echo("")
    for o in outcomes:
        where = f"-> {o.node}" if o.node else "-> (pending)"
        typer.echo(f"{o.pod:<{width}}  {where}")
        if o.reason:
            typer.echo(f"{'':<{width}}     {o.reason}: {o.message}")
    bound = sum(1 for o in outcomes if o.node)
    typer.echo(f"\n{bound} of {len(outcomes)} pods bound by policyd; the others carry a "
               "FailedScheduling event saying why (kubectl describe pod shows the same).")


def _explain_live(pod: str, kubeconfig: Path, directory: Path) -> int:
    """Run `policyd explain` on the live demo cluster as a user would, showing the
    command; 0 unless it failed (exit 1 only says the pod fits nowhere)."""
    args = ["explain", pod, "--kubeconfig", str(kubeconfig), "--config",
            str(directory / "profile.yaml"), "--seed", "1"]
    typer.echo(f"\n$ policyd {' '.join(args)}")
    sys.stdout.flush()  # the child writes to the same stdout
    rc = subprocess.run([sys.executable, "-m", "policyd", *args], check=False).returncode
    return rc if rc not in (EXIT_OK, EXIT_PROBLEMS) else 0
