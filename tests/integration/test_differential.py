"""policyd against the real kube-scheduler (v1.36, built by the project) on generated cases.

For every case kube-scheduler, running a profile limited to the plugins policyd
implements, places the pod under test on the local API server; policyd's default
profile places the same pod in the same cluster read back from that API server. Both
must find it schedulable or both not; when not, the FailedScheduling messages must be
identical (so the reason counts are too); when it is, kube-scheduler's node must be
feasible for policyd, and policyd's node must be accepted by kube-scheduler when a copy
of the pod is pinned to it (ties may make the chosen nodes differ). When two or more
nodes fit, every plugin's weighted score on every node, read from kube-scheduler's log,
must be policyd's, on both of its paths (the runner describes each check).

The score comparison must not switch itself off: the run counts how far each case was
compared (its FailedScheduling message, its verdict only, or its scores) and fails
when fewer than 90% (`runner.MIN_SCORE_COMPARED`) of the pods bound with two or more
feasible nodes had their scores compared (kube-scheduler's score lines not found in
its log: a changed log format, a lost flag, a log that is not flushed), or when a run
of the default size (or larger) score-compared fewer than 100 cases
(`runner.MIN_SCORE_COMPARED_CASES`; a replay of a few cases is not held to it).
Likewise NodeDeclaredFeatures: such a run fails when fewer than
`runner.MIN_FEATURE_CASES` pods needed a declared feature or fewer than
`runner.MIN_FEATURE_REJECTIONS` FailedScheduling messages gave its reason.

Sequence cases (`test_sequences_match_kube_scheduler`, `differential.sequences`):
pods queued together, with priorities, for a second kube-scheduler started once they
all exist; the order of its first tries must be policyd's queue order up to pods of
equal priority, and each try must be policyd's decision on the cluster the earlier
tries left; then the same for a `policyd run` daemon started once they exist (with
POLICYD_DIFF_DAEMON=1). A run of the default size fails when no sequence had its order
decide who fits.

Environment:
  POLICYD_DIFF_CASES  number of cases (default 400: about 150 score-compared; thousands
                      on demand)
  POLICYD_DIFF_SEED   seed of the run (default: random, printed on failure)
  POLICYD_DIFF_FIRST  index of the first case (default 0), to replay part of a run
  POLICYD_DIFF_BATCH  cases on the API server at once (default 24)
  POLICYD_DIFF_PROBES pinned copies per placed pod, each judging one node (default 2)
  POLICYD_DIFF_DAEMON 1 (default): also compare a running `policyd run` daemon; 0: only
                      the in-process engine
  POLICYD_DIFF_SEQUENCES        number of sequence cases (default 32)
  POLICYD_DIFF_SEQUENCE_FIRST   index of the first sequence case (default 0)
  POLICYD_DIFF_SEQUENCE_BATCH   sequence cases per kube-scheduler started (default 16)
  POLICYD_DIFF_VOLUME_CASES     number of volume cases (default 72)
  POLICYD_DIFF_VOLUME_FIRST     index of the first volume case (default 0)
  POLICYD_DIFF_VOLUME_BATCH     volume cases on the API server at once (default 24)

Volume cases (`test_volume_cases_match_kube_scheduler`, `tests.gen.volumes`,
`differential.volumes`): the same comparison with StorageClasses, PVs, claims and
CSINodes around the pod (static and dynamic provisioning, zones, CSI limits,
ReadWriteOncePod, bound and unbound claims, PV affinities with matchFields or several
terms, Released/Failed PVs, claims pinned by volumeName, Lost and Terminating claims,
inline disks, ephemeral volumes whose claim is taken), kube-scheduler running its four
volume plugins, the real PV controller (kube-controller-manager) and a provisioner completing
the bindings; `policyd run` places a twin of each case. A run of the default size fails
when a kind of volume case occurred fewer than 5 times.

A failure prints the seed and a one-line command replaying the failing batch.
"""

from __future__ import annotations

