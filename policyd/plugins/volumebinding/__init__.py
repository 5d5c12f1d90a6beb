"""VolumeBinding: kube-scheduler's volume binding plugin (v1.36 semantics).

`plugin.py` is the plugin; `binder.py` decides per node which PV each unbound claim
takes or whether it is provisioned, and assumes that choice at Reserve; `prebind.py`
writes it to the API server and waits for the PV controller; `pv_matcher.py` is
upstream's FindMatchingVolume; `provisioning.py` the dynamic provisioning checks;
`objects.py` the claim and PV fields read from raw JSON; `hints.py` the queueing hints.
"""

from policyd.plugins import names

NAME = names.VOLUME_BINDING
