"""What a file is, from its document's `kind`, and which command takes it: the one
answer every command gives when it is handed a file of another kind (a profile given
to lint, a policy to check-config, a profile, policy or PolicyTest as --cluster).

Kept at the bottom of the layers, as plain strings, so that the snapshot loader, the
policy loader, the profile validation and the CLI all word it the same way; a unit
test ties the names to the schemas that define them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FileKind:
    """One kind of file a policyd command reads."""

    name: str
    """What the file is, for messages: `a PolicydConfiguration (a profile)`."""
    use: str
    """Which commands take it, `{path}` standing for the file."""


PROFILE = FileKind("a PolicydConfiguration (a profile)",
                   "check it with `policyd check-config {path}`; explain, simulate, audit "
                   "and run take it with --config")
POLICY = FileKind("a SchedulingPolicy (a policy)",
                  "check it with `policyd lint {path}`; explain, simulate and audit take it "
                  "with --policies")
POLICY_TEST = FileKind("a PolicyTest", "run it with `policyd test {path}`")
SNAPSHOT = FileKind("a cluster snapshot (Kubernetes objects)",
                    "explain, simulate and audit read it with --cluster (its Pods also "
                    "with --pods)")

# kind -> FileKind. The snapshot kinds are the ones a snapshot is made of (what
# `kubectl get nodes,pods -o yaml` prints); other Kubernetes kinds are left to the
# loader that reads them. kube-scheduler's KubeSchedulerConfiguration is read as a
# profile, unchanged (config.validate).
KINDS: dict[str, FileKind] = {
    "PolicydConfiguration": PROFILE,
    "KubeSchedulerConfiguration": PROFILE,
    "SchedulingPolicy": POLICY,
    "SchedulingPolicyList": POLICY,
    "PolicyTest": POLICY_TEST,
    "Node": SNAPSHOT,
    "Pod": SNAPSHOT,
    "NodeList": SNAPSHOT,
    "PodList": SNAPSHOT,
}
# `kind: List` holds items of any kind: its first item's kind says what the list is.
LIST_KIND = "List"


def file_kind(data: object) -> FileKind | None:
    """The kind of file one document makes, or None when it is none policyd knows."""
    if not isinstance(data, Mapping):
        return None
    kind = data.get("kind")
    if kind == LIST_KIND:
        items = data.get("items")
        return file_kind(items[0]) if isinstance(items, list) and items else None
    return KINDS.get(kind) if isinstance(kind, str) else None


def wrong_file(data: object, path: str, expected: FileKind) -> str | None:
    """`x.yaml is a PolicydConfiguration (a profile), not a SchedulingPolicy (a
    policy): check it with ...` when the document is of a kind policyd knows other
    than `expected`; None otherwise (then the caller's own checks word the problem)."""
    found = file_kind(data)
    if found is None or found is expected:
        return None
    return f"{path} is {found.name}, not {expected.name}: {found.use.format(path=path)}"
