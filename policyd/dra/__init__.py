"""Dynamic Resource Allocation: kube-scheduler v1.36's structured allocator as a library.

What the DynamicResources plugin needs to allocate a pod's claims, with no plugin, no
I/O and no CEL implementation of its own:

- `objects` decodes resource.k8s.io/v1 DeviceClasses, ResourceSlices and
  ResourceClaims from API JSON (`decode_*`; quantities through the parser the caller
  passes, policyd.model.quantity.nano_value, which sits above this layer);
- `state.gather_allocated_state` says which devices, shares and capacity allocated
  (and in-flight) claims take;
- `allocator.Allocator` is built once per pod (PreFilter) and `allocate(node, claims)`
  is called per node (Filter): upstream's search order, results and error texts;
- `selectors.CelBackend` is how CEL comes in: policyd.cel's
  `CelBackend(compile_device_selector, CelCompileError, CelRuntimeError)` inside a
  long-lived `SelectorCache`;
- `features.AllocatorFeatures.from_gates` derives the allocator's switches from the
  feature gates as the plugin does.

tests/unit/dra/test_upstream_scenes.py holds it to upstream's own allocator's outputs.
"""
