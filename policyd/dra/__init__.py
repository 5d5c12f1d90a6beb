"""Dynamic Resource Allocation: kube-scheduler v1.36's structured allocator as a library.

`objects` decodes resource.k8s.io/v1 DeviceClasses, ResourceSlices and ResourceClaims;
`state.gather_allocated_state` says which devices are taken; `allocator.Allocator`
allocates a pod's claims on one node with upstream's search order and messages. CEL
selectors come in through `selectors.CelBackend`, so this package depends on no CEL
implementation. No plugin, no I/O: the DynamicResources plugin drives it.
"""
