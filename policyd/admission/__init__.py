"""Admission: pods made visible to autoscalers (issue 29). A pod of an opted-in
namespace gets the profile's scheduler name and, in its own required node affinity,
every policy filter rule kube-scheduler can express (`projection`, `mutation`), so
cluster-autoscaler and Karpenter, which simulate kube-scheduler, see them."""
