"""`policyd audit`: which bound pods run on a node their policies' filters reject now.

The CI gate for a policy change: run the new policies against the cluster's real
placement and fail when a pod already there would violate them. The policies are found
as explain and simulate find them (`frameworks_for`): with --config, each profile's
Framework is what the daemon runs, so a pod is judged by exactly the policies its
profile filters with (a policy the profile disables is not audited); the policy
plugins are taken from the Framework rather than loaded a second time.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from policyd.cli.options import choice_enum, output_option, yaml_text
from policyd.cli.schedule_cmds import (
    ClusterOpt,
    ClusterPoliciesOpt,
    ConfigOpt,
    ContextOpt,
    FieldValidation,
    KubeconfigOpt,
    PoliciesOpt,
    StrictOpt,
    ValidateOpt,
    gates_of,
)
from policyd.errors import EXIT_OK, EXIT_PROBLEMS, PolicydError
from policyd.model.k8snames import printable

if TYPE_CHECKING:  # the engine loads only when the command runs
    from policyd.engine.audit import AuditResult, PolicyChooser
    from policyd.framework.runtime import Framework
    from policyd.lint.reporters.junit_xml import Suite
    from policyd.model.records import Pod
    from policyd.policy.compiler import CompiledPolicy

# The version of the JSON output's shape; bumped only on an incompatible change.
JSON_VERSION = 1


# The formats of `-o/--output`, by name: each renders the result (with the snapshot's
# warnings) as the whole of stdout; yaml is the json document, as explain's and
# simulate's. The output functions are further down.
AUDIT_FORMATS: dict[str, Callable[[AuditResult, Sequence[str]], str]] = {
    "text": lambda result, warnings: audit_text(result) + "\n",
    "json": lambda result, warnings: json.dumps(
        audit_json(result, warnings=warnings), indent=2) + "\n",
    "yaml": lambda result, warnings: yaml_text(audit_json(result, warnings=warnings)),
    "junit": lambda result, warnings: _junit(result),
    "openreports": lambda result, warnings: _openreports(result),
}
if TYPE_CHECKING:
    AuditFormat = str
else:
    AuditFormat = choice_enum("AuditFormat", AUDIT_FORMATS)
TEXT = AuditFormat("text")


class FailOn(StrEnum):
    """Which violations make the exit code 1."""

    any = "any"
    enforce = "enforce"


def audit(
    cluster: ClusterOpt = None,
    policies: PoliciesOpt = None,
    config: ConfigOpt = None,
    namespace: Annotated[str | None, typer.Option(
        "--namespace", "-n", help="Audit only the pods of this namespace (the others "
        "still count on their nodes).")] = None,
    all_schedulers: Annotated[bool, typer.Option(
        "--all-schedulers", help="With --config: also audit pods no profile serves "
        "(other schedulers'), against every policy of every profile.")] = False,
    output: Annotated[AuditFormat, output_option()] = TEXT,
    fail_on: Annotated[FailOn, typer.Option(
        "--fail-on", help="Findings that fail the run: any (device findings included), "
        "or only violations of Enforce-mode policies (the others are still "
        "reported).")] = FailOn.any,
    validate: ValidateOpt = FieldValidation.strict,
    strict: StrictOpt = False,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    cluster_policies: ClusterPoliciesOpt = False,
) -> None:
    """Audit bound pods: for each, which filter rules of the policies that apply to it
    reject the node it runs on now (after a policy change or a node's labels drifted).

    Each rule is asked about the node as it is, with the pod itself taken off it, as
    the scheduler saw it before placing the pod: a headroom or maxPodsPerNode rule does
    not count a pod against itself. Policies in both modes are audited; each violation
    names the policy's mode. Scores are not audited (a score ranks nodes, it cannot be
    violated). Devices too: every allocated device of a bound pod's ResourceClaims is
    asked what the allocator would ask today (still published; no NoExecute taint the
    request does not tolerate, which evicts the pod, nor NoSchedule; its DeviceClass
    present and the class's and request's selectors still selecting it), whatever
    the policies. Without --config every bound pod is audited against the --policies;
    with --config a pod is audited against the policies of the profile its
    schedulerName names, and pods of other schedulers are skipped unless
    --all-schedulers. Finished and terminating pods, and pods on a node the snapshot
    does not hold, are listed as skipped.

    Reads the snapshot --cluster FILE or, without it, the live cluster (listed once,
    nothing written), whose SchedulingPolicy objects are audited too as explain and
    simulate run them (always without --config, with it when the profile sets
    clusterPolicies: true or --cluster-policies is given).

    Exit 0 when no pod violates a policy (and no device finding), 1 when one does (see
    --fail-on), 2 for bad input (including unknown fields, unless --validate says
    otherwise)."""
    from policyd.cli.schedule_cmds import (
        check_cluster_policies_flag,
        empty_namespace,
        frameworks_for,
        label_policies,
        load_input,
        require_paths,
    )
    from policyd.engine.audit import audit as run
    from policyd.engine.audit import label_case_mismatches
    from policyd.engine.device_audit import audit_devices
    from policyd.policy.policy_schema import ENFORCE

    check_cluster_policies_flag(cluster_policies, cluster)
    require_paths(config, *(policies or []))
    source = load_input(cluster, kubeconfig, context, validate, strict)
    snap = source.snapshot
    if config is None and not policies and not source.policies:
        raise PolicydError("nothing to audit: give the policies with --policies PATH "
                           "and/or a profile with --config (a live cluster's "
                           "SchedulingPolicy objects count too; it has none)")
    frameworks = frameworks_for(config, policies or [], None, source.policies,
                                snap.warnings, cluster_policies_flag=cluster_policies)
    choose = policy_chooser(frameworks, by_profile=config is not None,
                             all_schedulers=all_schedulers)
    pods = [p for p in snap.pods if namespace is None or p.namespace == namespace]
    state = snap.cluster(gates_of(frameworks))
    result = run(state, pods, choose)
    result.devices = audit_devices(state, pods)
    snap.warnings.extend(unused_exceptions(frameworks, snap.pods))
    result.label_case = label_case_mismatches(
        [p for fw in frameworks.values() for p in label_policies(fw)], snap.nodes)
    for w in snap.warnings:
        print(f"policyd: warning: {printable(w)}", file=sys.stderr)
    # -n with a misspelt namespace would audit nothing and pass: say so, and what was meant.
    missing = empty_namespace(namespace, snap.pods) if namespace is not None else ""
    if missing:
        print(f"policyd: warning: {printable(missing)}: no pod audited", file=sys.stderr)
    for n in snap.notes:
        print(f"policyd: note: {n}", file=sys.stderr)
    text = AUDIT_FORMATS[output](result, snap.warnings)
    # Names and values read from the cluster reach the terminal escaped.
    sys.stdout.write(printable(text) if output == TEXT else text)
    failing = [v for v in result.violations
               if fail_on is FailOn.any or v.mode == ENFORCE]
    devices_fail = fail_on is FailOn.any and bool(result.devices)
    raise typer.Exit(EXIT_PROBLEMS if failing or devices_fail else EXIT_OK)


def _openreports(result: AuditResult) -> str:
    """The OpenReports objects of the audit (`policyd.engine.openreports`), as a YAML
    List for `kubectl apply -f -`: every result timestamped now."""
    import time

    from policyd.engine.openreports import findings, report_list, reports

    now = time.time()
    return yaml_text(report_list(reports(findings(result), lambda _: now)))


def unused_exceptions(frameworks: Mapping[str, Framework], pods: Sequence[Pod]
                      ) -> list[str]:
    """A warning per policy exception that matches no pod of the cluster read (among
    those its policy applies to): lint's exception-matches-nothing, against real pods."""
    from policyd.policy.compiler import profile_policies

    policies = {p.policy_name: p for fw in frameworks.values()
                for p in profile_policies(fw)}
    out = []
    for p in policies.values():
        for e in p.scopes.exceptions:
            if not any(p.applies(pod) and e.matches(pod) for pod in pods):
                out.append(f"policy {p.policy_name}: exception {e.name} matches no pod of "
                           "the cluster read [exception-matches-nothing]")
    return out


