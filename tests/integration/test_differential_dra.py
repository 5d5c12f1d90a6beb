"""policyd's DynamicResources against the real kube-scheduler (v1.36, built by the
project) on generated DRA cases (`tests.gen.dra`: DeviceClasses with CEL selectors,
ResourceSlices of three drivers, per-node, network-attached and partitionable pools,
template and named claims, claims allocated for pods on nodes and shared, taints,
prioritized lists, constraints, consumable capacity, admin access, and claims nothing
can satisfy).

For every case kube-scheduler (the comparison's profile: DynamicResources enabled, as
in policyd's default profile) places the pod under test on the local API server, the
resourceclaim controller of the local kube-controller-manager having made its template
claims; policyd's engine decides on the same cluster read back (its DRA objects read
before kube-scheduler could allocate anything, `differential.dra`). Both must find the
pod schedulable or both not; when not, the FailedScheduling messages must be identical
(PostFilter's part included); when it is, kube-scheduler's node must be feasible for
policyd, the scores must be the same (`runner.compare_scores`), and the devices
kube-scheduler wrote into the claims must be those policyd's DynamicResources allocates
on that node (request, driver, pool, device, admin access, tolerations, consumed
capacity, a share ID or none, and the allocation's node selector). With the daemon,
`policyd run` places a twin of each case (the same scene under another prefix): its
decision is judged as in the volume cases, and the devices it wrote into the twin's
claims must be what the engine allocates on the node it chose.

A case whose pod lost a template claim from its status after the controller had
recorded them all (`DraOutcome.lost`: a race of v1.36's resourceclaim controller, after
which both schedulers wait) is compared on neither side and run once more under new
names; losing it twice fails the test.

The comparison must not switch itself off: a run of the default size fails when a
kind of case (`tests.gen.dra.DRA_KINDS`) was drawn fewer than MIN_PER_KIND times, when
fewer than MIN_DEVICES_COMPARED pods had their devices compared, or when fewer than
MIN_CANNOT_ALLOCATE FailedScheduling messages said that no node could allocate the
claims.

Environment:
  POLICYD_DIFF_DRA_CASES  number of cases (default 96: about 70 s, twice that in all
                          with the control plane's start; 400 take under 5 minutes)
  POLICYD_DIFF_DRA_FIRST  index of the first case (default 0), to replay part of a run
  POLICYD_DIFF_DRA_BATCH  cases on the API server at once (default 16)
  POLICYD_DIFF_SEED       seed of the run (default: random, printed on failure)
  POLICYD_DIFF_DAEMON     1 (default): also compare a running `policyd run` daemon

A failure prints the seed and a one-line command replaying the failing batch.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Sequence

import pytest

from policyd.devcluster import ControlPlane
from policyd.kube.client import ConnectionSettings, KubeClient
from tests.gen.dra import DRA_KINDS, gen_dra_case
from tests.integration.differential.dra import DraOutcome, DraRunner, DraTally
from tests.integration.differential.report import fail_if_any
from tests.integration.differential.runner import (
    Runner,
    kube_scheduler_config,
    start_kube_scheduler,
)
from tests.integration.test_differential import _env_int, _start_daemon

DEFAULT_CASES = 96
CASES = _env_int("POLICYD_DIFF_DRA_CASES", DEFAULT_CASES)
FIRST = _env_int("POLICYD_DIFF_DRA_FIRST", 0)
BATCH = max(1, _env_int("POLICYD_DIFF_DRA_BATCH", 16))
DAEMON = _env_int("POLICYD_DIFF_DAEMON", 1) != 0
DAEMON_SCHEDULER = "policyd-differential-dra"
SEED = _env_int("POLICYD_DIFF_SEED", random.SystemRandom().randrange(1, 10**6))
# A run of the default size must have drawn each kind of case this often (at least six
# in 60 seeds tried), compared the devices of this many bound pods (about 40), and had
# this many messages saying no node could allocate the claims (about 35).
MIN_PER_KIND = 4
MIN_DEVICES_COMPARED = 20
MIN_CANNOT_ALLOCATE = 10


@pytest.fixture(scope="module")
def dra_runner(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[DraRunner]:
    workdir = tmp_path_factory.mktemp("differential-dra")
    client = KubeClient.connect(ConnectionSettings(
        kubeconfig=str(control_plane.kubeconfig_path), qps=2000, burst=2000, timeout=15))
    scheduler = start_kube_scheduler(control_plane, kube_scheduler_config(),
                                     workdir / "kube-scheduler.json")
    daemon = _start_daemon(control_plane, workdir, DAEMON_SCHEDULER) if DAEMON else None
    r = Runner(client, seed=SEED, probes=0, score_log=scheduler.log_path,
               daemon_scheduler=DAEMON_SCHEDULER if DAEMON else None)
    try:
        yield DraRunner(r)
    finally:
        r.close()
        if daemon is not None:
            daemon.shutdown()
        scheduler.stop()
        client.close()


def _replay(first: int, count: int) -> str:
    return (f"POLICYD_DIFF_SEED={SEED} POLICYD_DIFF_DRA_FIRST={first} "
            f"POLICYD_DIFF_DRA_CASES={count} POLICYD_DIFF_DRA_BATCH={BATCH} "
            ".venv/bin/pytest tests/integration/test_differential_dra.py")


@pytest.mark.timeout(max(600, CASES * 8))
def test_dra_cases_match_kube_scheduler(dra_runner: DraRunner,
                                        terminal: Callable[[str], None]) -> None:
    token = f"{SEED:x}"[-5:]
    print(f"seed {SEED}; replay the run: {_replay(FIRST, CASES)}")
    started = time.monotonic()
    failures: list[tuple[int, DraOutcome]] = []
    tally = DraTally()
    last = FIRST + CASES
    again: list[int] = []  # cases whose claim status the controller lost (DraOutcome.lost)
    lost: list[str] = []

    def run(first: int, indexes: Sequence[int], suffix: str = "") -> None:
        cases = [gen_dra_case(SEED, i, f"r{token}-{i}{suffix}", twin=(
                     f"s{token}-{i}{suffix}", DAEMON_SCHEDULER) if DAEMON else None)
                 for i in indexes]
        for outcome in dra_runner.run_batch(cases):
            if outcome.lost and not suffix:
                again.append(outcome.dra.index)
                continue
            if outcome.lost:
                lost.append(f"case {outcome.dra.index}: {outcome.lost}")
                continue
            tally.add(outcome)
            if not outcome.ok:
                failures.append((first, outcome))

    for first in range(FIRST, last, BATCH):
        run(first, range(first, min(first + BATCH, last)))
    for first in range(0, len(again), BATCH):
        run(again[first], again[first:first + BATCH], suffix="-again")
    elapsed = time.monotonic() - started
    summary = f"{CASES} DRA cases (seed {SEED}) in {elapsed:.1f}s: {tally.summary()}"
    if again:
        summary += (f"; cases {again} run again under new names (the resourceclaim "
                    "controller dropped a claim from a pod's status)")
    print(summary)
    terminal(f"differential: {summary}")
    report = []
    switched_off = tally.decisions.too_few_score_compared()
    if switched_off is not None:
        report.append(f"{switched_off}\n{summary}")
    if CASES >= DEFAULT_CASES:
        rare = [k for k in DRA_KINDS if tally.kinds.get(k, 0) < MIN_PER_KIND]
        if rare:
            report.append(f"DRA kinds in fewer than {MIN_PER_KIND} cases: {rare} "
                          f"(tests/gen/dra.py no longer draws them often enough): {summary}")
        if tally.kube_devices < MIN_DEVICES_COMPARED:
            report.append(f"only {tally.kube_devices} bound pods had their devices "
                          f"compared (at least {MIN_DEVICES_COMPARED} must): {summary}")
        if tally.cannot_allocate < MIN_CANNOT_ALLOCATE:
            report.append(f"only {tally.cannot_allocate} FailedScheduling messages said "
                          f"no node could allocate the claims (at least "
                          f"{MIN_CANNOT_ALLOCATE} must): {summary}")
    if lost:
        report.append("the resourceclaim controller dropped a claim from a pod's status "
                      "twice (nothing compared): " + "; ".join(lost))
    fail_if_any(report, summary,
                [(first, o.dra.index, o.outcome) for first, o in failures],
                _replay, BATCH)