import functools
import os
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from policyd.daemon.run import Daemon, RunOptions, connect, load_config
from policyd.devcluster import ControlPlane
from policyd.kube.client import ConnectionSettings, KubeClient
from tests.e2e.provisioner import Provisioner
from tests.gen.differential import gen_case, gen_sequence_case
from tests.gen.preemption import gen_preemption_case
from tests.gen.volumes import DRIVER, VOLUME_KINDS, gen_volume_case
from tests.integration.differential.preemption import (
    AFTER_NOMINATION,
    NOMINATED,
    PreemptionOutcome,
    PreemptionRunner,
)
from tests.integration.differential.report import fail_if_any
from tests.integration.differential.runner import (
    MIN_SCORE_COMPARED_CASES,
    Outcome,
    Runner,
    Tally,
    kube_scheduler_config,
    start_kube_scheduler,
)
from tests.integration.differential.sequences import (
    BACKOFF_SECONDS,
    ORDER_SENSITIVE,
    SequenceOutcome,
    SequenceRunner,
)


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    return int(raw) if raw.strip() else default


DEFAULT_CASES = 400
CASES = _env_int("POLICYD_DIFF_CASES", DEFAULT_CASES)
FIRST = _env_int("POLICYD_DIFF_FIRST", 0)
BATCH = max(1, _env_int("POLICYD_DIFF_BATCH", 24))
PROBES = _env_int("POLICYD_DIFF_PROBES", 2)
DAEMON = _env_int("POLICYD_DIFF_DAEMON", 1) != 0
DAEMON_SCHEDULER = "policyd-differential-run"
SEED = _env_int("POLICYD_DIFF_SEED", random.SystemRandom().randrange(1, 10**6))
DEFAULT_SEQUENCES = 32
SEQUENCES = _env_int("POLICYD_DIFF_SEQUENCES", DEFAULT_SEQUENCES)
SEQUENCE_FIRST = _env_int("POLICYD_DIFF_SEQUENCE_FIRST", 0)
SEQUENCE_BATCH = max(1, _env_int("POLICYD_DIFF_SEQUENCE_BATCH", 16))
DEFAULT_VOLUME_CASES = 72
VOLUME_CASES = _env_int("POLICYD_DIFF_VOLUME_CASES", DEFAULT_VOLUME_CASES)
VOLUME_FIRST = _env_int("POLICYD_DIFF_VOLUME_FIRST", 0)
VOLUME_BATCH = max(1, _env_int("POLICYD_DIFF_VOLUME_BATCH", 24))
# A run of the default size must have had each kind of volume case this often.
MIN_PER_VOLUME_KIND = 5
DEFAULT_PREEMPTION_CASES = 48
PREEMPTION_CASES = _env_int("POLICYD_DIFF_PREEMPTION_CASES", DEFAULT_PREEMPTION_CASES)
PREEMPTION_FIRST = _env_int("POLICYD_DIFF_PREEMPTION_FIRST", 0)
PREEMPTION_BATCH = max(1, _env_int("POLICYD_DIFF_PREEMPTION_BATCH", 16))
# A run of the default size must have had this many preemptors nominated by both, and
# this many steps that met an earlier preemptor's nomination.
MIN_NOMINATED = 10
MIN_AFTER_NOMINATION = 5


@pytest.fixture(scope="module")
def runner(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Runner]:
    workdir = tmp_path_factory.mktemp("differential")
    client = KubeClient.connect(ConnectionSettings(
        kubeconfig=str(control_plane.kubeconfig_path), qps=2000, burst=2000, timeout=15))
    scheduler = start_kube_scheduler(control_plane, kube_scheduler_config(),
                                     workdir / "kube-scheduler.json")
    daemon = _start_daemon(control_plane, workdir) if DAEMON else None
    r = Runner(client, seed=SEED, probes=PROBES, score_log=scheduler.log_path,
               daemon_scheduler=DAEMON_SCHEDULER if DAEMON else None)
    try:
        yield r
    finally:
        r.close()
        if daemon is not None:
            daemon.shutdown()
        scheduler.stop()
        client.close()


