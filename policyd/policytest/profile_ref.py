"""A PolicyTest's `spec.profile`: the PolicydConfiguration (path relative to the test
file) whose profile its whole-scheduler cases run, validated as `check-config` validates
it and built by the one loader (`policyd.config.loader.build_frameworks`), so a test
exercises the weights, scoring strategy and plugin set that ship. The test's policy
files join the profile as `explain --config --policy` adds them; the profile's problems
are reported at the profile's own file:line:column."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from policyd.config.loader import build_frameworks
from policyd.config.profile_schema import DEFAULT_SCHEDULER_NAME
from policyd.config.validate import ClusterPolicies, ValidatedConfig, validate
from policyd.model.spelling import show_value
from policyd.policy.compiler import CompiledPolicy
from policyd.policytest.file_ref import unusable
from policyd.policytest.schema import ProfileSpec
from policyd.problems import Problem
from policyd.sourcefile import SourceDocument

if TYPE_CHECKING:
    from policyd.framework.runtime import Framework

# Whole-scheduler cases break ties with this seed, with or without a profile.
SEED = 0

PROFILE_RULE = "profile-ref"

# A test's inline policies, offered to the profile as the daemon offers its cluster
# policies (`validate`'s hook for policies compiled elsewhere that join every profile).
InlinePolicies = ClusterPolicies


@dataclass(frozen=True, slots=True)
class Profile:
    """A validated profile: its policies (the test's files among them) and how to
    build the framework of `scheduler_name` afresh for each case."""

    checked: ValidatedConfig
    scheduler_name: str

    @property
    def policies(self) -> list[CompiledPolicy]:
        return list(self.checked.policies.values())

    def framework(self) -> Framework:
        # Built per case, like the default profile: a case's tie-break must not depend
        # on the cases before it.
        return build_frameworks(self.checked, seed=SEED)[self.scheduler_name]


def load_profile(doc: SourceDocument, ref: ProfileSpec, base_dir: Path,
                 policy_files: Sequence[Path], problems: list[Problem], *,
                 option: bool = False, inline: InlinePolicies | None = None
                 ) -> Profile | None:
    """The profile `ref` names, with `policy_files` added to its policies and the
    compiled policies `inline` offers after them; None once its problems (and the
    profile's own, at their places) are in `problems`. `option`: the
    reference is `policyd test --config` (and `--scheduler-name`), not the document's
    spec.profile; what is wrong with it is then said at the document's start."""
    path = Path(os.path.normpath(base_dir / ref["file"]))

    def refuse(field: str, message: str) -> None:
        if option:
            flag = "--config" if field == "file" else "--scheduler-name"
            problems.append(doc.problem((), PROFILE_RULE, f"{flag}: {message}",
                                        at=(doc.line, 1)))
        else:
            problems.append(doc.problem(("spec", "profile", field), PROFILE_RULE, message))

    why = unusable(path)
    if why is not None:
        relative = "" if option else " (paths are relative to the test file)"
        refuse("file", f"profile {show_value(ref['file'])}: {why}{relative}")
        return None
    checked = validate(path, extra_policies=policy_files, cluster_policies=inline)
    problems.extend(checked.problems)
    if not checked.valid:
        refuse("file", f"profile {show_value(ref['file'])} has errors (reported at its own lines); "
                       "fix them to run the test's cases")
        return None
    names = [p.get("schedulerName", DEFAULT_SCHEDULER_NAME) for _, p in checked.profiles]
    wanted = ref.get("schedulerName")
    if wanted is None and len(names) == 1:
        wanted = names[0]
    if wanted is None or wanted not in names:
        said = "name one with schedulerName" if wanted is None else \
            f"no profile has schedulerName {wanted!r}"
        refuse("schedulerName" if wanted else "file",
               f"{said}: {ref['file']} has {', '.join(map(repr, names))}")
        return None
    return Profile(checked, wanted)
