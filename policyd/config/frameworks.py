"""Frameworks from a profile that validation found valid: building never checks.

Kept apart from `validate.py` so that the order is plain: `validate` reports every
problem and builds nothing; `build_frameworks` runs only on a result without errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from policyd.config.profile_schema import DEFAULT_SCHEDULER_NAME

if TYPE_CHECKING:  # the framework (numpy) is imported only when profiles are built
    from policyd.config.validate import ValidatedConfig
    from policyd.framework.runtime import Framework


def build_frameworks(checked: ValidatedConfig, *, seed: int | None = None
                     ) -> dict[str, Framework]:
    """One Framework per profile, by schedulerName; `seed` seeds each one's
    tie-breaking."""
    if not checked.valid:
        raise ValueError("build_frameworks needs a configuration validation found valid")
    from policyd.config.plugins import build_framework

    return {profile.get("schedulerName", DEFAULT_SCHEDULER_NAME):
            build_framework(profile, checked.policies, seed=seed, path=where)
            for where, profile in checked.profiles}