def _start_daemon(control_plane: ControlPlane, workdir: Path,
                  scheduler: str = DAEMON_SCHEDULER, *, backoff: int | None = None,
                  verbosity: int = 0) -> Daemon:
    """`policyd run` with the default profile, in this process, without leader election;
    `backoff` sets both podInitialBackoffSeconds and podMaxBackoffSeconds."""
    profile = workdir / f"{scheduler}.yaml"
    profile.write_text(
        "apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
        "leaderElection:\n  leaderElect: false\n"
        + (f"podInitialBackoffSeconds: {backoff}\npodMaxBackoffSeconds: {backoff}\n"
           if backoff else "")
        + f"profiles:\n- schedulerName: {scheduler}\n")
    options = RunOptions(config=profile, kubeconfig=str(control_plane.kubeconfig_path),
                         metrics_bind_address="127.0.0.1:0", secure_port=0,
                         shutdown_grace=5.0, verbosity=verbosity)
    loaded = load_config(options)
    daemon = Daemon(options, loaded, connect(options, loaded.settings))
    daemon.start()
    deadline = time.monotonic() + 30
    while not daemon.synced():
        if time.monotonic() > deadline:
            daemon.shutdown()
            raise TimeoutError("policyd run did not sync its caches in 30s")
        time.sleep(0.05)
    return daemon


def _replay(first: int, count: int) -> str:
    return (f"POLICYD_DIFF_SEED={SEED} POLICYD_DIFF_FIRST={first} "
            f"POLICYD_DIFF_CASES={count} POLICYD_DIFF_BATCH={BATCH} "
            ".venv/bin/pytest tests/integration/test_differential.py")


# About 0.25 s of this process's CPU per case with the daemon (100 s for 400 cases on
# the 2-core machine), more in wall time when other work shares the cores; thousands
# on demand need more than the suite's default per-test timeout.
@pytest.mark.timeout(max(600, int(CASES * 1.5)))
def test_policyd_matches_kube_scheduler(runner: Runner,
                                       terminal: Callable[[str], None]) -> None:
    token = f"{SEED:x}"[-5:]
    # Shown by pytest if anything below raises.
    print(f"seed {SEED}; replay the run: {_replay(FIRST, CASES)}")
    started = time.monotonic()
    failures: list[tuple[int, Outcome]] = []
    tally = Tally()
    for first in range(FIRST, FIRST + CASES, BATCH):
        indexes = range(first, min(first + BATCH, FIRST + CASES))
        cases = [gen_case(SEED, i, f"d{token}-{i}") for i in indexes]
        for outcome in runner.run_batch(cases):
            tally.add(outcome)
            if not outcome.ok:
                failures.append((first, outcome))
    elapsed = time.monotonic() - started
    summary = f"{CASES} cases (seed {SEED}) in {elapsed:.1f}s: {tally.summary()}"
    print(summary)
    terminal(f"differential: {summary}")
    report = []
    # A replay of a few cases cannot have a hundred; a run of the default size must.
    switched_off = tally.too_few_score_compared(
        MIN_SCORE_COMPARED_CASES if CASES >= DEFAULT_CASES else 0)
    if switched_off is not None:
        report.append(f"{switched_off}\n{summary}")
    not_exercised = tally.too_few_feature_cases() if CASES >= DEFAULT_CASES else None
    if not_exercised is not None:
        report.append(f"{not_exercised}\n{summary}")
    fail_if_any(report, summary,
                [(first, o.case.index, o) for first, o in failures],
                _replay, BATCH)


def _replay_sequences(first: int, count: int) -> str:
    return (f"POLICYD_DIFF_SEED={SEED} POLICYD_DIFF_SEQUENCE_FIRST={first} "
            f"POLICYD_DIFF_SEQUENCES={count} POLICYD_DIFF_SEQUENCE_BATCH={SEQUENCE_BATCH} "
            ".venv/bin/pytest tests/integration/test_differential.py::"
            "test_sequences_match_kube_scheduler")


