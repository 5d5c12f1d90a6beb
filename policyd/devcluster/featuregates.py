"""Feature gates of the local control plane: one value for kube-apiserver,
kube-controller-manager and every kube-scheduler it starts, and the API versions the
gates need.

Unlike `policyd run --feature-gates` (`policyd.features`: only kube-scheduler's gates,
each refused unless policyd models it), the dev cluster passes any gate through:
kube-apiserver and kube-controller-manager read many gates policyd never models, and
the point of `policyd dev up --feature-gates` is to try upstream's alpha features
beside policyd. So a setting is checked for its shape only (the flag's grammar and Go
booleans from `policyd.features.parse_flag`, plus a name that is a gate name at all);
a well-formed name that no component knows is refused by the component, whose log
tail the start error shows.

An alpha or beta API group/version is not served unless `--runtime-config` enables it,
whatever the gates say: a gate whose objects live in such a version gets it enabled
(`API_VERSIONS`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType

from policyd.errors import PolicydError
from policyd.features import FeatureGateError, parse_flag

FLAG = "--feature-gates"
# Upstream's gate names are CamelCase words and digits (featuregate.Feature values in
# pkg/features/kube_features.go and the staging features packages).
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")

# Gate -> the API group/versions its objects are served in that kube-apiserver v1.36.3
# leaves off by default (pkg/controlplane/instance.go: betaAPIGroupVersionsDisabledByDefault,
# alphaAPIGroupVersionsDisabledByDefault and their generic* twins). Where each is said:
API_VERSIONS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    # pkg/registry/scheduling/rest/storage_scheduling.go: workloads and podgroups are
    # stored only in v1alpha2, and only with the gate on (GangScheduling and
    # TopologyAwareWorkloadScheduling depend on GenericWorkload, so they are covered).
    "GenericWorkload": ("scheduling.k8s.io/v1alpha2",),
    # pkg/scheduler/scheduler.go: with the gate on kube-scheduler watches
    # resource.k8s.io/v1beta2 DeviceTaintRules (pkg/registry/resource/rest: served in
    # v1beta2 and v1alpha3); without the version its informer never syncs.
    "DRADeviceTaintRules": ("resource.k8s.io/v1beta2",),
    # pkg/registry/resource/rest/storage_resource.go: resourcepoolstatusrequests exist
    # only in v1alpha3.
    "DRAResourcePoolStatus": ("resource.k8s.io/v1alpha3",),
    # pkg/registry/certificates/rest/storage_certificates.go: both gated resources are
    # served in v1beta1 (clustertrustbundles also in v1alpha1).
    "ClusterTrustBundle": ("certificates.k8s.io/v1beta1",),
    "PodCertificateRequest": ("certificates.k8s.io/v1beta1",),
    # pkg/controlplane/apiserver/server.go: the leader election controller watches
    # coordination.k8s.io/v1beta1 LeaseCandidates.
    "CoordinatedLeaderElection": ("coordination.k8s.io/v1beta1",),
    # pkg/registry/storagemigration/rest/storage_storagemigration.go.
    "StorageVersionMigrator": ("storagemigration.k8s.io/v1beta1",),
})


def parse_gates(text: str) -> dict[str, bool]:
    """`NAME=BOOL,...` (kube-scheduler's grammar: an optional `kube:` prefix, Go's
    booleans, blank items ignored) as settings by name, a later setting of a name
    winning; any well-formed name is accepted. Raises PolicydError (exit 2) naming the
    flag."""
    try:
        settings = parse_flag(text)
    except FeatureGateError as exc:
        raise _invalid(text, str(exc)) from None
    for name, _ in settings:
        if problem := _name_problem(name):
            raise _invalid(text, problem)
    return dict(settings)


def checked(gates: Mapping[str, bool]) -> dict[str, bool]:
    """`gates` (e.g. given to ControlPlane as a Mapping) checked as `parse_gates`
    checks a flag's names and values; raises PolicydError (exit 2)."""
    for name, value in gates.items():
        if problem := _name_problem(name):
            raise _invalid(format_gates(gates), problem)
        if not isinstance(value, bool):
            raise _invalid(format_gates(gates), f"{name}: {value!r} is not a bool")
    return dict(gates)


def _name_problem(name: str) -> str | None:
    if not name:
        return "a feature gate name is missing before '='"
    if not _NAME.fullmatch(name):
        return (f"{name!r} is not a feature gate name (letters and digits, starting "
                "with a letter)")
    return None


def _invalid(text: str, problem: str) -> PolicydError:
    return PolicydError(f'invalid argument {text!r} for "{FLAG}" flag: {problem}')


def format_gates(gates: Mapping[str, bool]) -> str:
    """The flag's value, `A=true,B=false`, in the order given."""
    return ",".join(f"{n}={str(v).lower()}" for n, v in gates.items())


def describe(gates: Mapping[str, bool]) -> str:
    """For people: the flag's value, or "defaults"."""
    return format_gates(gates) or "defaults"


def runtime_config(gates: Mapping[str, bool]) -> list[str]:
    """The group/versions to enable for the gates that are on, in table order."""
    out: list[str] = []
    for gate, versions in API_VERSIONS.items():
        if gates.get(gate):
            out.extend(v for v in versions if v not in out)
    return out


def runtime_config_args(gates: Mapping[str, bool]) -> list[str]:
    """`--runtime-config=...=true` for `runtime_config`, or nothing. A caller's own
    `--runtime-config` may follow: kube-apiserver's flag (component-base's
    ConfigurationMap) merges repeated values, the later winning per key."""
    versions = runtime_config(gates)
    return [f"--runtime-config={','.join(f'{v}=true' for v in versions)}"] if versions else []


def split_gate_args(args: Sequence[str]) -> tuple[list[str], dict[str, bool]]:
    """`args` without their `--feature-gates` flags (`--feature-gates=V` or
    `--feature-gates V`), and those flags' settings parsed and merged in order."""
    rest: list[str] = []
    values: list[str] = []
    it = iter(args)
    for arg in it:
        if arg.startswith(FLAG + "="):
            values.append(arg[len(FLAG) + 1:])
        elif arg == FLAG:
            value = next(it, None)
            if value is None:
                raise PolicydError(f"flag needs an argument: {FLAG}")
            values.append(value)
        else:
            rest.append(arg)
    merged: dict[str, bool] = {}
    for value in values:
        merged.update(parse_gates(value))
    return rest, merged


def with_gates(args: Sequence[str], gates: Mapping[str, bool]) -> list[str]:
    """`args` with one `--feature-gates` flag: `gates`, then the settings of any
    `--feature-gates` already in `args`, which win per name (a test may run a
    kube-scheduler with a gate off against an API server with it on). No flag when
    both are empty."""
    rest, own = split_gate_args(args)
    merged = merge(gates, own.items())
    return [*rest, f"{FLAG}={format_gates(merged)}"] if merged else rest


def merge(base: Mapping[str, bool], settings: Iterable[tuple[str, bool]]) -> dict[str, bool]:
    """`base` with `settings` applied, a setting of a name in `base` replacing it in
    place."""
    out = dict(base)
    out.update(settings)
    return out