def policy_chooser(frameworks: Mapping[str, Framework], *, by_profile: bool,
                    all_schedulers: bool) -> PolicyChooser:
    """Without a profile file the policies judge every pod (no profile says whose
    pods they are: the CI question is "does anything running violate them?"). With
    one, a pod gets its profile's policies, as the daemon would have filtered it."""
    from policyd.engine.audit import by_scheduler
    from policyd.policy.compiler import profile_policies

    per_profile = {name: profile_policies(fw) for name, fw in frameworks.items()}
    union: dict[str, CompiledPolicy] = {}
    for found in per_profile.values():
        for p in found:
            union.setdefault(p.policy_name, p)
    everything = tuple(union.values())
    if not by_profile:
        return by_scheduler({}, everything)
    return by_scheduler(per_profile, everything if all_schedulers else None)


# ---- output ----------------------------------------------------------------------

def summary_line(result: AuditResult) -> str:
    """`3 pods violate 2 policies (hw-encrypt: 2, env-prod: 1); 120 pods checked`."""
    per_policy = result.violating_pods()
    checked = f"{result.checked} pod{'s' if result.checked != 1 else ''} checked"
    if result.devices:
        n = len({f.pod for f in result.devices})
        checked += (f"; {n} pod{'s' if n != 1 else ''} hold{'s' if n == 1 else ''} "
                    "devices they would not get today")
    if not per_policy:
        return f"no violations; {checked}"
    pods = len({v.pod for v in result.violations})
    counts = ", ".join(f"{name}: {n}" for name, n in per_policy.items())
    return (f"{pods} pod{'s' if pods != 1 else ''} violate{'s' if pods == 1 else ''} "
            f"{len(per_policy)} polic{'ies' if len(per_policy) != 1 else 'y'} "
            f"({counts}); {checked}")


