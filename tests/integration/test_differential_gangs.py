"""Gangs against the real kube-scheduler (v1.36.3, built by the project), both with
GenericWorkload and GangScheduling on, as is the API server (issue 30's proof).

Generated cases (`tests.gen.gangs`: two to four nodes; one to three pod groups of one
to six pods: gangs whose minCount is their size, gangs that need fewer, basic-policy
groups; per-pod CPU and memory requests; plain pods between the groups) are run by
kube-scheduler and by a `policyd run` daemon in this process, each on its own copy of
the case, at the same time (`differential.gangs`, which says how a step settles and
how nodes and score ties are judged). The same pods must end bound or held, with the
same FailedScheduling messages and the same PodGroupScheduled conditions.

Not compared: the Permit timeout (5 minutes; it never matters in the group cycle),
which of two gangs pending at once goes first (the order of two watches' events in
kube-scheduler; tests/e2e/test_gang_scheduling.py checks that neither deadlocks), and
preemption for a gang (members never preempt here: `tests.gen.gangs` says why).

The comparison must not switch itself off: a run of the default size fails when
kube-scheduler scheduled fewer than MIN_SCHEDULED groups, held fewer than MIN_HELD
gangs, or told fewer than MIN_WAITING members that the gang waits for its quorum.

Environment:
  POLICYD_DIFF_GANG_CASES  number of cases (default 48: under a minute once the
                           control plane is up)
  POLICYD_DIFF_GANG_FIRST  index of the first case (default 0), to replay part of a run
  POLICYD_DIFF_GANG_BATCH  cases on the API server at once (default 8)
  POLICYD_DIFF_SEED        seed of the run (default: random, printed on failure)
  POLICYD_DIFF_GANG_KUBE_LOG  a file to keep kube-scheduler's log in (at -v=4)

A failure prints the seed and a one-line command replaying the failing case.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from collections.abc import Callable, Iterator

import pytest

from policyd.cli.options import feature_gate_settings
from policyd.devcluster import ControlPlane
from policyd.kube.client import ConnectionSettings, KubeClient
from tests.e2e.helpers import DaemonFactory
from tests.gen.differential import SCHEDULER_NAME
from tests.gen.gangs import gen_gang_case, priority_classes
from tests.integration.differential.gangs import (
    HELD,
    SCHEDULED,
    GangOutcome,
    GangRunner,
    GangTally,
)
from tests.integration.differential.report import fail_if_any
from tests.integration.differential.runner import Runner
from tests.integration.test_differential import _env_int

GATES = {"GenericWorkload": True, "GangScheduling": True}
DEFAULT_CASES = 48
CASES = _env_int("POLICYD_DIFF_GANG_CASES", DEFAULT_CASES)
FIRST = _env_int("POLICYD_DIFF_GANG_FIRST", 0)
BATCH = max(1, _env_int("POLICYD_DIFF_GANG_BATCH", 8))
SEED = _env_int("POLICYD_DIFF_SEED", random.SystemRandom().randrange(1, 10**6))
DAEMON_SCHEDULER = "policyd-differential-gangs"
# Keep kube-scheduler's log (at -v=4: each pod group cycle's pods) there, to see why.
KUBE_LOG = os.environ.get("POLICYD_DIFF_GANG_KUBE_LOG", "")
KUBE_LOG_LEVEL = 4
# Four seeds of 48 cases: 58 to 74 groups scheduled, 12 to 22 gangs held, 14 to 43
# members told they wait for the quorum: the floors leave room below the lowest.
MIN_SCHEDULED = 30
MIN_HELD = 6
MIN_WAITING = 7


@pytest.fixture(scope="module")
def gang_runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GangRunner]:
    workdir = tmp_path_factory.mktemp("differential-gangs")
    with ControlPlane(feature_gates=GATES) as cp:
        client = KubeClient.connect(ConnectionSettings(
            kubeconfig=str(cp.kubeconfig_path), qps=2000, burst=2000, timeout=15))
        config = workdir / "kube-scheduler.json"
        config.write_text(json.dumps({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"qps": 1000, "burst": 1000},
            # The default profile (GangScheduling on with its gates), every node scored
            # as policyd always does.
            "profiles": [{"schedulerName": SCHEDULER_NAME, "percentageOfNodesToScore": 100}],
        }))
        scheduler = cp.start_kube_scheduler(
            config, extra_args=[f"--v={KUBE_LOG_LEVEL}"] if KUBE_LOG else [])
        daemons = DaemonFactory(cp.kubeconfig_path, workdir)
        profile = workdir / "policyd.yaml"
        profile.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
                           "leaderElection:\n  leaderElect: false\n"
                           f"profiles:\n- schedulerName: {DAEMON_SCHEDULER}\n")
        r = Runner(client, seed=SEED, probes=0, daemon_scheduler=DAEMON_SCHEDULER)
        try:
            daemons.start(profile, verbosity=0,
                          feature_gates=feature_gate_settings(
                              [f"{k}={str(v).lower()}" for k, v in GATES.items()]))
            for pc in priority_classes():
                r.ensure("/apis/scheduling.k8s.io/v1/priorityclasses", pc)
            yield GangRunner(r)
        finally:
            r.close()
            daemons.stop_all()
            scheduler.stop()
            if KUBE_LOG:
                shutil.copyfile(scheduler.log_path, KUBE_LOG)
            client.close()


def _replay(first: int, count: int) -> str:
    return (f"POLICYD_DIFF_SEED={SEED} POLICYD_DIFF_GANG_FIRST={first} "
            f"POLICYD_DIFF_GANG_CASES={count} POLICYD_DIFF_GANG_BATCH={BATCH} "
            ".venv/bin/pytest tests/integration/test_differential_gangs.py")


@pytest.mark.timeout(max(600, CASES * 20))
def test_gangs_match_kube_scheduler(gang_runner: GangRunner,
                                    terminal: Callable[[str], None]) -> None:
    token = f"{SEED:x}"[-5:]
    print(f"seed {SEED}; replay the run: {_replay(FIRST, CASES)}")
    started = time.monotonic()
    failures: list[tuple[int, int, GangOutcome]] = []
    tally = GangTally()
    last = FIRST + CASES
    for first in range(FIRST, last, BATCH):
        pairs = [(gen_gang_case(SEED, i, f"k{token}-{i}", SCHEDULER_NAME),
                  gen_gang_case(SEED, i, f"d{token}-{i}", DAEMON_SCHEDULER))
                 for i in range(first, min(first + BATCH, last))]
        for outcome in gang_runner.run_batch(pairs):
            tally.add(outcome)
            if not outcome.ok:
                failures.append((first, outcome.case.index, outcome))
            elif outcome.tie_dependent:
                print(outcome.describe())
    summary = (f"{CASES} gang cases (seed {SEED}) in {time.monotonic() - started:.1f}s: "
               f"{tally.summary()}")
    print(summary)
    terminal(f"differential: {summary}")
    problems = []
    if CASES >= DEFAULT_CASES and (tally.count(SCHEDULED) < MIN_SCHEDULED
                                   or tally.count(HELD) < MIN_HELD
                                   or tally.waiting < MIN_WAITING):
        problems.append(
            f"too few groups scheduled (at least {MIN_SCHEDULED} must be) or held (at "
            f"least {MIN_HELD}), or too few members told they wait for a quorum (at "
            f"least {MIN_WAITING}): does tests/gen/gangs.py still draw them? {summary}")
    fail_if_any(problems, summary, failures, _replay, BATCH)


def test_the_cases_are_reproducible() -> None:
    """A replay line names a case by (seed, index): the same draw every time, and the
    two copies differ only in names."""
    a = gen_gang_case(7, 3, "ka", "x")
    b = gen_gang_case(7, 3, "ka", "x")
    twin = gen_gang_case(7, 3, "da", "y")
    assert a == b
    assert a.notes == twin.notes and a.pod_names() == twin.pod_names()
    assert [s.group for s in a.steps] != [s.group for s in twin.steps]  # namespaces

