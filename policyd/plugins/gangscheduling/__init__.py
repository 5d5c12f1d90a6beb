"""GangScheduling: the pods of a scheduling.k8s.io PodGroup placed all or nothing."""
