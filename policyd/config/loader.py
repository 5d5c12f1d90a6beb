"""Load a profile file into validated frameworks: the one path from a
PolicydConfiguration file to a `Framework` per profile.

`validate_config_file` is what `policyd check-config`, `explain`, `simulate` and `audit`
(`--config`) and the daemon (before its first request, and on every reload) call:
`validate.validate` reports every problem and builds nothing; `build_frameworks` runs
only on a result without errors, so a caller can never run half a configuration.
Kept above `validate.py` (an import-linter contract) so that validation never builds.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from policyd.config.model import PolicydConfig
from policyd.config.profile_schema import DEFAULT_SCHEDULER_NAME
from policyd.config.validate import ClusterPolicies, ValidatedConfig, validate
from policyd.features import FeatureGates
from policyd.problems import Problem

if TYPE_CHECKING:  # the framework (numpy) is imported only when profiles are built
    from policyd.framework.runtime import Framework


def validate_config_file(
    path: Path,
    *,
    extra_policies: Sequence[Path] = (),
    seed: int | None = None,
    cluster_policies: ClusterPolicies | None = None,
    cluster_policies_opt_in: bool = False,
    gate_overrides: Sequence[tuple[str, bool]] = (),
    pinned_gates: FeatureGates | None = None,
    cluster_policies_flag: bool = False,
) -> tuple[PolicydConfig, dict[str, Framework], list[Problem]]:
    """Check the profile at `path` and the policies it names, then build it if valid.

    Returns the settings with defaults applied (always complete: invalid values fall
    back to defaults), one Framework per profile by schedulerName, and every problem,
    profile's first in file order, then the policies'. `frameworks` is complete only
    when no problem is an error; with any error it is empty. `extra_policies` (paths
    given on a command line) are loaded as if listed in `policies`; `seed` seeds each
    framework's tie-breaking; `cluster_policies` adds already-compiled policies (see
    `validate.validate`).

    `cluster_policies_opt_in`: the cluster policies count only when the profile sets
    `clusterPolicies: true` (or `cluster_policies_flag`, `--cluster-policies`, says
    it for the file). They are offered first, since only the validation reads
    that setting (and the profile may name them); a profile that does not enable them
    is validated again without, so that naming one there is the error it is for the
    daemon. The daemon leaves this False: it offers them only when the profile it
    started with enabled them, and a reload that turns them off needs a restart.

    Feature gates: the profile's `featureGates`, then `gate_overrides` (`policyd run
    --feature-gates`), over v1.36's defaults (`config.feature_gates`); the frameworks
    are built with them (each keeps them as `Framework.features`), or with
    `pinned_gates` when given: the daemon's reload keeps the gates it started with.
    """
    checked = validated_config_file(path, extra_policies=extra_policies,
                                    cluster_policies=cluster_policies,
                                    cluster_policies_opt_in=cluster_policies_opt_in,
                                    gate_overrides=gate_overrides,
                                    cluster_policies_flag=cluster_policies_flag)
    frameworks = build_frameworks(checked, seed=seed, features=pinned_gates) \
        if checked.valid else {}
    return checked.config, frameworks, checked.problems


def validated_config_file(
    path: Path,
    *,
    extra_policies: Sequence[Path] = (),
    cluster_policies: ClusterPolicies | None = None,
    cluster_policies_opt_in: bool = False,
    gate_overrides: Sequence[tuple[str, bool]] = (),
    cluster_policies_flag: bool = False,
) -> ValidatedConfig:
    """What `validate_config_file` validates, before building (the arguments are
    its): for callers that need the validation's own result, such as check-config's
    effective configuration."""
    checked = validate(path, extra_policies=extra_policies,
                       cluster_policies=cluster_policies, gate_overrides=gate_overrides,
                       cluster_policies_flag=cluster_policies_flag)
    if cluster_policies_opt_in and cluster_policies is not None \
            and not checked.config.cluster_policies:
        checked = validate(path, extra_policies=extra_policies,
                           gate_overrides=gate_overrides)
    return checked


def build_frameworks(checked: ValidatedConfig, *, seed: int | None = None,
                     features: FeatureGates | None = None) -> dict[str, Framework]:
    """One Framework per profile, by schedulerName; `seed` seeds each one's
    tie-breaking; `features` (default: the configuration's gates) are what its plugins
    are built under."""
    if not checked.valid:
        raise ValueError("build_frameworks needs a configuration validation found valid")
    from policyd.config.plugins import build_framework

    gates = features if features is not None else checked.config.feature_gates
    return {profile.get("schedulerName", DEFAULT_SCHEDULER_NAME):
            build_framework(profile, checked.policies, seed=seed, path=where,
                            features=gates)
            for where, profile in checked.profiles}
