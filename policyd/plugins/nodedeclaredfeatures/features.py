"""Which node-declared features a pod needs to be scheduled: kube-scheduler v1.36's
registry (k8s.io/component-helpers v0.36.3 `nodedeclaredfeatures/features`).

Every feature of that registry is listed, by the name nodes declare in
`status.declaredFeatures`; only two infer a need from a pod about to be scheduled, the
others matter only when a running pod is updated (in-place resize), which the scheduler
never asks. The inference reads the pod's spec only (its status is not considered), and
no feature of this release has a version bound, so none is dropped for the
scheduler's version.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from policyd.model.records import Pod

RESTART_ALL_CONTAINERS = "RestartAllContainersOnContainerExits"
USER_NAMESPACES_HOST_NETWORK = "UserNamespacesHostNetworkSupport"

_CACHE_KEY = "NodeDeclaredFeatures/required"


def _restarts_all_containers(spec: dict[str, Any]) -> bool:
    """A container or init container (sidecars included) with a restart rule whose
    action is RestartAllContainers; ephemeral containers are not looked at."""
    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        for c in containers if isinstance(containers, list) else ():
            rules = c.get("restartPolicyRules") if isinstance(c, dict) else None
            for rule in rules if isinstance(rules, list) else ():
                if isinstance(rule, dict) and rule.get("action") == "RestartAllContainers":
                    return True
    return False


def _user_namespace_with_host_network(spec: dict[str, Any]) -> bool:
    """Host networking in a user namespace: hostNetwork true and hostUsers false (an
    unset hostUsers means the host's namespaces)."""
    return spec.get("hostNetwork") is True and spec.get("hostUsers") is False


# name -> what infers it for scheduling (None: never at scheduling time), sorted by
# name as upstream keeps its registry.
REGISTRY: dict[str, Callable[[dict[str, Any]], bool] | None] = {
    "ExtendWebSocketsToKubelet": None,
    "InPlacePodLevelResourcesVerticalScaling": None,  # pod updates only
    "InPlacePodVerticalScalingInitContainers": None,  # pod updates only
    RESTART_ALL_CONTAINERS: _restarts_all_containers,
    USER_NAMESPACES_HOST_NETWORK: _user_namespace_with_host_network,
}


def required_features(pod: Pod) -> frozenset[str]:
    """The features a node must declare for `pod` to run there (InferForPodScheduling);
    memoized on the pod, as the fields read are immutable once it exists."""
    cached = pod.cache.get(_CACHE_KEY)
    if cached is None:
        spec = pod.raw.get("spec") if isinstance(pod.raw, dict) else None
        spec = spec if isinstance(spec, dict) else {}
        cached = frozenset(name for name, infer in REGISTRY.items()
                           if infer is not None and infer(spec))
        pod.cache[_CACHE_KEY] = cached
    required: frozenset[str] = cached
    return required
