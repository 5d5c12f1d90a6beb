"""Which profile schedules which pod: kube-scheduler takes a pod only when a profile's
schedulerName equals the pod's `spec.schedulerName` (unset means `default-scheduler`).

Offline, a pod that no profile takes is never dropped without a word: the commands
list it with the reason this module words.
"""

from __future__ import annotations

from collections.abc import Mapping

from policyd.framework.runtime import Framework
from policyd.model.records import DEFAULT_SCHEDULER_NAME, Pod


def serving_profiles(frameworks: Mapping[str, Framework], *, default_profile: bool
                     ) -> dict[str, Framework]:
    """schedulerName -> Framework for the offline commands.

    `default_profile` is true when no profile file was given: the profile is then
    kube-scheduler's default plugins (plus policies), and the pods a user most likely
    means are the default scheduler's (every pending pod of a `kubectl get` snapshot
    names it), so that profile also takes `default-scheduler` pods."""
    served = dict(frameworks)
    if default_profile and served:
        served.setdefault(DEFAULT_SCHEDULER_NAME, next(iter(frameworks.values())))
    return served


def scheduler_name_words(pod: Pod) -> str:
    """`"name"`, or what an unset schedulerName means, for messages."""
    spec = pod.raw.get("spec")
    explicit = isinstance(spec, dict) and bool(spec.get("schedulerName"))
    if explicit:
        return f'"{pod.scheduler_name}"'
    return f'"{pod.scheduler_name}" (unset in the pod)'


def unserved_reason(pod: Pod, served: Mapping[str, Framework]) -> str | None:
    """Why no profile takes `pod`, or None when one does."""
    if pod.scheduler_name in served:
        return None
    return (f"schedulerName {scheduler_name_words(pod)} is not served by this profile "
            f"(profiles: {', '.join(sorted(served))})")
