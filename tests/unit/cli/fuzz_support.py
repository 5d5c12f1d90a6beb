"""Running the real CLI in-process on hostile files, and judging the outcome.

`run_cli` goes through `policyd.cli.app.main`, the one error boundary, because that is
where an unexpected exception becomes exit 70 ("internal error"); typer's CliRunner
would bypass it. Commands that would start something after validating their input
(`run`, `dev up`, `demo`) are stopped right there: reaching that point means the input
was accepted, which counts as exit 0.

Every file role policyd reads has a `Target`: how to build the command line around one
file, and the valid example it starts from.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import logging
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "demo"
POLICIES = ROOT / "policies"
EXAMPLE_PROFILE = ROOT / "examples" / "profiles" / "policyd.yaml"
ALLOWED_EXITS = {0, 1, 2}
HANG_SECONDS = 8.0


class Accepted(BaseException):
    """Raised where a command would start a daemon or a control plane: the input passed."""


class Hang(BaseException):
    """Raised by the alarm when a run takes too long; not an Exception, so that main()'s
    boundary cannot catch it."""


@dataclass(frozen=True)
class Outcome:
    argv: tuple[str, ...]
    code: int
    stdout: str
    stderr: str
    hung: bool = False
    crash: str = ""  # the end of the traceback main() wrote for an internal error

    def describe(self) -> str:
        return (f"policyd {' '.join(self.argv)}\n  exit {self.code}"
                f"{' (hung)' if self.hung else ''}\n  stderr: {self.stderr[:2000]!r}"
                + (f"\n  crash: {self.crash}" if self.crash else ""))


def _crash_report(stderr: str) -> str:
    """Where the internal error named in `stderr` came from: the deepest policyd frame
    of the traceback file main() wrote, and the exception."""
    import re

    m = re.search(r"traceback written to (\S+)", stderr)
    if not m:
        return ""
    try:
        lines = Path(m.group(1)).read_text().strip().splitlines()
    except OSError:
        return ""
    frames = [ln.strip() for ln in lines
              if ln.strip().startswith('File "') and "/policyd/" in ln and "/cli/" not in ln]
    return " | ".join([*frames[-1:], lines[-1][:300]])


def _ensure_registered() -> None:
    from policyd.cli import app as app_mod

    app_mod.register_commands()


def _stub_starts(stack: contextlib.ExitStack) -> None:
    """Stop `run`, `dev up` and `demo` at the point where they would start something."""
    from unittest import mock

    def accepted(*_a: Any, **_k: Any) -> Any:
        raise Accepted

    import policyd.cli.dev
    import policyd.daemon.run
    import policyd.devcluster.demo

    stack.enter_context(mock.patch.object(policyd.daemon.run, "Daemon", accepted))
    stack.enter_context(mock.patch.object(policyd.daemon.run, "connect", accepted))
    stack.enter_context(mock.patch.object(policyd.cli.dev, "_state_file", accepted))
    stack.enter_context(mock.patch.object(policyd.devcluster.demo, "ControlPlane", accepted))


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    def on_alarm(_signum: int, _frame: object) -> None:
        raise Hang

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def _kept_logging() -> Iterator[None]:
    """`policyd run` configures the policyd logger; later tests must not see that."""
    logger = logging.getLogger("policyd")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    try:
        yield
    finally:
        logger.handlers[:] = saved[0]
        logger.setLevel(saved[1])
        logger.propagate = saved[2]


def run_cli(*argv: str | Path, crash_dir: Path | None = None,
            hang_seconds: float = HANG_SECONDS, program: str = "policyd") -> Outcome:
    """`policyd ARGV...` (`program` "kubectl-policyd": the kubectl plugin's) through its
    main(): exit code and what it printed; a run longer than `hang_seconds` is stopped
    and reported as hung."""
    from unittest import mock

    from policyd.cli import app as app_mod
    from policyd.cli import kubectl_plugin

    _ensure_registered()
    entry = kubectl_plugin.main if program == "kubectl-policyd" else app_mod.main
    args = tuple(str(a) for a in argv)
    out, err = io.StringIO(), io.StringIO()
    code: int
    hung = False
    with contextlib.ExitStack() as stack:
        _stub_starts(stack)
        stack.enter_context(_kept_logging())
        stack.enter_context(mock.patch.object(sys, "argv", [program, *args]))
        stack.enter_context(mock.patch.object(tempfile, "tempdir",
                                              str(crash_dir) if crash_dir else None))
        stack.enter_context(mock.patch.dict("os.environ", {"GITHUB_ACTIONS": ""}))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        try:
            with _alarm(hang_seconds):
                entry()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Accepted:
            code = 0
        except Hang:
            code, hung = -1, True
    return Outcome(args, code, out.getvalue(), err.getvalue(), hung,
                   _crash_report(err.getvalue()))


def violations(outcome: Outcome, names: list[str]) -> list[str]:
    """What breaks the CLI's contract for input files; empty when the outcome is fine.

    Exit 0, 1 or 2 only; never "internal error", a traceback or a raw ESC (a name
    from a file must not drive the terminal); on exit 2 the first
    line of stderr names the input that is wrong: one of `names` (input files by path
    or by name, or the NAMESPACE/NAME given to --pod)."""
    bad = []
    if outcome.hung:
        bad.append("hang")
    elif outcome.code not in ALLOWED_EXITS:
        bad.append(f"exit {outcome.code}")
    for stream, text in (("stderr", outcome.stderr), ("stdout", outcome.stdout)):
        if "Traceback (most recent call last)" in text:
            bad.append(f"traceback on {stream}")
    for stream, text in (("stderr", outcome.stderr), ("stdout", outcome.stdout)):
        if "\x1b" in text:
            bad.append(f"raw ESC on {stream}")
    if "internal error" in outcome.stderr:
        bad.append("'internal error' on stderr")
    if outcome.code == 2:
        first = outcome.stderr.lstrip("\n").split("\n", 1)[0]
        if not first.strip():
            bad.append("exit 2 with nothing on stderr")
        elif not any(n in first for n in names):
            bad.append(f"exit 2 but the first stderr line names no input file: {first!r}")
    return bad


# ---------------------------------------------------------------------------------
# targets: one file role of one command


@dataclass(frozen=True)
class Target:
    """One file role: `argv(dir, file)` is the command line using `file` in that role
    (every other input valid; helper files are written into `dir`); `example()` is the
    text of a valid file for the role."""

    name: str
    kind: str
    argv: Callable[[Path, Path], list[str | Path]]
    example: Callable[[], str]
    program: str = "policyd"


def _read(path: Path) -> Callable[[], str]:
    """The text of a repository example, its relative paths made absolute (the copy
    lives in a temporary directory)."""
    def text() -> str:
        out = path.read_text().replace("- ../../policies\n", f"- {POLICIES}\n")
        out = out.replace("- ../policies\n", f"- {POLICIES}\n")
        return out.replace("- ../", f"- {POLICIES}/")
    return text


def _demo_pod(name: str) -> str:
    docs = (DEMO / "pods.yaml").read_text().split("\n---\n")
    return next(d for d in docs if f"name: {name}\n" in d) + "\n"


METRIC_POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: latency}
spec:
  pluginName: Latency
  weight: 10
  scores:
    - id: latency
      weight: 1
      normalize: minmax
      metric: {name: latency_ms, prefer: lowest, missing: worst}
"""
METRICS_EXAMPLE = """\
latency_ms: {node-a1: 30, node-a2: 12.5, node-b1: 5, node-b2: "7"}
load: {node-a1: 0.5}
"""
BARE_PROFILE = "apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
KUBE_SCHEDULER_CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
profiles:
  - schedulerName: default-scheduler
    plugins:
      score:
        disabled: [{name: ImageLocality}]
"""


def _helper(dir_: Path, name: str, text: str) -> Path:
    path = dir_ / name
    if not path.exists():
        path.write_text(text)
    return path


def _profile_using(dir_: Path, policy: Path) -> Path:
    return _helper(dir_, "profile-using-policy.yaml",
                   "apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
                   f"policies: [{str(policy)!r}]\nprofiles:\n- schedulerName: policyd\n")


def _test_using(dir_: Path, policy: Path) -> Path:
    text = (POLICIES / "tests" / "low-latency.test.yaml").read_text()
    return _helper(dir_, "policytest-using-policy.yaml",
                   text.replace("../low-latency.yaml", str(policy)))


def _demo_dir(dir_: Path, file: Path, role: str) -> Path:
    d = dir_ / "demo-dir"
    d.mkdir(exist_ok=True)
    for name in ("cluster.yaml", "pods.yaml", "profile.yaml"):
        link = d / name
        if not link.is_symlink():
            link.symlink_to(file if name == role else DEMO / name)
    return d


def _with_metrics(dir_: Path, metrics: Path, *rest: str | Path) -> list[str | Path]:
    policy = _helper(dir_, "metric-policy.yaml", METRIC_POLICY)
    return [*rest, *CLUSTER, *DEMO_PODS, "--policies", policy, "--metrics", metrics]


CLUSTER: list[str | Path] = ["--cluster", DEMO / "cluster.yaml"]
DEMO_PODS: list[str | Path] = ["--pods", DEMO / "pods.yaml"]
POD = ["--pod", "shop/orders-api"]
LATENCY = POLICIES / "low-latency.yaml"

def _t(name: str, kind: str, argv: Callable[[Path, Path], list[str | Path]],
       example: Callable[[], str]) -> Target:
    return Target(name, kind, argv, example)


TARGETS: dict[str, Target] = {t.name: t for t in [
    # SchedulingPolicy files, through every command that loads policies
    _t("lint", "policy", lambda d, f: ["lint", f], _read(LATENCY)),
    _t("lint-dir", "policy", lambda d, f: ["lint", d], _read(LATENCY)),
    _t("check-config-policy", "policy",
       lambda d, f: ["check-config", _profile_using(d, f)], _read(LATENCY)),
    _t("simulate-policies", "policy",
       lambda d, f: ["simulate", *CLUSTER, "--policies", f], _read(LATENCY)),
    _t("explain-policies", "policy",
       lambda d, f: ["explain", *CLUSTER, *DEMO_PODS, *POD, "--policies", f], _read(LATENCY)),
    _t("test-policy", "policy", lambda d, f: ["test", _test_using(d, f)], _read(LATENCY)),
    _t("run-policies", "policy",
       lambda d, f: ["run", "--config", _helper(d, "bare-profile.yaml", BARE_PROFILE),
                     "--policies", f], _read(LATENCY)),
    # PolicydConfiguration profiles
    _t("check-config", "profile", lambda d, f: ["check-config", f], _read(EXAMPLE_PROFILE)),
    _t("simulate-config", "profile",
       lambda d, f: ["simulate", *CLUSTER, "--config", f], _read(EXAMPLE_PROFILE)),
    _t("explain-config", "profile",
       lambda d, f: ["explain", *CLUSTER, *DEMO_PODS, *POD, "--config", f],
       _read(EXAMPLE_PROFILE)),
    _t("run-config", "profile", lambda d, f: ["run", "--config", f], _read(EXAMPLE_PROFILE)),
    # cluster snapshots
    _t("simulate-cluster", "snapshot", lambda d, f: ["simulate", "--cluster", f],
       _read(DEMO / "cluster.yaml")),
    _t("explain-cluster", "snapshot",
       lambda d, f: ["explain", "--cluster", f, *DEMO_PODS, *POD], _read(DEMO / "cluster.yaml")),
    _t("dev-up-load", "snapshot", lambda d, f: ["dev", "up", "--load", f],
       _read(DEMO / "cluster.yaml")),
    _t("demo-cluster", "snapshot",
       lambda d, f: ["demo", "--dir", _demo_dir(d, f, "cluster.yaml")],
       _read(DEMO / "cluster.yaml")),
    # pod files
    _t("simulate-pods", "pods", lambda d, f: ["simulate", *CLUSTER, "--pods", f],
       _read(DEMO / "pods.yaml")),
    _t("explain-pods", "pods", lambda d, f: ["explain", *CLUSTER, "--pods", f, *POD],
       _read(DEMO / "pods.yaml")),
    _t("explain-pod-file", "pod", lambda d, f: ["explain", *CLUSTER, "--pod", f],
       lambda: _demo_pod("orders-api")),
    _t("demo-pods", "pods", lambda d, f: ["demo", "--dir", _demo_dir(d, f, "pods.yaml")],
       _read(DEMO / "pods.yaml")),
    # PolicyTest files
    _t("test", "policytest", lambda d, f: ["test", f],
       _read(POLICIES / "tests" / "low-latency.test.yaml")),
    # --metrics files
    _t("simulate-metrics", "metrics", lambda d, f: _with_metrics(d, f, "simulate"),
       lambda: METRICS_EXAMPLE),
    _t("explain-metrics", "metrics", lambda d, f: _with_metrics(d, f, "explain", *POD),
       lambda: METRICS_EXAMPLE),
    # the KubeSchedulerConfiguration of the comparison peer
    _t("dev-up-scheduler-config", "kube-scheduler-config",
       lambda d, f: ["dev", "up", "--scheduler-config", f], lambda: KUBE_SCHEDULER_CONFIG),
]}

JMESPATH_POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: racks}
spec:
  pluginName: Racks
  appliesTo:
    condition: "spec.priority == null || spec.priority > `-1`"
  filters:
    - id: same-rack
      message: node(s) are not in the pod's rack
      jmespath: "label(node, 'myorg.io/rack') == annotation(pod, 'myorg.io/rack')"
  scores:
    - id: cores
      weight: 10
      normalize: max
      jmespath: "quantity(node.status.allocatable.cpu)"
"""

# Valid files of each kind, the starting points of the mutation test.
SEEDS: dict[str, list[Callable[[], str]]] = {
    "policy": [*(_read(p) for p in sorted(POLICIES.glob("*.yaml"))), lambda: JMESPATH_POLICY,
               lambda: METRIC_POLICY],
    "profile": [_read(EXAMPLE_PROFILE), _read(DEMO / "profile.yaml")],
    "snapshot": [_read(DEMO / "cluster.yaml")],
    "pods": [_read(DEMO / "pods.yaml")],
    "pod": [lambda: _demo_pod("orders-api"), lambda: _demo_pod("payments-db")],
    "policytest": [_read(p) for p in sorted((POLICIES / "tests").glob("*.yaml"))],
    "metrics": [lambda: METRICS_EXAMPLE],
    "kube-scheduler-config": [lambda: KUBE_SCHEDULER_CONFIG],
}


def run_target(target: Target, dir_: Path, file: Path, extra: list[str] | None = None,
               hang_seconds: float = HANG_SECONDS) -> tuple[Outcome, list[str]]:
    """Run `target` with `file` (already written, inside `dir_`) in its role; `extra`
    arguments go last. Returns the outcome and its violations of the contract."""
    argv = [*target.argv(dir_, file), *(extra or [])]
    outcome = run_cli(*argv, crash_dir=dir_, hang_seconds=hang_seconds,
                      program=target.program)
    files = [file, *(a for a in argv if isinstance(a, Path))]
    names = [*(str(f) for f in files), *(f.name for f in files)]
    names += [str(b) for a, b in itertools.pairwise(argv) if a == "--pod"]
    return outcome, violations(outcome, names)