# Skipped pods listed one per line in text; the other kinds are counted (a cluster
# holds many finished pods, and other schedulers' pods are not this profile's business).
_LISTED_SKIPS = ("node-missing", "terminating")
_MAX_LISTED = 20


def audit_text(result: AuditResult) -> str:
    lines: list[str] = []
    modes = {p.policy: p for p in result.policies}
    by_policy: dict[str, list[str]] = {}
    for v in result.violations:
        # A pod whose namespace's scoped mode differs from the policy's spec.mode.
        scoped = f" ({v.mode} in its namespace)" if v.mode != modes[v.policy].mode else ""
        by_policy.setdefault(v.policy, []).append(
            f"  {v.pod} on {v.node}: rule {v.rule}{scoped}: {v.message}")
    for name, entries in by_policy.items():  # violations are sorted by policy
        checks = modes[name]
        lines.append(f"policy {name} ({checks.mode}, plugin {checks.plugin}):")
        lines.extend(entries)
    if result.devices:
        lines.append("devices bound pods hold that their claims would not get today:")
        lines.extend(f"  {f.pod} on {f.node}: claim {f.claim}: {f.message}"
                     for f in result.devices[:_MAX_LISTED])
        if len(result.devices) > _MAX_LISTED:
            lines.append(f"  ... and {len(result.devices) - _MAX_LISTED} more "
                         "(-o json lists them all)")
    if result.label_case:
        lines.append("node label keys that differ from a policy's only by case (the "
                     "policy never matches them; not counted as violations):")
        lines.extend(f"  {m.node}: policy {m.policy}: {m.describe()}"
                     for m in result.label_case[:_MAX_LISTED])
        if len(result.label_case) > _MAX_LISTED:
            lines.append(f"  ... and {len(result.label_case) - _MAX_LISTED} more "
                         "(-o json lists them all)")
    if result.exempted:
        lines.append("rules bound pods are exempt from by a policy exception (not asked, "
                     "not violations):")
        lines.extend(f"  {e.pod} on {e.node}: policy {e.policy}, rule {e.rule}: exception "
                     f"{e.exception} ({e.reason}; expires {e.expires})"
                     for e in result.exempted[:_MAX_LISTED])
        if len(result.exempted) > _MAX_LISTED:
            lines.append(f"  ... and {len(result.exempted) - _MAX_LISTED} more "
                         "(-o json lists them all)")
    listed = [s for s in result.skipped if s.kind in _LISTED_SKIPS]
    for s in listed[:_MAX_LISTED]:
        lines.append(f"skipped {s.pod}: {s.reason}")
    if len(listed) > _MAX_LISTED:
        lines.append(f"... and {len(listed) - _MAX_LISTED} more skipped pods "
                     "(-o json lists them all)")
    lines.append(summary_line(result))
    if result.skipped:
        kinds: dict[str, int] = {}
        for s in result.skipped:
            kinds[s.kind] = kinds.get(s.kind, 0) + 1
        n = len(result.skipped)
        lines.append(f"{n} bound pod{'s' if n != 1 else ''} not audited: "
                     + ", ".join(f"{count} {_SKIP_WORDS.get(kind, kind)}"
                                 for kind, count in kinds.items()))
    return "\n".join(lines)


