"""Per-pod scratch space shared by a plugin's PreFilter/PreScore and its Filter/Score."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from policyd.model.cluster import ClusterState
    from policyd.model.node_info import NodeInfo
    from policyd.model.table import NodeTable


@runtime_checkable
class ClonableState(Protocol):
    """A value a plugin keeps in the CycleState that PreFilterExtensions update in
    place (upstream's StateData): `CycleState.clone` copies it, so updates to the copy
    leave the original alone. Values without `clone` are never changed once written
    and are shared between copies."""

    def clone(self) -> Any: ...


# Upstream's PodsToActivateKey: the uids of pods a plugin (Coscheduling's Permit) wants
# moved from the unschedulable pool or backoff to activeQ once the cycle ends; the
# daemon's scheduling loop does it.
PODS_TO_ACTIVATE = "kubernetes.io/pods-to-activate"


class CycleState:
    """Data computed once per scheduling cycle and read per node.

    A plain dict keyed by plugin-chosen strings (by convention `"<Plugin>/<what>"`).
    `skip_filter` / `skip_score` hold the plugins whose PreFilter/PreScore said Skip,
    `skip_pre_bind` those whose PreBindPreFlight did.
    """

    __slots__ = ("_data", "all_nodes", "cluster", "framework", "skip_filter", "skip_pre_bind",
                 "skip_score", "table")

    def __init__(
        self, all_nodes: Sequence[NodeInfo] = (), cluster: ClusterState | None = None
    ) -> None:
        self._data: dict[str, Any] = {}
        # Every node of the snapshot the cycle runs on (not only the feasible ones):
        # InterPodAffinity, PodTopologySpread and ImageLocality count over all of them.
        self.all_nodes = all_nodes
        # The cluster the cycle runs on, for what is not per node (namespace labels,
        # the Services and ReplicaSets behind default topology spread constraints).
        self.cluster = cluster
        # The columnar view of `all_nodes` when the cycle runs on the fast path, else None.
        self.table: NodeTable | None = None
        # The Framework running the cycle (a `policyd.framework.runtime.Framework`), for
        # plugins that run other plugins: preemption's dry runs filter with it.
        self.framework: Any = None
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()
        self.skip_pre_bind: set[str] = set()

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def read(self, key: str) -> Any:
        """The value written under `key`; KeyError if PreFilter/PreScore did not run."""
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def clone(self) -> CycleState:
        """A copy whose data the PreFilterExtensions may update without touching this
        state (upstream's CycleState.Clone): each ClonableState value cloned, the rest
        shared; the Skip sets copied."""
        out = CycleState(self.all_nodes, self.cluster)
        out.table = self.table
        out.framework = self.framework
        out.skip_filter = set(self.skip_filter)
        out.skip_score = set(self.skip_score)
        # hasattr on the type, not isinstance against the protocol: this runs for every
        # value on every node a preemption tries, and a protocol check costs 30x more.
        out._data = {k: v.clone() if hasattr(type(v), "clone") else v
                     for k, v in self._data.items()}
        return out
