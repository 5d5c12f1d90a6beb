"""What a pod requests, computed exactly like component-helpers' `resource.PodRequests`.

Resources are plain `dict[str, int]`: cpu in millicores, everything else (memory,
ephemeral-storage, extended resources, `pods`) in whole units.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from policyd.features import DEFAULTS, FeatureGates
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
    # maxResourceList: a resource `into` lacks is added even at zero, since an explicit
    # zero request is "set" (no non-zero default; a named scalar resource).
    for k, v in other.items():
        if k not in into or v > into[k]:
            into[k] = v


def _effective(spec: Mapping[str, int], actuated: Mapping[str, int] | None,
               allocated: Mapping[str, int] | None, infeasible: bool) -> dict[str, int]:
    """determineEffectiveRequests: while a resize is in flight the pod may use the larger
    of what its spec asks, what it runs with (actuated) and what the kubelet allocated;
    an infeasible resize will never happen, so the spec no longer counts."""
    reqs = {} if infeasible else dict(spec)
    _max(reqs, actuated or {})
    _max(reqs, allocated or {})
    return reqs


def _container_requests(c: Container, non_missing: Mapping[str, int], use_status: bool,
                        infeasible: bool) -> Mapping[str, int]:
    """One container's requests: from its status too when `use_status` and the kubelet
    reports its resources (`status_requests` is None when it does not), then each
    resource of `non_missing` it leaves unset at that default (applyNonMissing)."""
    own: Mapping[str, int] = c.requests
    if use_status and c.status_requests is not None:
        own = _effective(c.requests, c.status_requests, c.allocated, infeasible)
    if not non_missing:
        return own
    reqs = dict(own)
    for name, default in non_missing.items():
        if name not in own:
            reqs[name] = default
    return reqs


def _aggregate(containers: Iterable[Container], init_containers: Iterable[Container],
               non_missing: Mapping[str, int], use_status: bool, infeasible: bool
               ) -> dict[str, int]:
    """AggregateContainerRequests."""
    reqs: dict[str, int] = {}
    for c in containers:
        _add(reqs, _container_requests(c, non_missing, use_status, infeasible))
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for c in init_containers:
        sidecar = c.restart_policy == "Always"
        # Only a sidecar is resized in place: a regular init container has finished
        # (or not started) and counts its spec, as upstream reads status for sidecars only.
        own = _container_requests(c, non_missing, use_status and sidecar, infeasible)
        if sidecar:
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


def _requests_nano(pod: Pod, non_missing: Mapping[str, int], use_status: bool,
                   pod_level_status: bool) -> dict[str, int]:
    """PodRequests in nano units: containers, then pod-level requests, then overhead."""
    infeasible = pod.resize_infeasible
    reqs = _aggregate(pod.containers, pod.init_containers, non_missing, use_status,
                      infeasible)
    pod_level = [name for name in pod.pod_requests if _is_pod_level_resource(name)]
    if pod_level:
        effective: Mapping[str, int] = pod.pod_requests
        if pod_level_status and pod.status_pod_requests is not None:
            # A pod resized in place at pod level (InPlacePodLevelResourcesVerticalScaling)
            # counts as its containers do; a resource the effective list lacks (only
            # after an infeasible resize) counts zero, as upstream's map lookup does.
            effective = _effective(pod.pod_requests, pod.status_pod_requests,
                                   pod.allocated_pod, infeasible)
        for name in pod_level:
            reqs[name] = effective.get(name, 0)
    _add(reqs, pod.overhead)
    return reqs


# Pod.cache keys of `pod_requests`' sums: they depend only on the pod's containers,
# overhead, pod-level requests and resize state.
REQUESTS_CACHE_PREFIX = "requests."

# The gate under which a bound pod's pod-level status resources count (beta, on in v1.36).
POD_LEVEL_RESIZE_GATE = "InPlacePodLevelResourcesVerticalScaling"


def pod_requests(pod: Pod, *, non_zero: bool = False, use_status: bool = False,
                 features: FeatureGates = DEFAULTS) -> dict[str, int]:
    """The pod's effective requests: containers + sidecars vs init max, pod-level, overhead.

    With `non_zero`, cpu and memory only, as PodInfo.CalculateResource's Non0CPU/Non0Mem:
    a container that sets no cpu (memory) request counts 100m (200Mi), except that when
    pod-level requests are set only a resource the pod's requests lack at all gets the
    default (getNonMissingContainerRequests). With `use_status` (a bound pod counted on
    its node) in-place resizes count as upstream's UseStatusResources does: containers
    always (InPlacePodVerticalScaling is GA and locked), pod-level status only while
    `features` enables InPlacePodLevelResourcesVerticalScaling.
    """
    pod_level_status = use_status and features.enabled(POD_LEVEL_RESIZE_GATE)
    cache_key = f"{REQUESTS_CACHE_PREFIX}{non_zero}.{use_status}.{pod_level_status}"
    cached = pod.cache.get(cache_key)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    if non_zero:
        actual = _requests_nano(pod, {}, use_status, pod_level_status)
        if any(_is_pod_level_resource(name) for name in pod.pod_requests):
            non_missing = {k: v for k, v in _NON_ZERO_DEFAULTS.items() if k not in actual}
        else:
            non_missing = _NON_ZERO_DEFAULTS
        reqs = (_requests_nano(pod, non_missing, use_status, pod_level_status)
                if non_missing else actual)
        reqs = {k: v for k, v in reqs.items() if k in _NON_ZERO_DEFAULTS}
    else:
        reqs = _requests_nano(pod, {}, use_status, pod_level_status)
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
