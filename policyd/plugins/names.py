"""Names of the built-in plugins: exactly kube-scheduler's, so profiles carry over."""

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
# Not upstream: rejects pods with PersistentVolumeClaims, since policyd has no volume
# plugins yet and placing such a pod blindly could strand it away from its volume.
VOLUME_UNSUPPORTED = "VolumeUnsupported"
