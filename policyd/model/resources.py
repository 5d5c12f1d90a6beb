"""What a pod requests, computed exactly like component-helpers' `resource.PodRequests`.

Resources are plain `dict[str, int]`: cpu in millicores, everything else (memory,
ephemeral-storage, extended resources, `pods`) in whole units.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from policyd.model.records import Container, Pod

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

# A container without a cpu or memory request counts as this much when scoring
# (schedutil.DefaultMilliCPURequest / DefaultMemoryRequest), so that many
# "free" pods do not all pile onto one node.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

_NON_ZERO_DEFAULTS = {CPU: DEFAULT_MILLI_CPU_REQUEST, MEMORY: DEFAULT_MEMORY_REQUEST}


def _is_pod_level_resource(name: str) -> bool:
    return name in (CPU, MEMORY) or name.startswith("hugepages-")


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


def _container_requests(c: Container, non_zero: bool) -> Mapping[str, int]:
    if not non_zero:
        return c.requests
    reqs = dict(c.requests)
    for name, default in _NON_ZERO_DEFAULTS.items():
        if reqs.get(name, 0) == 0 and name not in c.requests:
            reqs[name] = default
    return reqs


def _aggregate(containers: Iterable[Container], init_containers: Iterable[Container],
               non_zero: bool) -> dict[str, int]:
    reqs: dict[str, int] = {}
    for c in containers:
        _add(reqs, _container_requests(c, non_zero))
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for c in init_containers:
        own = _container_requests(c, non_zero)
        if c.restart_policy == "Always":
            # A sidecar keeps running next to the app containers, and every later init
            # container runs while the sidecars started before it are still up.
            _add(reqs, own)
            _add(sidecars, own)
            effective: Mapping[str, int] = sidecars
        else:
            combined = dict(own)
            _add(combined, sidecars)
            effective = combined
        _max(init_max, effective)
    _max(reqs, init_max)
    return reqs


def pod_requests(pod: Pod, *, non_zero: bool = False) -> dict[str, int]:
    """The pod's effective requests: containers + sidecars vs init max, pod-level, overhead.

    With `non_zero`, a container that sets no cpu (memory) request counts 100m (200Mi):
    the "non-zero" requests the scheduler's scoring uses.
    """
    cache_key = "requests.nonzero" if non_zero else "requests"
    cached = pod.cache.get(cache_key)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    reqs = _aggregate(pod.containers, pod.init_containers, non_zero)
    for name, value in pod.pod_requests.items():
        if _is_pod_level_resource(name):
            reqs[name] = value
    _add(reqs, pod.overhead)
    if non_zero:
        reqs = {k: v for k, v in reqs.items() if k in _NON_ZERO_DEFAULTS}
    pod.cache[cache_key] = reqs
    return reqs
