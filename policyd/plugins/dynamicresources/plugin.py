"""DynamicResources (kube-scheduler v1.36, `pkg/scheduler/framework/plugins/
dynamicresources`), as far as policyd can go without allocating DRA devices.

Upstream's plugin sits at PreEnqueue, PreFilter, Filter, PostFilter, Score (weight 2 in
the default profile), Reserve/Unreserve and PreBind; in the default profile it comes
right before DefaultPreemption, so that PostFilter frees an idle claim before evicting
a pod. policyd has it at the same points, with these semantics:

- A pod without resource claims, exactly as upstream: PreFilter records that it ran
  and says Skip, so Filter does not run; Score gives every node 0 (normalized, still
  0); Reserve and PreBind have nothing to do; PostFilter answers Unschedulable
  `no new claims to deallocate`, the part every unschedulable pod's FailedScheduling
  message has before `preemption: `. When an earlier PreFilter rejected the pod as
  unresolvable, PreFilter never ran here, and upstream's PostFilter fails reading its
  cycle state: an Error whose text is `not found`, which ends the PostFilter run
  (DefaultPreemption is not asked) and the message (`0/3 nodes are available:
  persistentvolumeclaim "data" not found. not found`, as kube-scheduler v1.36.3 says
  it). policyd says the same.
- A pod with `spec.resourceClaims`: policyd cannot allocate its devices, and a pod bound
  with its claims unallocated never starts (no kubelet prepares an unallocated claim).
  PreFilter refuses it, UnschedulableAndUnresolvable, naming the first claim; Filter
  says the same if PreFilter was disabled in a profile. PostFilter then answers
  `no new claims to deallocate`, as upstream's does after its own PreFilter refused a
  pod (its claims are only recorded once PreFilter passed): nothing is deallocated.
  No event policyd watches can change that (it does not watch ResourceClaims, device
  classes or ResourceSlices), so the pod is retried only by the periodic flush.

Upstream's PreEnqueue holds back a pod whose claim does not exist yet, silently (no
event, no condition); policyd has no PreEnqueue and such a pod gets the refusal above.
Extended resources backed by device classes (DRAExtendedResource, beta and on in v1.36)
are not modelled: NodeResourcesFit treats every extended resource as a node's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from policyd.framework import CycleState, Status
from policyd.framework.events import ClusterEventWithHint
from policyd.framework.fit_error import Diagnosis
from policyd.framework.interfaces import BindingHandle, PostFilterResult
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod, PodResourceClaim
from policyd.model.table import IntArray, NodeTable
from policyd.plugins.dynamicresources import NAME
from policyd.plugins.dynamicresources.args import DynamicResourcesArgs, parse_args

DEFAULT_WEIGHT: int | None = 2

# PostFilter's answer when the pod has no claim it could free (upstream's wording).
NO_CLAIMS_TO_DEALLOCATE = "no new claims to deallocate"
# Upstream's PostFilter when its PreFilter did not run: the cycle state's ErrNotFound.
STATE_NOT_FOUND = "not found"
UNSUPPORTED = "policyd does not allocate DRA devices yet (see README, known limits)"

# Written by PreFilter: the claims PostFilter may deallocate. Always empty, since
# policyd allocates none; its presence says PreFilter ran (PostFilter needs to know).
STATE_KEY = f"{NAME}/claims"

_NOTHING_TO_DEALLOCATE = Status.unschedulable(NO_CLAIMS_TO_DEALLOCATE)


def reason(claim: PodResourceClaim) -> str:
    """`pod uses ResourceClaim "x": ...`, naming the ResourceClaim; a template's claim
    not created yet is named by the pod's entry and its template."""
    if claim.claim:
        return f'pod uses ResourceClaim "{claim.claim}": {UNSUPPORTED}'
    return (f'pod uses ResourceClaim "{claim.name}" (from ResourceClaimTemplate '
            f'"{claim.template}"): {UNSUPPORTED}')


class DynamicResources:
    name = NAME
    # No PreFilterExtensions upstream: its PreFilter state reads no other pod
    # (preemption's dry runs rely on that; framework/interfaces.py).
    pre_filter_reads_other_pods = False

    def __init__(self, args: DynamicResourcesArgs) -> None:
        self.args = args

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[set[str] | None, Status | None]:
        state.write(STATE_KEY, ())
        if not pod.resource_claims:
            return None, Status.skip()
        return None, Status.unresolvable(reason(pod.resource_claims[0]))

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        # Runs only when PreFilter did not skip, i.e. for a pod with claims whose
        # PreFilter is disabled in the profile: still never bound blindly.
        if pod.resource_claims:
            return Status.unresolvable(reason(pod.resource_claims[0]))
        return None

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        # Upstream scores only the prioritized-list choices of allocated claims; a pod
        # that gets this far has none, so every node scores 0 (and normalizing zeros
        # leaves zeros).
        return 0

    def score_vector(self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray
                     ) -> IntArray:
        scores: IntArray = np.zeros(idx.size, np.int64)
        return scores

    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis
                    ) -> tuple[PostFilterResult | None, Status]:
        if state.get(STATE_KEY) is None:
            return None, Status.error(STATE_NOT_FOUND)
        return None, _NOTHING_TO_DEALLOCATE

    # Reserve, Unreserve and PreBind: upstream's act only on claims the pod takes, so
    # for every pod policyd binds they do nothing. They are here so that the plugin
    # has upstream's extension points (a profile naming it at reserve or preBind is
    # valid, as it is for kube-scheduler).
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        return None

    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str
                            ) -> Status | None:
        # Upstream's: Skip when the pod has no claims, which is every pod policyd
        # binds; an error when PreFilter did not run (its cycle state is missing).
        if state.get(STATE_KEY) is None:
            return Status.error(STATE_NOT_FOUND)
        return Status.skip()

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str,
                 handle: BindingHandle) -> Status | None:
        return None

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        # Upstream registers ResourceClaim, DeviceClass, ResourceSlice and node events;
        # none of them can give policyd an allocator, and it watches none of the DRA
        # objects: a refused pod is retried only by the periodic flush.
        return ()


def new(args: Mapping[str, Any] | None = None) -> DynamicResources:
    """Build DynamicResources from DynamicResourcesArgs; raises PluginError."""
    return DynamicResources(parse_args(args))
