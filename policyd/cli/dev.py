"""`policyd dev`: a local control plane (etcd + kube-apiserver + kube-controller-manager)
for demos and trying policies.

`up` returns once the API server is ready and leaves it running in the background, so a
shell can then use kubectl and policyd against it; `down` stops it. What `up` started
(pids with start times, ports, work dir) is recorded in a state directory —
``$POLICYD_DEV_DIR``, default ``~/.cache/policyd/devcluster`` — which is all `status` and
`down` rely on: they never look processes up by name.

Exit codes: 0 success, 1 failure (build failed, port busy, binary missing, cluster not
running for `status`), 2 usage (bad option, unreadable snapshot file).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Annotated

import typer

from policyd.cli.helpformat import PolicydGroup
from policyd.errors import EXIT_PROBLEMS, EXIT_USAGE, PolicydError

dev_app = typer.Typer(
    help="Run a local Kubernetes control plane built from source (etcd, API server, "
    "controller manager).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=PolicydGroup,
    rich_markup_mode=None,
)


def state_dir() -> Path:
    override = os.environ.get("POLICYD_DEV_DIR")
    if override:
        return Path(override).expanduser()
    from policyd.devcluster.assets import cache_root

    return cache_root() / "devcluster"


def _state_file() -> Path:
    return state_dir() / "state.json"


def _say(message: str) -> None:
    # Progress goes to stderr so that stdout carries only the `export` line of `up`.
    typer.echo(message, err=True)


def _fail(err: PolicydError) -> typer.Exit:
    """Print a known error as one line (plus the log tail of a failed start) and exit."""
    typer.echo(f"policyd: error: {err}", err=True)
    return typer.Exit(err.exit_code)


@dev_app.command("build")
def build(
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if cached.")] = False,
    control_plane_only: Annotated[bool, typer.Option(
        "--control-plane-only", help="Only the control plane (what `policyd dev up` and "
        "`make demo` run), not the tests' Prometheus, promtool, Karpenter and Helm.")
    ] = False,
) -> None:
    """Build the control plane's five binaries, Prometheus, promtool, Karpenter and Helm,
    or find them cached."""
    from policyd.devcluster.assets import from_env
    from policyd.devcluster.build import build_binaries, build_dev_tools
    from policyd.devcluster.errors import DevClusterError

    try:
        if control_plane_only:
            binaries = (None if force else from_env()) or build_binaries(progress=_say,
                                                                         force=force)
        else:
            binaries = build_dev_tools(progress=_say, force=force)
    except DevClusterError as err:
        raise _fail(err) from None
    typer.echo(str(binaries.etcd.parent))


@dev_app.command("up")
def up(
    load: Annotated[
        Path | None,
        typer.Option(
            "--load",
            help="Create the Nodes and Pods of this snapshot "
            "(`kubectl get nodes,pods -A -o yaml` output or multi-document YAML).",
        ),
    ] = None,
    kube_scheduler: Annotated[
        bool,
        typer.Option(
            "--kube-scheduler",
            help="Also start kube-scheduler (leader election off), the comparison peer.",
        ),
    ] = False,
    scheduler_config: Annotated[
        Path | None,
        typer.Option(
            "--scheduler-config",
            help="KubeSchedulerConfiguration for kube-scheduler (implies --kube-scheduler).",
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--port", min=1, max=65535, help="API server port on 127.0.0.1 (default: a free one)."
        ),
    ] = None,
    controller_manager: Annotated[
        bool,
        typer.Option(
            "--controller-manager/--no-controller-manager",
            help="Start kube-controller-manager with the volume controllers (the PV "
            "controller binds claims); on by default.",
        ),
    ] = True,
    feature_gates: Annotated[
        list[str] | None,
        typer.Option(
            "--feature-gates",
            metavar="NAME=BOOL,...",
            help="Feature gates of kube-apiserver, kube-controller-manager and "
            "kube-scheduler (repeatable; any gate name, e.g. "
            "GenericWorkload=true,GangScheduling=true); the alpha/beta API versions they "
            "need are enabled. A malformed setting is a usage error (exit 2).",
        ),
    ] = None,
) -> None:
    """Start the control plane in the background and print the KUBECONFIG to use."""
    from policyd.devcluster.controlplane import ControlPlane, read_scheduler_config
    from policyd.devcluster.errors import DevClusterError
    from policyd.devcluster.featuregates import parse_gates
    from policyd.devcluster.replay import check_objects, load_snapshot, read_objects

    objects = None
    try:
        # Before starting anything: a typo or a wrong file fails fast.
        gates = parse_gates(",".join(feature_gates or []))
        if load is not None:
            objects = read_objects(load)
            check_objects(objects, str(load))
        if scheduler_config is not None:
            read_scheduler_config(scheduler_config)
    except PolicydError as err:
        err.exit_code = EXIT_USAGE  # an unusable input file is a usage error
        raise _fail(err) from None

    state = _state_file()
    if state.exists():
        try:
            existing = ControlPlane.from_state(state)
        except DevClusterError:
            existing = None
        if existing is not None and any(p.alive() for p in existing.processes):
            _say(
                f"policyd: error: a dev cluster is already running at {existing.server}; "
                "run `policyd dev down` first"
            )
            raise typer.Exit(EXIT_PROBLEMS)
        _cleanup_stale(existing)

    workdir = state_dir() / "cluster"
    shutil.rmtree(workdir, ignore_errors=True)
    cp = ControlPlane(workdir, detach=True, apiserver_port=port, progress=_say,
                      controller_manager=controller_manager, feature_gates=gates)
    try:
        cp.start()
        cp.save_state(state)
        if objects is not None:
            result = load_snapshot(cp.kubeconfig_path, objects)
            _say(f"{load}: {result.summary()}")
        if kube_scheduler or scheduler_config is not None:
            scheduler = cp.start_kube_scheduler(scheduler_config)
            cp.save_state(state)
            _say(f"kube-scheduler running (pid {scheduler.pid}, log {scheduler.log_path})")
    except PolicydError as err:
        cp.stop(remove_workdir=False)  # keep the logs named in the error
        state.unlink(missing_ok=True)
        raise _fail(err) from None
    except BaseException:
        # Ctrl-C or a bug mid-start: a detached cluster would otherwise be orphaned.
        cp.stop(remove_workdir=False)
        state.unlink(missing_ok=True)
        raise
    _say(
        f"dev cluster running: {cp.server} (pids {', '.join(map(str, cp.pids))}); "
        "stop it with `policyd dev down`"
    )
    _say(cp.describe_gates())
    typer.echo(f"export KUBECONFIG={cp.kubeconfig_path}")


def _cleanup_stale(existing: object | None) -> None:
    """Forget a cluster whose processes are gone (machine rebooted, killed by hand)."""
    from policyd.devcluster.controlplane import ControlPlane

    if isinstance(existing, ControlPlane):
        existing.stop(remove_workdir=False)
    _state_file().unlink(missing_ok=True)


@dev_app.command("status")
def status() -> None:
    """Show whether the dev cluster runs; exit 1 when it does not."""
    from policyd.devcluster.controlplane import ControlPlane
    from policyd.devcluster.errors import DevClusterError

    state = _state_file()
    if not state.exists():
        typer.echo("dev cluster: not running")
        raise typer.Exit(EXIT_PROBLEMS)
    try:
        cp = ControlPlane.from_state(state)
    except DevClusterError as err:
        raise _fail(err) from None
    ready = cp.safe_ready()
    typer.echo(f"dev cluster: {'ready' if ready else 'NOT READY'} at {cp.server}")
    typer.echo(cp.describe_gates())
    for proc in [*cp.processes, *(s.process for s in cp.schedulers)]:
        typer.echo(
            f"  {proc.name:<23} pid {proc.pid:<8} "
            f"{'running' if proc.alive() else 'gone'}  log {proc.log_path}"
        )
    typer.echo(f"export KUBECONFIG={cp.kubeconfig_path}")
    if not ready:
        raise typer.Exit(EXIT_PROBLEMS)


@dev_app.command("down")
def down(
    keep: Annotated[
        bool, typer.Option("--keep", help="Keep the work dir (logs, etcd data).")
    ] = False,
) -> None:
    """Stop every process of the dev cluster and remove its work dir."""
    from policyd.devcluster.controlplane import ControlPlane
    from policyd.devcluster.errors import DevClusterError

    state = _state_file()
    if not state.exists():
        _say("dev cluster: not running")
        return
    try:
        cp = ControlPlane.from_state(state)
        pids = cp.pids
        cp.stop(remove_workdir=not keep)
    except DevClusterError as err:
        raise _fail(err) from None
    state.unlink(missing_ok=True)
    _say(f"dev cluster stopped (pids {', '.join(map(str, pids))})")


if __name__ == "__main__":  # `python -m policyd.cli.dev`, before the app registers it
    sys.exit(dev_app())
