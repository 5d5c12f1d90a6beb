"""DynamicResources: kube-scheduler's DRA plugin, without device allocation (v1.36).

`plugin.py` is the plugin: upstream's behaviour for every pod without resource claims,
and a clear refusal of pods that have some; `args.py` is DynamicResourcesArgs,
defaulted and validated as upstream does.
"""

# names.DYNAMIC_RESOURCES once the plugin is registered (policyd/plugins/names.py).
NAME = "DynamicResources"