_SKIP_WORDS = {
    "finished": "finished",
    "terminating": "terminating",
    "node-missing": "on a node not in the cluster read",
    "not-served": "of schedulers no profile serves (--all-schedulers audits them)",
}


def audit_json(result: AuditResult, *, warnings: Sequence[str] = ()) -> dict[str, Any]:
    """The documented shape (version 1): `violations` sorted by policy, pod, rule;
    `policies` with each one's mode and the number of pods it applies to (`checked`)
    and violates (`violating`); `skipped` with a stable `kind`; `labelCase`, node label
    keys that differ from a policy's only by case (findings, not violations);
    `devices`, allocated devices bound pods hold that their claims would not get today
    (with a stable `kind`); `exempted`, the rules bound pods are exempt from by a
    policy exception; `summary`."""
    violating = result.violating_pods()
    return {
        "version": JSON_VERSION,
        "violations": [{"pod": v.pod, "node": v.node, "policy": v.policy,
                        "plugin": v.plugin, "rule": v.rule, "mode": v.mode,
                        "message": v.message} for v in result.violations],
        "policies": [{"policy": p.policy, "plugin": p.plugin, "mode": p.mode,
                      "checked": len(p.pods), "violating": violating.get(p.policy, 0)}
                     for p in result.policies],
        "skipped": [{"pod": s.pod, "node": s.node, "kind": s.kind, "reason": s.reason}
                    for s in result.skipped],
        "labelCase": [{"node": m.node, "policy": m.policy, "plugin": m.plugin,
                       "nodeKey": m.node_key, "policyKey": m.policy_key,
                       "message": m.describe()} for m in result.label_case],
        "devices": [{"pod": f.pod, "node": f.node, "claim": f.claim,
                     "request": f.request, "device": f.device, "kind": f.kind,
                     "message": f.message} for f in result.devices],
        "exempted": [{"pod": e.pod, "node": e.node, "policy": e.policy, "plugin": e.plugin,
                      "rule": e.rule, "exception": e.exception, "reason": e.reason,
                      "expires": e.expires} for e in result.exempted],
        "summary": {"checked": result.checked,
                    "violatingPods": len({v.pod for v in result.violations}),
                    "violations": len(result.violations),
                    "violatedPolicies": len(violating),
                    "skipped": len(result.skipped),
                    "labelCase": len(result.label_case),
                    "devices": len(result.devices),
                    "exempted": len(result.exempted)},
        "warnings": list(warnings),
    }


def _junit(result: AuditResult) -> str:
    from policyd.lint.reporters import junit_xml

    return junit_xml.render("policyd audit", junit_suites(result))


def junit_suites(result: AuditResult) -> list[Suite]:
    """A suite per policy audited, a case per pod it applies to, a failure per
    violated rule; a suite of the exempted rules, a skipped case each; and a suite of
    the pods with device findings, a failure each."""
    from policyd.lint.reporters.junit_xml import Case, Failure, Suite

    found: dict[tuple[str, str], list[Failure]] = {}
    for v in result.violations:
        found.setdefault((v.policy, v.pod), []).append(Failure(
            f"rule {v.rule}: {v.message}",
            f"pod {v.pod} on node {v.node}: policy {v.policy} ({v.mode}), "
            f"rule {v.rule}: {v.message}"))
    suites = [Suite(f"policy {p.policy} ({p.mode})",
                    [Case(f"{pod} on {node}", p.policy,
                          tuple(found.get((p.policy, pod), ())))
                     for pod, node in p.pods])
              for p in result.policies]
    devices: dict[tuple[str, str], list[Failure]] = {}
    for f in result.devices:
        devices.setdefault((f.pod, f.node), []).append(Failure(
            f"{f.kind}: claim {f.claim}", f"pod {f.pod} on node {f.node}: claim "
            f"{f.claim}: {f.message}"))
    if result.exempted:
        # Skipped, not passed: the rule was not asked for the pod.
        suites.append(Suite("policy exceptions", [
            Case(f"{e.pod} on {e.node}: rule {e.rule} of policy {e.policy}", e.policy,
                 skipped=f"exempted by exception {e.exception} ({e.reason}; expires "
                         f"{e.expires})")
            for e in result.exempted]))
    if devices:
        suites.append(Suite("devices", [Case(f"{pod} on {node}", "devices", tuple(fs))
                                        for (pod, node), fs in devices.items()]))
    return suites


__all__ = ["audit"]
