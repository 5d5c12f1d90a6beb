"""`policyd admit`: a pod as the admission webhook would admit it, offline.

The webhook's code path (`policyd.admission`) on a Pod file: the scheduler name of the
profile that applies, each policy filter rule kube-scheduler can express added to the
pod's required node affinity, annotations naming the rules an autoscaler can and
cannot see. For CI (what will a pod look like once admitted?) and for people.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from policyd.cli.options import choice_enum, output_option
from policyd.cli.schedule_cmds import (
    DOCUMENT_FORMATS,
    ConfigOpt,
    FieldValidation,
    PoliciesOpt,
    ValidateOpt,
    frameworks_for,
    load_pod_files,
)
from policyd.errors import EXIT_OK, InputFileError, PolicydError
from policyd.model.k8snames import printable

if TYPE_CHECKING:
    from policyd.framework.runtime import Framework
    from policyd.model.records import Pod

# `-o/--output`: the admitted pod as explain's and simulate's documents print.
if TYPE_CHECKING:
    AdmitFormat = str
else:
    AdmitFormat = choice_enum("AdmitFormat", DOCUMENT_FORMATS)
YAML = AdmitFormat("yaml")


def admit(
    pod: Annotated[Path, typer.Option("--pod", help="The Pod file to admit (YAML or JSON, "
                                      "one Pod).")],
    config: ConfigOpt = None,
    policies: PoliciesOpt = None,
    scheduler_name: Annotated[str | None, typer.Option(
        "--scheduler-name", help="The profile the pod's namespace opts into (default: the "
        "profile the pod names, else the default profile).")] = None,
    override_scheduler: Annotated[bool, typer.Option(
        "--override-scheduler", help="Also take a pod that names another scheduler "
        "(left alone by default).")] = False,
    output: Annotated[AdmitFormat, output_option()] = YAML,
    validate: ValidateOpt = FieldValidation.strict,
) -> None:
    """Print a pod as the admission webhook would admit it, its policies visible to
    autoscalers.

    It gets the profile's scheduler name, and each filter rule of the profile's
    Enforce-mode policies that applies to the pod and that kube-scheduler can
    express (node label rules, annotations mapped to node labels) added to every
    required node affinity term, so that the autoscalers simulating kube-scheduler
    (cluster-autoscaler, Karpenter) see it. Annotations on the pod name the rules
    they can and cannot see (see docs/autoscalers.md); what the webhook would say
    in the AdmissionReview's warnings goes to stderr (`Warning: ...`, as kubectl
    shows them). A pod that names another scheduler is printed unchanged unless
    --override-scheduler. Admitting the printed pod again changes nothing.

    Exit 0 with the admitted pod, 2 for bad input (a file without exactly one Pod, an
    unknown --scheduler-name, an invalid profile or policy)."""
    from policyd.admission.mutation import admit as admit_pod
    from policyd.admission.projection import project_pod

    files, warnings = load_pod_files([pod], validate)
    found = files[0].pods
    if len(found) != 1:
        raise InputFileError(f"holds {len(found)} pods; policyd admit takes one",
                             where=str(pod))
    target = found[0]
    frameworks = frameworks_for(config, policies or [], None, None, warnings)
    name, fw = _profile(target, frameworks, scheduler_name)
    from policyd.policy.compiler import profile_policies

    admitted = admit_pod(target.raw, project_pod(target, profile_policies(fw)),
                         scheduler_name=name, override_scheduler=override_scheduler)
    for w in warnings:
        print(f"policyd: warning: {printable(w)}", file=sys.stderr)
    for w in admitted.warnings:
        print(f"Warning: {printable(w)}", file=sys.stderr)
    DOCUMENT_FORMATS[output](admitted.pod)
    raise typer.Exit(EXIT_OK)


def _profile(pod: Pod, frameworks: dict[str, Framework], asked: str | None
             ) -> tuple[str, Framework]:
    """(scheduler name, profile) the pod is admitted for."""
    from policyd.engine.profiles import stand_in_profile

    if asked is not None:
        fw = frameworks.get(asked)
        if fw is None:
            raise PolicydError(f"--scheduler-name {asked}: no such profile (profiles: "
                               f"{', '.join(sorted(frameworks))})")
        return asked, fw
    fw = frameworks.get(pod.scheduler_name)
    if fw is not None:
        return pod.scheduler_name, fw
    fallback = stand_in_profile(frameworks)
    if fallback is None:
        raise PolicydError("several profiles and none is the default: say which one the "
                           f"pod's namespace opts into with --scheduler-name (profiles: "
                           f"{', '.join(sorted(frameworks))})")
    return fallback.profile_name, fallback
