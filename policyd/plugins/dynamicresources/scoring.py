"""Score: how early in each `firstAvailable` list the devices chosen on a node are
(upstream's computeScore, v1.36.3).

For every claim of the pod (allocated already, or as Filter allocated it on the
node), each sub-request the allocation used adds 8 minus its position in its
request's list (resource.k8s.io/v1 FirstAvailableDeviceRequestMaxSize is 8): the
first alternative scores 8, the last possible one 1. Exact requests add nothing. The
plugin's NormalizeScore then scales the highest node to 100.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from policyd.dra.objects import ResourceClaim

# resourceapi.FirstAvailableDeviceRequestMaxSize
FIRST_AVAILABLE_MAX = 8


def claim_score(claim: ResourceClaim, requests: Iterable[str]) -> int:
    """The claim's score given the request names of its allocation's results."""
    used = {r for r in requests if "/" in r}
    score = 0
    for request in claim.requests:
        if request.exactly is not None:
            continue
        for i, sub in enumerate(request.first_available):
            if f"{request.name}/{sub.name}" in used:
                score += FIRST_AVAILABLE_MAX - i
    return score


def pod_score(claims: Sequence[tuple[ResourceClaim, Iterable[str]]]) -> int:
    return sum(claim_score(claim, requests) for claim, requests in claims)