@pytest.mark.timeout(max(300, SEQUENCES * 3))
def test_sequences_match_kube_scheduler(runner: Runner, control_plane: ControlPlane,
                                        tmp_path: Path,
                                        terminal: Callable[[str], None]) -> None:
    """Pods queued together: the same order of first tries, and each try the same as
    a single-pod case's, on the cluster the earlier tries left (`sequences`)."""
    token = f"{SEED:x}"[-5:]
    print(f"seed {SEED}; replay the run: {_replay_sequences(SEQUENCE_FIRST, SEQUENCES)}")
    sequences = SequenceRunner(
        runner, control_plane, tmp_path, seed=SEED,
        start_daemon=functools.partial(_start_daemon, control_plane, tmp_path,
                                       backoff=BACKOFF_SECONDS, verbosity=2)
        if DAEMON else None)
    started = time.monotonic()
    failures: list[tuple[int, SequenceOutcome]] = []
    tally = Tally()
    last = SEQUENCE_FIRST + SEQUENCES
    for first in range(SEQUENCE_FIRST, last, SEQUENCE_BATCH):
        cases = [gen_sequence_case(SEED, i, f"q{token}-{i}")
                 for i in range(first, min(first + SEQUENCE_BATCH, last))]
        for outcome in sequences.run_batch(cases):
            outcome.count(tally)
            if not outcome.ok:
                failures.append((first, outcome))
    elapsed = time.monotonic() - started
    summary = f"{SEQUENCES} sequence cases (seed {SEED}) in {elapsed:.1f}s: {tally.summary()}"
    print(summary)
    terminal(f"differential: {summary}")
    report = []
    switched_off = tally.too_few_score_compared()
    if switched_off is not None:
        report.append(f"{switched_off}\n{summary}")
    if SEQUENCES >= DEFAULT_SEQUENCES and not tally.sequences.get(ORDER_SENSITIVE):
        # Sequences where order changes nothing would compare the order for nothing.
        report.append(f"no sequence where the queue order decides who fits: {summary}")
    fail_if_any(report, summary,
                [(first, o.case.index, o) for first, o in failures],
                _replay_sequences, SEQUENCE_BATCH)


def _replay_volumes(first: int, count: int) -> str:
    return (f"POLICYD_DIFF_SEED={SEED} POLICYD_DIFF_VOLUME_FIRST={first} "
            f"POLICYD_DIFF_VOLUME_CASES={count} POLICYD_DIFF_VOLUME_BATCH={VOLUME_BATCH} "
            ".venv/bin/pytest tests/integration/test_differential.py::"
            "test_volume_cases_match_kube_scheduler")


# About 2 s of wall time per case (twins included) with kube-controller-manager's client at
# its default 20 requests/s, which the PV controller's bindings and events use up.
@pytest.mark.timeout(max(600, VOLUME_CASES * 6))
def test_volume_cases_match_kube_scheduler(runner: Runner,
                                           terminal: Callable[[str], None]) -> None:
    """Pods with claims (`tests.gen.volumes`) on clusters with StorageClasses, PVs,
    claims the real PV controller bound and CSINodes: the same verdict, message and
    scores as kube-scheduler with its four volume plugins, whose bindings the PV
    controller and a provisioner complete (`differential.volumes`); with the daemon,
    `policyd run`'s decision on each case's twin too."""
    token = f"{SEED:x}"[-5:]
    print(f"seed {SEED}; replay the run: {_replay_volumes(VOLUME_FIRST, VOLUME_CASES)}")
    started = time.monotonic()
    failures: list[tuple[int, Outcome]] = []
    tally = Tally()
    last = VOLUME_FIRST + VOLUME_CASES
    with Provisioner(runner.client, DRIVER) as provisioner:
        for first in range(VOLUME_FIRST, last, VOLUME_BATCH):
            cases = [gen_volume_case(SEED, i, f"v{token}-{i}", twin=(
                         f"w{token}-{i}", DAEMON_SCHEDULER) if DAEMON else None)
                     for i in range(first, min(first + VOLUME_BATCH, last))]
            for outcome in runner.run_batch(cases):
                tally.add(outcome)
                if not outcome.ok:
                    failures.append((first, outcome))
    elapsed = time.monotonic() - started
    summary = (f"{VOLUME_CASES} volume cases (seed {SEED}) in {elapsed:.1f}s: "
               f"{tally.summary()}; {len(provisioner.provisioned)} claims provisioned")
    print(summary)
    terminal(f"differential: {summary}")
    report = []
    if provisioner.errors:
        report.append(f"the provisioner failed: {provisioner.errors[:5]}")
    switched_off = tally.too_few_score_compared()
    if switched_off is not None:
        report.append(f"{switched_off}\n{summary}")
    rare = [k for k in VOLUME_KINDS if tally.volume_kinds.get(k, 0) < MIN_PER_VOLUME_KIND]
    if VOLUME_CASES >= DEFAULT_VOLUME_CASES and rare:
        report.append(f"volume kinds in fewer than {MIN_PER_VOLUME_KIND} cases: {rare} "
                      f"(tests/gen/volumes.py no longer draws them often enough): {summary}")
    fail_if_any(report, summary,
                [(first, o.case.index, o) for first, o in failures],
                _replay_volumes, VOLUME_BATCH)


