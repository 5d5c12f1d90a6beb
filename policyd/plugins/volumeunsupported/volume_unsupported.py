"""VolumeUnsupported (policyd's own): refuse pods that use PersistentVolumeClaims.

kube-scheduler places such pods with its volume plugins (VolumeBinding, VolumeZone,
NodeVolumeLimits, VolumeRestrictions), which policyd does not have yet. Placing the
pod blindly could put it where its volume can never attach, so policyd rejects it in
PreFilter with a message naming the claim; that message is what the FailedScheduling
event shows. Generic ephemeral volumes count too: they are claims created per pod.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policyd.framework import CycleState, PluginError, Status
from policyd.framework.events import ClusterEventWithHint
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.plugins import names
from policyd.problems import field_problem

DEFAULT_WEIGHT: int | None = None

ERR_REASON_FORMAT = (
    'pod uses PersistentVolumeClaim "{claim}": policyd has no volume plugins yet '
    "(see README, known limits)"
)


class VolumeUnsupported:
    name = names.VOLUME_UNSUPPORTED

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[set[str] | None, Status | None]:
        if not pod.pvc_names:
            return None, Status.skip()
        return None, Status.unresolvable(ERR_REASON_FORMAT.format(claim=pod.pvc_names[0]))

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        # No cluster event can give policyd volume plugins: such a pod is retried only
        # by the periodic flush (podMaxInUnschedulablePodsDuration), never by events.
        return ()


def new(args: Mapping[str, Any] | None = None) -> VolumeUnsupported:
    if args:
        raise PluginError(names.VOLUME_UNSUPPORTED,
                          [field_problem("", "VolumeUnsupported takes no arguments")])
    return VolumeUnsupported()
