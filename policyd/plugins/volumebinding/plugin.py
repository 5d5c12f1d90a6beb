"""VolumeBinding: a pod's PersistentVolumeClaims must be bound, or bindable, where it
goes (kube-scheduler v1.36's plugin, volume_binding.go).

- PreFilter: Skip for a pod without claims; a claim missing, lost, being deleted or
  (ephemeral) not owned by the pod, or an unbound claim whose class binds Immediate,
  rejects the pod as UnschedulableAndUnresolvable with upstream's words. v1.36 returns
  no node restriction here.
- Filter: the bound claims' PVs must fit the node; each unbound WaitForFirstConsumer
  claim takes an available PV that fits, or is provisioned there. The decision per
  node stays in the cycle state for Reserve. Every rejection is
  UnschedulableAndUnresolvable (preemption frees no volume).
- PreScore/Score: upstream scores only with the StorageCapacityScoring gate, alpha and
  off by default in v1.36: while it is off PreScore says Skip, so Score never runs;
  while it is on every node scores by how full the pod's volumes leave its storage
  classes (`scorer.py`), 0 where the pod has no claims.
- Reserve/Unreserve: the node's decision assumed into `cluster.storage` (and undone).
- PreBindPreFlight: whether PreBind has work (a claim to bind or provision), which
  the binder tells the API as the pod's nominatedNodeName before PreBind starts.
- PreBind: the decision written to the API server, then the wait for the PV
  controller (`prebind.py`), bounded by `bindTimeoutSeconds`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from policyd.features import DEFAULTS, FeatureGates
from policyd.framework.cycle_state import CycleState
from policyd.framework.events import ClusterEventWithHint
from policyd.framework.interfaces import BindingHandle, Verdict
from policyd.framework.status import Status
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.model.storage import StaleObjectError, StorageObjects
from policyd.plugins.helper.volumes import VolumeObjectError, pod_claims
from policyd.plugins.volumebinding import NAME, hints
from policyd.plugins.volumebinding.args import (
    STORAGE_CAPACITY_SCORING,
    VolumeBindingArgs,
    parse_args,
)
from policyd.plugins.volumebinding.binder import (
    BinderError,
    PodVolumeClaims,
    PodVolumes,
    assume_pod_volumes,
    claim_lookup_error,
    find_pod_volumes,
    pod_volume_claims,
    revert_assumed,
)
from policyd.plugins.volumebinding.explain import claim_verdicts
from policyd.plugins.volumebinding.prebind import bind_pod_volumes
from policyd.plugins.volumebinding.scorer import build_scorer, class_resources

# Upstream's default profile gives VolumeBinding no weight: a Score plugin without
# one weighs 1 (it never scores while StorageCapacityScoring is off, see PreScore).
DEFAULT_WEIGHT: int | None = 1

ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"

STATE_KEY = NAME

_SKIP = Status.skip()


@dataclass(slots=True)
class VolumeBindingState:
    """What PreFilter found and Filter decided per node (upstream's stateData)."""

    claims: PodVolumeClaims | None = None  # None: the pod has no claims
    by_node: dict[str, PodVolumes] = field(default_factory=dict)
    all_bound: bool = False  # Reserve found nothing to bind: PreBind does nothing
    has_static_bindings: bool = False


class VolumeBinding:
    name = NAME
    # No PreFilterExtensions upstream: its PreFilter state reads no other pod
    # (preemption's dry runs rely on that; framework/interfaces.py).
    pre_filter_reads_other_pods = False
    # Its Filter reads the node and the pod's volumes, never the pods on the node.
    filter_reads_node_pods = False

    def __init__(self, args: VolumeBindingArgs, *, features: FeatureGates = DEFAULTS
                 ) -> None:
        self.args = args
        # Upstream builds a scorer only under StorageCapacityScoring; its args then
        # carry the (defaulted) shape.
        self.capacity_scoring = features.enabled(STORAGE_CAPACITY_SCORING)
        self._scorer = build_scorer(args.shape) if self.capacity_scoring else None

    # PreFilter
    def pre_filter(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
                   ) -> tuple[set[str] | None, Status | None]:
        if not pod_claims(pod):
            state.write(STATE_KEY, VolumeBindingState())
            return None, _SKIP
        storage = _storage(state)
        problem = claim_lookup_error(storage, pod)
        if problem is not None:
            return None, Status.unresolvable(problem)
        try:
            claims = pod_volume_claims(storage, pod)
        except BinderError as exc:
            return None, Status.error(str(exc))
        except VolumeObjectError as exc:
            return None, Status.unresolvable(str(exc))
        if claims.unbound_immediate:
            # Moved back by the claim's update once the PV controller binds it.
            return None, Status.unresolvable(ERR_UNBOUND_IMMEDIATE)
        state.write(STATE_KEY, VolumeBindingState(claims))
        return None, None

    # Filter
    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        data = _state(state)
        if data is None:
            return _not_in_state()
        if data.claims is None:
            return None
        try:
            volumes, reasons = find_pod_volumes(_storage(state), data.claims, node.node)
        except BinderError as exc:
            return Status.error(str(exc))
        if reasons:
            return Status.unresolvable(*reasons)
        data.by_node[node.name] = volumes
        data.has_static_bindings = data.has_static_bindings or bool(volumes.static_bindings)
        return None

    # PreScore / Score
    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
                  ) -> Status | None:
        # No scorer without StorageCapacityScoring (off by default in v1.36); with it,
        # upstream scores every pod (hasStaticBindings || the gate), even one without
        # claims, whose nodes all score 0.
        if self._scorer is None:
            return _SKIP
        if _state(state) is None:
            return _not_in_state()
        return None

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        data = _state(state)
        if self._scorer is None or data is None:
            return 0
        volumes = data.by_node.get(node.name)
        if volumes is None:
            return 0
        from_static = bool(volumes.static_bindings) or not self.capacity_scoring
        return self._scorer(class_resources(volumes, from_static))

    # Reserve / Unreserve
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        data = _state(state)
        if data is None:
            return _not_in_state()
        volumes = data.by_node.get(node_name)
        if volumes is None:
            data.all_bound = True  # no claims, or Filter never saw the node
            return None
        try:
            data.all_bound = assume_pod_volumes(_storage(state), pod, node_name, volumes)
        except StaleObjectError as exc:
            return Status.error(str(exc))
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        data = _state(state)
        volumes = None if data is None else data.by_node.get(node_name)
        if volumes is not None and state.cluster is not None:
            revert_assumed(state.cluster.storage, volumes)

    # PreBindPreFlight / PreBind
    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str
                            ) -> Status | None:
        """Upstream's PreBindPreFlight: Skip when every claim is bound already, an
        error when Filter never decided for the node, else PreBind has claims to
        write and wait for (the binder then nominates the pod to the node)."""
        data = _state(state)
        if data is None:
            return _not_in_state()
        if data.all_bound:
            return _SKIP
        if node_name not in data.by_node:
            return _no_pod_volume(node_name)
        return None

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str,
                 handle: BindingHandle) -> Status | None:
        data = _state(state)
        if data is None:
            return _not_in_state()
        if data.all_bound:
            return None
        volumes = data.by_node.get(node_name)
        if volumes is None:
            return _no_pod_volume(node_name)
        problem = bind_pod_volumes(handle, pod, node_name, volumes,
                                   self.args.bind_timeout_seconds)
        return None if problem is None else Status.error(problem)

    # explain
    def verdicts(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[Verdict, ...]:
        """Each of the pod's claims judged on `node`, for explain (after Filter)."""
        data = _state(state)
        claims = None if data is None else data.claims
        if claims is None:
            return ()
        return claim_verdicts(_storage(state), claims, node.node,
                              data.by_node.get(node.name) if data else None)

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return hints.events()


def _state(state: CycleState) -> VolumeBindingState | None:
    data = state.get(STATE_KEY)
    return data if isinstance(data, VolumeBindingState) else None


def _no_pod_volume(node_name: str) -> Status:
    # Upstream's errNoPodVolumeForNode, wrapped with the node's name.
    return Status.error(f'no pod volume found for node "{node_name}"')


def _not_in_state() -> Status:
    # Upstream's CycleState.Read error when PreFilter did not run.
    return Status.error(f'error reading "{STATE_KEY}" from cycleState: not found')


_EMPTY = StorageObjects()


def _storage(state: CycleState) -> StorageObjects:
    # A cycle without a cluster (a bare CycleState in a test) has no storage objects.
    return state.cluster.storage if state.cluster is not None else _EMPTY


def new(args: Mapping[str, Any] | None = None, *, features: FeatureGates = DEFAULTS
        ) -> VolumeBinding:
    """Build VolumeBinding from VolumeBindingArgs, defaulted and validated under
    `features` (StorageCapacityScoring); raises PluginError."""
    return VolumeBinding(parse_args(args, features), features=features)
