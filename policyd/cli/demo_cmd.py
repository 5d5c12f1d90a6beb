"""`policyd demo`: the scheduler's main job on the embedded demo, start to finish."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from policyd.errors import EXIT_OK, EXIT_PROBLEMS, InputFileError


def demo(
    directory: Annotated[Path, typer.Option("--dir", help="Demo directory with cluster.yaml, "
                                            "pods.yaml and profile.yaml.")] = Path("demo"),
    timeout: Annotated[float, typer.Option(help="Seconds to wait for every pod's "
                                           "outcome.")] = 60.0,
) -> None:
    """Start a local control plane, load the demo cluster, run `policyd run` against it,
    create the demo pods, and show where each went and why (from the pods' events).

    Exit 0 when every pod was either bound or told why not, 1 otherwise."""
    for name in ("cluster.yaml", "pods.yaml", "profile.yaml"):
        if not (directory / name).is_file():
            raise InputFileError(f"missing {name}", where=str(directory))
    from policyd.devcluster.demo import run_live_demo
    from policyd.devcluster.errors import DevClusterError

    try:
        outcomes = run_live_demo(directory, timeout=timeout,
                                 say=lambda line: typer.echo(f"[demo] {line}", err=True))
    except DevClusterError as exc:
        typer.echo(f"policyd: error: {exc}", err=True)
        raise typer.Exit(EXIT_PROBLEMS) from None
    width = max(len(o.pod) for o in outcomes)
    typer.echo("")
    for o in outcomes:
        where = f"-> {o.node}" if o.node else "-> (pending)"
        typer.echo(f"{o.pod:<{width}}  {where}")
        if o.reason:
            typer.echo(f"{'':<{width}}     {o.reason}: {o.message}")
    settled = all(o.node or o.reason == "FailedScheduling" for o in outcomes)
    bound = sum(1 for o in outcomes if o.node)
    typer.echo(f"\n{bound} of {len(outcomes)} pods bound by policyd; the others carry a "
               "FailedScheduling event saying why (kubectl describe pod shows the same).")
    raise typer.Exit(EXIT_OK if settled else EXIT_PROBLEMS)
