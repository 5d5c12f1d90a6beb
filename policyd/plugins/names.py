"""Names of the built-in plugins: exactly kube-scheduler's, so profiles carry over.

Also every other in-tree plugin name of kube-scheduler v1.36
(`pkg/scheduler/framework/plugins/names/names.go`): policyd does not implement those,
but a policy may not take one of their names (a profile copied from kube-scheduler
that names `VolumeBinding` means upstream's plugin, never a policy), and a profile that
enables or configures one is told that policyd has no such plugin.
"""

from policyd.model.pod_groups import COSCHEDULING_PLUGIN

PRIORITY_SORT = "PrioritySort"
NODE_UNSCHEDULABLE = "NodeUnschedulable"
NODE_NAME = "NodeName"
TAINT_TOLERATION = "TaintToleration"
NODE_AFFINITY = "NodeAffinity"
NODE_PORTS = "NodePorts"
NODE_RESOURCES_FIT = "NodeResourcesFit"
NODE_RESOURCES_BALANCED_ALLOCATION = "NodeResourcesBalancedAllocation"
IMAGE_LOCALITY = "ImageLocality"
INTER_POD_AFFINITY = "InterPodAffinity"
POD_TOPOLOGY_SPREAD = "PodTopologySpread"
VOLUME_RESTRICTIONS = "VolumeRestrictions"
NODE_VOLUME_LIMITS = "NodeVolumeLimits"
VOLUME_BINDING = "VolumeBinding"
VOLUME_ZONE = "VolumeZone"
DEFAULT_PREEMPTION = "DefaultPreemption"
DYNAMIC_RESOURCES = "DynamicResources"
NODE_DECLARED_FEATURES = "NodeDeclaredFeatures"
GANG_SCHEDULING = "GangScheduling"
# Out of tree: scheduler-plugins' (sigs.k8s.io/scheduler-plugins), in no default profile.
COSCHEDULING = COSCHEDULING_PLUGIN

# kube-scheduler v1.36's in-tree plugins that policyd does not implement.
UPSTREAM_NOT_IMPLEMENTED = frozenset({
    "DefaultBinder",
    "PodGroupPodsCount",
    "SchedulingGates",
    "TopologyPlacementGenerator",
})
