"""Which profile schedules which pod: kube-scheduler takes a pod only when a profile's
schedulerName equals the pod's `spec.schedulerName` (unset means `default-scheduler`).

Offline, a pod that no profile takes is never dropped without a word: the commands
list it with the reason this module words. Asked to place such a pod anyway (explain
names one; `simulate --all-schedulers`), both take the same stand-in profile
(`stand_in_profile`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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


def stand_in_profile(served: Mapping[str, Framework]) -> Framework | None:
    """The profile explain and `simulate --all-schedulers` place a pod no profile serves
    with: the default profile (the one taking `default-scheduler` pods, which is
    kube-scheduler's default plugins when no profile file is given), else the only
    profile there is; None when several profiles leave the choice open."""
    fw = served.get(DEFAULT_SCHEDULER_NAME)
    if fw is not None:
        return fw
    distinct = list({id(f): f for f in served.values()}.values())
    return distinct[0] if len(distinct) == 1 else None


def serving_every_scheduler(served: Mapping[str, Framework], pods: Sequence[Pod]
                            ) -> tuple[dict[str, Framework], dict[str, int]]:
    """`served` plus, for each schedulerName of `pods` that no profile serves, the
    stand-in profile; and how many of `pods` each added name brings. Raises
    UnservedError when some pod needs a stand-in and there is none."""
    wanted: dict[str, int] = {}
    for pod in pods:
        if pod.scheduler_name not in served:
            wanted[pod.scheduler_name] = wanted.get(pod.scheduler_name, 0) + 1
    if not wanted:
        return dict(served), {}
    fw = stand_in_profile(served)
    if fw is None:
        names = ", ".join(f'"{n}"' for n in sorted(wanted))
        raise UnservedError(f"pods of schedulerName {names} are served by no profile and "
                            f"there is no default one to take them (profiles: "
                            f"{', '.join(sorted(served))}; none serves "
                            f'"{DEFAULT_SCHEDULER_NAME}")')
    return {**served, **dict.fromkeys(wanted, fw)}, wanted


class UnservedError(ValueError):
    """Pods no profile serves, and no stand-in profile to place them with."""