def _replay_preemption(first: int, count: int) -> str:
    return (f"POLICYD_DIFF_SEED={SEED} POLICYD_DIFF_PREEMPTION_FIRST={first} "
            f"POLICYD_DIFF_PREEMPTION_CASES={count} "
            f"POLICYD_DIFF_PREEMPTION_BATCH={PREEMPTION_BATCH} .venv/bin/pytest "
            "tests/integration/test_differential.py::test_preemption_cases_match_kube_scheduler")


@pytest.mark.timeout(max(300, PREEMPTION_CASES * 4))
def test_preemption_cases_match_kube_scheduler(runner: Runner,
                                               terminal: Callable[[str], None]) -> None:
    """Full nodes of pods with distinct priorities, budgets, and one to three preemptors
    in a row (`tests.gen.preemption`, `differential.preemption`): each preemptor's
    first try gets the same message, the same nominated node and the same victims from
    policyd as from kube-scheduler's default profile, on the cluster the earlier
    preemptors left (their nominations and terminating victims included)."""
    token = f"{SEED:x}"[-5:]
    print(f"seed {SEED}; replay the run: "
          f"{_replay_preemption(PREEMPTION_FIRST, PREEMPTION_CASES)}")
    assert runner.score_log is not None
    preemption = PreemptionRunner(runner, runner.score_log)
    started = time.monotonic()
    failures: list[tuple[int, PreemptionOutcome]] = []
    tally = Tally()
    last = PREEMPTION_FIRST + PREEMPTION_CASES
    for first in range(PREEMPTION_FIRST, last, PREEMPTION_BATCH):
        cases = [gen_preemption_case(SEED, i, f"x{token}-{i}")
                 for i in range(first, min(first + PREEMPTION_BATCH, last))]
        for outcome in preemption.run_batch(cases):
            outcome.count(tally)
            if not outcome.ok:
                failures.append((first, outcome))
    elapsed = time.monotonic() - started
    summary = (f"{PREEMPTION_CASES} preemption cases (seed {SEED}) in {elapsed:.1f}s: "
               f"{tally.summary()}")
    print(summary)
    terminal(f"differential: {summary}")
    report = []
    if PREEMPTION_CASES >= DEFAULT_PREEMPTION_CASES and (
            tally.preemption.get(NOMINATED, 0) < MIN_NOMINATED
            or tally.preemption.get(AFTER_NOMINATION, 0) < MIN_AFTER_NOMINATION):
        report.append(f"too few preemptions to compare (at least {MIN_NOMINATED} nominated "
                      f"and {MIN_AFTER_NOMINATION} steps after a nomination): {summary}")
    fail_if_any(report, summary,
                [(first, o.case.index, o) for first, o in failures],
                _replay_preemption, PREEMPTION_BATCH)
