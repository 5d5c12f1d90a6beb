"""DynamicResources: kube-scheduler's DRA plugin, without device allocation (v1.36).

`plugin.py` is the plugin: upstream's behaviour for every pod without resource claims,
and a clear refusal of pods that have some; `args.py` is DynamicResourcesArgs,
defaulted and validated as upstream does.
"""

from policyd.plugins import names

NAME = names.DYNAMIC_RESOURCES
