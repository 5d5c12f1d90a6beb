"""DynamicResources: kube-scheduler v1.36's DRA plugin, allocating devices to claims.

`plugin.py` is the plugin, by extension point; `claims.py` finds a pod's claims,
`allocation.py` prepares them and builds the cycle's `policyd.dra.Allocator`,
`scoring.py` scores the alternatives chosen, `binding.py` reads binding conditions,
`hints.py` holds its cluster events, `store.py` names what it reads of the cluster's
DRA objects, and `args.py` is DynamicResourcesArgs, defaulted and validated as
upstream does.
"""

from policyd.plugins import names

NAME = names.DYNAMIC_RESOURCES
