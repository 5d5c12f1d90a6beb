"""Cluster policies at start-up (`clusterPolicies: true`): the one list of the
SchedulingPolicy objects the first frameworks are built with, and the wait for their
CRD before the SchedulingPolicy watch can begin."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from policyd.clock import Clock
from policyd.daemon import loaded_profile as daemon_config
from policyd.daemon.cluster_policies import ClusterPolicies
from policyd.errors import RuntimeFailure
from policyd.kube import api
from policyd.kube.backoff import Backoff
from policyd.kube.client import ApiError, KubeClient

log = logging.getLogger("policyd.daemon")

# Without the SchedulingPolicy CRD, how often the daemon asks whether it is installed.
CRD_POLL_INTERVAL = 10.0
# The start-up list of SchedulingPolicy objects: attempts on a transient failure.
STARTUP_LIST_ATTEMPTS = 4


def load_with_cluster_policies(
        client: KubeClient, cluster: ClusterPolicies, loaded: daemon_config.LoadedConfig,
        config: Path, policies: list[Path], clock: Clock
) -> tuple[daemon_config.LoadedConfig, bool]:
    """(the configuration to start with, whether the SchedulingPolicy resource is
    served). Lists the SchedulingPolicy objects once and validates the profile again
    with them (InvalidConfig: exit 1). Without the CRD (404), or when the list keeps
    failing, the daemon starts with its policy files alone (`loaded`) — unless the
    profile names plugins only cluster policies can provide — and the watch picks the
    objects up later."""
    backoff = Backoff(initial=0.5, maximum=4.0)
    objects: list[dict[str, Any]] | None = None
    for attempt in range(1, STARTUP_LIST_ATTEMPTS + 1):
        try:
            objects = api.list_scheduling_policies(client)
            break
        except ApiError as exc:
            if attempt == STARTUP_LIST_ATTEMPTS or not exc.transient:
                if not loaded.complete:
                    raise RuntimeFailure(
                        f"cannot list SchedulingPolicy objects ({exc}), and the "
                        "profile names plugins no policy file provides") from None
                log.warning("cannot list SchedulingPolicy objects (%s); starting "
                            "with the policy files only, the watch retries", exc)
                return loaded, False
            clock.sleep(backoff.next_delay(exc.retry_after))
    served = objects is not None
    if objects is None:
        log_crd_missing()
    else:
        cluster.replace_all(objects)
    result = daemon_config.load(config, policies, cluster,
                                gate_overrides=loaded.gate_overrides,
                                pinned_gates=loaded.feature_gates,
                                cluster_policies_flag=loaded.cluster_policies_flag)
    cluster.applied()
    if cluster.running:
        log.info("cluster policies in effect: %s", ", ".join(
            f"schedulingpolicy/{n} (generation {v.generation}, plugin {v.plugin})"
            for n, v in cluster.running.items()))
    return result, served


def log_crd_missing() -> None:
    log.warning("the SchedulingPolicy resource (%s) is not served: its CRD "
                "schedulingpolicies.policyd.io is not installed; scheduling with the "
                "policy files only, and checking every %.0fs for the CRD",
                api.SCHEDULING_POLICIES, CRD_POLL_INTERVAL)


def wait_until_served(client: KubeClient, stop: threading.Event, clock: Clock) -> bool:
    """Ask every CRD_POLL_INTERVAL whether the SchedulingPolicy resource is served:
    True once it is, False when `stop` is set first. Quietly: start-up has said why
    the watch waits (no CRD, or a list that kept failing)."""
    while not stop.is_set():
        try:
            served = api.scheduling_policies_served(client)
        except ApiError as exc:
            log.debug("checking for the SchedulingPolicy resource: %s", exc)
            served = False
        if served:
            log.info("the SchedulingPolicy resource is served now: watching it")
            return True
        clock.wait(stop, CRD_POLL_INTERVAL)
    return False
