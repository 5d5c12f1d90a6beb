"""scheduler-plugins' Coscheduling (sigs.k8s.io/scheduler-plugins v0.34.7): gangs from
the `scheduling.x-k8s.io/v1alpha1` PodGroup CRD, an out-of-tree plugin a profile enables."""
