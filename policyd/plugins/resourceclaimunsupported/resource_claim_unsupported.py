"""ResourceClaimUnsupported (policyd's own): refuse pods that use DRA ResourceClaims.

kube-scheduler places such pods with its DynamicResources plugin, which allocates
devices for each claim before binding; policyd does not have it yet. A pod bound with
its claims unallocated can never start (no kubelet prepares an unallocated claim), so
policyd rejects it in PreFilter, as UnschedulableAndUnresolvable, with a message naming
the claim; that message is what the FailedScheduling event, `explain` and `simulate`
show. It stands where DynamicResources stands in the default profile, and the real
plugin replaces it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policyd.framework import CycleState, PluginError, Status
from policyd.framework.events import ClusterEventWithHint
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod, PodResourceClaim
from policyd.plugins import names
from policyd.problems import field_problem

DEFAULT_WEIGHT: int | None = None

_UNSUPPORTED = "policyd has no DynamicResources plugin yet (see README, known limits)"


def reason(claim: PodResourceClaim) -> str:
    """`pod uses ResourceClaim "x": ...`, naming the ResourceClaim; a template's claim
    not created yet is named by the pod's entry and its template."""
    if claim.claim:
        return f'pod uses ResourceClaim "{claim.claim}": {_UNSUPPORTED}'
    return (f'pod uses ResourceClaim "{claim.name}" (from ResourceClaimTemplate '
            f'"{claim.template}"): {_UNSUPPORTED}')


class ResourceClaimUnsupported:
    name = names.RESOURCE_CLAIM_UNSUPPORTED

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[set[str] | None, Status | None]:
        if not pod.resource_claims:
            return None, Status.skip()
        return None, Status.unresolvable(reason(pod.resource_claims[0]))


    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        # No cluster event can give policyd a DynamicResources plugin: such a pod is
        # retried only by the periodic flush, like VolumeUnsupported's.
        return ()

def new(args: Mapping[str, Any] | None = None) -> ResourceClaimUnsupported:
    if args:
        raise PluginError(names.RESOURCE_CLAIM_UNSUPPORTED,
                          [field_problem("", "ResourceClaimUnsupported takes no arguments")])
    return ResourceClaimUnsupported()
