"""What a pod requests, computed exactly like component-helpers' `resource.PodRequests`.

Resources are plain `dict[str, int]`: cpu in millicores, everything else (memory,
ephemeral-storage, extended resources, `pods`) in whole units.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from policyd.model.quantity import NANO, from_nano
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

# In the nano units container requests are decoded in.
_NON_ZERO_DEFAULTS = {CPU: DEFAULT_MILLI_CPU_REQUEST * NANO // 1000,
                      MEMORY: DEFAULT_MEMORY_REQUEST * NANO}


def _is_pod_level_resource(name: str) -> bool:
    return name in (CPU, MEMORY) or name.startswith("hugepages-")


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


def _spec_or_status(c: Container, use_status: bool, infeasible: bool) -> Mapping[str, int]:
    """determineContainerReqs: while a resize is in flight a running container may use
    the larger of what its spec asks, what it runs with and what is allocated to it; an
    infeasible resize leaves it with what it runs with."""
    if not use_status or (c.status_requests is None and c.allocated is None):
        return c.requests
    if infeasible and c.status_requests is not None:
        return c.status_requests
    reqs = dict(c.requests)
    _max(reqs, c.status_requests or {})
    _max(reqs, c.allocated or {})
    return reqs


def _container_requests(c: Container, non_zero: bool, use_status: bool = False,
                        infeasible: bool = False) -> Mapping[str, int]:
    own = _spec_or_status(c, use_status, infeasible)
    if not non_zero:
        return own
    reqs = dict(own)
    for name, default in _NON_ZERO_DEFAULTS.items():
        if name not in own:
            reqs[name] = default
    return reqs


def _aggregate(containers: Iterable[Container], init_containers: Iterable[Container],
               non_zero: bool, use_status: bool, infeasible: bool) -> dict[str, int]:
    reqs: dict[str, int] = {}
    for c in containers:
        _add(reqs, _container_requests(c, non_zero, use_status, infeasible))
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for c in init_containers:
        own = _container_requests(c, non_zero, use_status, infeasible)
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


# Pod.cache keys of `pod_requests`' sums: they depend only on the pod's containers,
# overhead, pod-level requests and resize state.
REQUESTS_CACHE_PREFIX = "requests."


def pod_requests(pod: Pod, *, non_zero: bool = False, use_status: bool = False
                 ) -> dict[str, int]:
    """The pod's effective requests: containers + sidecars vs init max, pod-level, overhead.

    With `non_zero`, a container that sets no cpu (memory) request counts 100m (200Mi):
    the "non-zero" requests the scheduler's scoring uses. With `use_status` (a bound pod
    counted on its node) in-place resizes count as upstream's UseStatusResources does.
    """
    cache_key = f"{REQUESTS_CACHE_PREFIX}{non_zero}.{use_status}"
    cached = pod.cache.get(cache_key)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    reqs = _aggregate(pod.containers, pod.init_containers, non_zero, use_status,
                      pod.resize_infeasible)
    for name, value in pod.pod_requests.items():
        if _is_pod_level_resource(name):
            reqs[name] = value
    _add(reqs, pod.overhead)
    if non_zero:
        reqs = {k: v for k, v in reqs.items() if k in _NON_ZERO_DEFAULTS}
    # Summed exactly in nano units; rounded up once per pod, as Quantity.MilliValue /
    # Quantity.Value round the pod's total upstream.
    result = {name: from_nano(name, value) for name, value in reqs.items()}
    pod.cache[cache_key] = result
    return result


_BINARY_UNITS = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))
_DECIMAL_UNITS = (("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3))


def show_amount(name: str, value: int) -> str:
    """An amount of resource `name` as a person writes it in a manifest: cpu (kept in
    millicores) in cores, `0.5` or `2`; bytes with the largest suffix that divides them
    exactly (`16Gi`, `1500M`), else as a plain number; counts as they are."""
    if name == CPU:
        whole, milli = divmod(abs(value), 1000)
        sign = "-" if value < 0 else ""
        return f"{sign}{whole}" + (f".{milli:03d}".rstrip("0") if milli else "")
    if name not in (MEMORY, EPHEMERAL_STORAGE) or value == 0:
        return str(value)
    for suffix, bits in _BINARY_UNITS:
        if value % (1 << bits) == 0:
            return f"{value >> bits}{suffix}"
    for suffix, exp in _DECIMAL_UNITS:
        if value % 10**exp == 0:
            return f"{value // 10**exp}{suffix}"
    return str(value)
