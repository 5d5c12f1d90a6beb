"""Issue 26's kinds of input through every command that reads a user file.

test_fuzz_inputs.py mutates each file role's example at random and by hand; this file
is the issue's checklist, case by case, through every command and program that takes
the role: `policyd` lint, check-config, test, explain, simulate, audit, diff (the file
on either side of the comparison) and run (up to its validation: `fuzz_support` stops it
where it would connect), `kubectl policyd` explain, simulate, audit and diff, and the
kubeconfig those read. The kinds: numbers at
their limits, paths that are not regular files, objects the API server would refuse,
decoding surprises, a file of the wrong kind, and `kubectl get all -A -o yaml` content.

Each outcome must be one of the documented exits (0, 1, 2; never 70), with no
traceback, no raw ESC on stdout or stderr, an exit 2 naming the input on its first
line, and finish (the alarm of `fuzz_support.run_cli`).
"""

from __future__ import annotations

import json
import re
import socket
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from policyd.model import bounded_read
from tests.unit.cli.fuzz_support import (
    CLUSTER,
    DEMO,
    DEMO_PODS,
    EXAMPLE_PROFILE,
    METRICS_EXAMPLE,
    POD,
    POLICIES,
    TARGETS,
    Target,
    _read,
    run_target,
)
from tests.unit.cli.test_fuzz_inputs import parse

# A named pipe nobody writes to is refused after the reader's idle timeout: short here.
FIFO_IDLE_S = 0.2
# What a policy reads the latency annotation with, and the profile using the policies.
LATENCY_POLICIES: list[str | Path] = ["--policies", POLICIES]


def _t(name: str, kind: str, argv: Callable[[Path, Path], list[str | Path]],
       example: Callable[[], str], program: str = "policyd") -> Target:
    return Target(name, kind, argv, example, program)


SNAPSHOT = _read(DEMO / "cluster.yaml")
PROFILE = _read(EXAMPLE_PROFILE)
LATENCY_POLICY = POLICIES / "low-latency.yaml"
POLICY = _read(LATENCY_POLICY)
KUBECTL = "kubectl-policyd"
BAD_KUBECONFIG_ROLE = "kubeconfig"


def _own() -> list[Target]:
    """The targets fuzz_support has not: audit, the kubectl plugin, the kubeconfig,
    and explain/simulate with the policies that read the cluster's numbers."""
    out = []
    for prog, prefix in (("policyd", ""), (KUBECTL, "kubectl-")):
        out += [
            _t(f"{prefix}audit-cluster", "snapshot",
               lambda d, f: ["audit", "--cluster", f, *LATENCY_POLICIES], SNAPSHOT, prog),
            _t(f"{prefix}audit-policies", "policy",
               lambda d, f: ["audit", *CLUSTER, "--policies", f], POLICY, prog),
            _t(f"{prefix}audit-config", "profile",
               lambda d, f: ["audit", *CLUSTER, "--config", f], PROFILE, prog),
            _t(f"{prefix}explain-scored-cluster", "snapshot",
               lambda d, f: ["explain", "--cluster", f, *DEMO_PODS, *POD, *LATENCY_POLICIES],
               SNAPSHOT, prog),
            _t(f"{prefix}simulate-scored-cluster", "snapshot",
               lambda d, f: ["simulate", "--cluster", f, *DEMO_PODS, *LATENCY_POLICIES],
               SNAPSHOT, prog),
            _t(f"{prefix}simulate-config-file", "profile",
               lambda d, f: ["simulate", *CLUSTER, *DEMO_PODS, "--config", f], PROFILE, prog),
            # Never a valid kubeconfig here: a valid one would connect.
            _t(f"{prefix}explain-kubeconfig", BAD_KUBECONFIG_ROLE,
               lambda d, f: ["explain", "--kubeconfig", f, "shop/orders-api"], SNAPSHOT, prog),
            _t(f"{prefix}simulate-kubeconfig", BAD_KUBECONFIG_ROLE,
               lambda d, f: ["simulate", "--kubeconfig", f], SNAPSHOT, prog),
            _t(f"{prefix}audit-kubeconfig", BAD_KUBECONFIG_ROLE,
               lambda d, f: ["audit", "--kubeconfig", f, *LATENCY_POLICIES], SNAPSHOT, prog),
            # diff reads each role twice over (two versions): the file on either side.
            _t(f"{prefix}diff-cluster", "snapshot",
               lambda d, f: ["diff", LATENCY_POLICY, POLICIES, "--cluster", f], SNAPSHOT,
               prog),
            _t(f"{prefix}diff-old-policy", "policy",
               lambda d, f: ["diff", f, LATENCY_POLICY, *CLUSTER], POLICY, prog),
            _t(f"{prefix}diff-new-policy", "policy",
               lambda d, f: ["diff", LATENCY_POLICY, f, *CLUSTER], POLICY, prog),
            _t(f"{prefix}diff-config", "profile",
               lambda d, f: ["diff", EXAMPLE_PROFILE, f, *CLUSTER], PROFILE, prog),
            _t(f"{prefix}diff-kubeconfig", BAD_KUBECONFIG_ROLE,
               lambda d, f: ["diff", LATENCY_POLICY, POLICIES, "--kubeconfig", f], SNAPSHOT,
               prog),
        ]
    return out


ALL: dict[str, Target] = {**TARGETS, **{t.name: t for t in _own()}}
# Every command and program that takes each role (the non-regular paths go through all
# of them: each opens the file its own way).
ROLES: dict[str, list[str]] = {
    "snapshot": ["simulate-cluster", "explain-cluster", "audit-cluster",
                 "explain-scored-cluster", "simulate-scored-cluster",
                 "kubectl-explain-scored-cluster", "kubectl-simulate-scored-cluster",
                 "kubectl-audit-cluster", "diff-cluster", "kubectl-diff-cluster"],
    "policy": ["lint", "check-config-policy", "test-policy", "simulate-policies",
               "explain-policies", "audit-policies", "run-policies",
               "kubectl-audit-policies", "diff-old-policy", "diff-new-policy",
               "kubectl-diff-new-policy"],
    "profile": ["check-config", "simulate-config-file", "explain-config", "audit-config",
                "run-config", "kubectl-simulate-config-file", "kubectl-audit-config",
                "diff-config", "kubectl-diff-config"],
    "policytest": ["test"],
    "metrics": ["simulate-metrics", "explain-metrics"],
    "pods": ["simulate-pods", "explain-pods"],
    "pod": ["explain-pod-file"],
    BAD_KUBECONFIG_ROLE: ["explain-kubeconfig", "simulate-kubeconfig", "audit-kubeconfig",
                          "kubectl-explain-kubeconfig", "kubectl-simulate-kubeconfig",
                          "kubectl-audit-kubeconfig", "diff-kubeconfig",
                          "kubectl-diff-kubeconfig"],
}
# The few of each role that get the content cases (one per loader, both programs where
# the role is the kubectl plugin's too); the rest get the path cases.
CONTENT_TARGETS: dict[str, list[str]] = {
    "snapshot": ["explain-scored-cluster", "simulate-scored-cluster", "audit-cluster",
                 "kubectl-explain-scored-cluster", "diff-cluster"],
    "policy": ["lint", "simulate-policies", "test-policy", "diff-new-policy"],
    "profile": ["check-config", "simulate-config-file", "run-config", "diff-config"],
    "policytest": ["test"],
    "metrics": ["simulate-metrics", "explain-metrics"],
    "pods": ["simulate-pods"],
    "pod": ["explain-pod-file"],
    BAD_KUBECONFIG_ROLE: ["explain-kubeconfig", "kubectl-audit-kubeconfig"],
}

# ---------------------------------------------------------------------------------
# paths that are not regular files

Make = Callable[[Path], None]


def _fifo(path: Path) -> None:
    import os

    os.mkfifo(path)


def _socket(path: Path) -> None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()  # the socket file stays, as a dead daemon's does


def _link_to(target: str) -> Make:
    def make(path: Path) -> None:
        path.symlink_to(target)
    return make


def _empty_dir(path: Path) -> None:
    path.mkdir()


PATHS: dict[str, Make] = {
    "fifo-without-writer": _fifo,
    "dev-zero": _link_to("/dev/zero"),
    "dev-null": _link_to("/dev/null"),
    "dev-urandom": _link_to("/dev/urandom"),
    "socket": _socket,
    "empty-directory": _empty_dir,
}

# ---------------------------------------------------------------------------------
# numbers at their limits, written as YAML text (each YAML version reads some of them
# differently: the point), bare and quoted (a label or annotation is a string)

LIMITS = ["1e308", "-1e308", ".nan", ".inf", "-.inf", "9223372036854775808",
          "-9223372036854775809", "2147483648", "-2147483649", "1e400", "0x1F", "0o17",
          "1_000", "4.9e-324", "1e-400"]


def _at_limit(example: str, old: str, template: str) -> dict[str, str]:
    assert old in example, old  # the spot exists: the case tests what it says
    return {v: example.replace(old, template.format(v), 1) for v in LIMITS}


# Two nodes at opposite ends: each value finite, their difference (a range, a sum)
# not; or beyond what an int64 score holds once weighted.
PAIRS = [("1e308", "-1e308"), ("1.7976931348623157e308", "-1.7976931348623157e308"),
         ("9.2e18", "-9.2e18"), ("9223372036854775807", "-9223372036854775808"),
         ("1e300", "0")]
# Where the two nodes' values are, in each role's example.
PAIR_SPOTS: dict[str, tuple[str, str, str]] = {
    "snapshot": ("myorg.io/latency-ms: '4'", "myorg.io/latency-ms: '3'",
                 "myorg.io/latency-ms: '{}'"),
    "policytest": ('myorg.io/latency-ms: "5"', 'myorg.io/latency-ms: "20"',
                   "myorg.io/latency-ms: '{}'"),
    "metrics": ("node-a1: 30", "node-a2: 12.5", "{}"),
}


def _pair_cases(role: str, ex: str) -> Iterator[tuple[str, str]]:
    if role not in PAIR_SPOTS:
        return
    first, second, template = PAIR_SPOTS[role]
    assert first in ex and second in ex, (first, second)
    for hi, lo in PAIRS:
        a = template.format(hi) if role != "metrics" else f"node-a1: {hi}"
        b = template.format(lo) if role != "metrics" else f"node-a2: {lo}"
        yield f"numbers-pair-{hi}-{lo}", ex.replace(first, a, 1).replace(second, b, 1)


def _number_cases(role: str) -> Iterator[tuple[str, str]]:
    if role == "snapshot":
        ex = SNAPSHOT()
        spots = {"annotation": ("myorg.io/latency-ms: '4'", "myorg.io/latency-ms: '{}'"),
                 "annotation-bare": ("myorg.io/latency-ms: '4'", "myorg.io/latency-ms: {}"),
                 "allocatable-cpu": ("    cpu: '8'", "    cpu: '{}'")}
    elif role == "profile":
        ex = PROFILE()
        spots = {"plugin-weight": ("weight: 3", "weight: {}"),
                 "max-backoff": ("podMaxBackoffSeconds: 10", "podMaxBackoffSeconds: {}"),
                 "resource-weight": ("weight: 1", "weight: {}"),
                 "qps": ("qps: 50", "qps: {}")}
    elif role == "policy":
        ex = POLICY()
        spots = {"policy-weight": ("weight: 2", "weight: {}"),
                 "rule-weight": ("weight: 80", "weight: {}"),
                 "label-value-score": ("zone-a: 100", "zone-a: {}")}
    elif role == "policytest":
        ex = TARGETS["test"].example()
        spots = {"node-annotation": ('myorg.io/latency-ms: "5"', "myorg.io/latency-ms: '{}'")}
    elif role == "metrics":
        ex = METRICS_EXAMPLE
        spots = {"metric": ("node-a1: 30", "node-a1: {}")}
    elif role in ("pods", "pod"):
        ex = TARGETS["simulate-pods" if role == "pods" else "explain-pod-file"].example()
        spots = {"cpu-request": ("cpu: '1'", "cpu: '{}'")}
    else:
        return
    yield from _pair_cases(role, ex)
    for spot, (old, template) in spots.items():
        for value, text in _at_limit(ex, old, template).items():
            yield f"number-{spot}-{value}", text

# ---------------------------------------------------------------------------------
# objects the API server refuses, and what must reach the terminal escaped


API_INVALID: dict[str, tuple[str, str]] = {
    # (what is replaced in the snapshot's first node, by what)
    "node-name-with-slash": ("name: node-a1\n", "name: web/0\n"),
    "node-name-uppercase": ("name: node-a1\n", "name: Node-A1\n"),
    "node-name-254-chars": ("name: node-a1\n", f"name: {'a' * 254}\n"),
    "node-name-esc": ("name: node-a1\n", 'name: "node-\\e[31mred\\e[0m"\n'),
    "node-name-bell-and-csi": ("name: node-a1\n", 'name: "n\\a\\x9b2J"\n'),
    "label-key-cyrillic-o": ("    node.kubernetes.io/hw-encrypt: 'true'",
                             "    n\u043ede.kubernetes.io/hw-encrypt: 'true'"),
    "label-key-leading-dash": ("    env: prod\n", "    -env: prod\n"),
    "label-key-two-slashes": ("    env: prod\n", "    a/b/c: prod\n"),
    "label-key-esc": ("    env: prod\n", '    "e\\env": prod\n'),
    "label-value-64-chars": ("    env: prod\n", f"    env: {'v' * 64}\n"),
    "label-value-space": ("    env: prod\n", "    env: 'pro d'\n"),
    "label-value-esc": ("    env: prod\n", '    env: "\\e]0;title\\a"\n'),
    "annotation-esc": ("myorg.io/latency-ms: '4'", 'myorg.io/latency-ms: "\\e[2J"'),
    "label-yaml11-yes": ("    env: prod\n", "    env: yes\n"),
    "label-yaml11-on": ("    env: prod\n", "    env: on\n"),
    "label-bare-true": ("    env: prod\n", "    env: true\n"),
    "label-bare-number": ("    env: prod\n", "    env: 1e400\n"),
}


def _api_invalid_cases(role: str) -> Iterator[tuple[str, str]]:
    if role == "snapshot":
        ex = SNAPSHOT()
        for name, (old, new) in API_INVALID.items():
            assert old in ex, old
            yield f"api-{name}", ex.replace(old, new, 1)
        ns = ("---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n"
              "  labels: {{pci: {}, audit: on, x: yes}}\n")
        for value in ("true", "yes", "'true'", "1e400", ".nan"):
            yield f"api-namespace-label-{value}", ex + ns.format(value)
        pod = "name: web-3\n  namespace: shop\n"
    elif role in ("pods", "pod"):
        ex = TARGETS["simulate-pods" if role == "pods" else "explain-pod-file"].example()
        pod = "name: orders-api\n  namespace: shop\n"
    else:
        # A name printed back from every other kind: its ESC must come out escaped.
        ex = ALL[ROLES[role][0]].example()
        if "\n  name: " in ex:
            yield "api-name-esc", ex.replace("\n  name: ", '\n  name: "x\\e[31m" #', 1)
        return
    if pod in ex:
        names: tuple[tuple[str, str | None], ...] = (
            ("slash", "web/0"), ("esc", '"w\\e[31m"'), ("uppercase", "Web"),
            ("namespace-esc", None))
        for case, renamed in names:
            text = ex.replace(pod, f"name: {renamed}\n  namespace: shop\n" if renamed else
                              'name: web-3\n  namespace: "sh\\e[0mop"\n', 1)
            yield f"api-pod-{case}", text

# ---------------------------------------------------------------------------------
# decoding surprises


def _decoding_cases(role: str) -> Iterator[tuple[str, str]]:
    ex = ALL[ROLES[role][0]].example()
    first_key = next(line for line in ex.splitlines()
                     if line and not line.startswith(("#", " ", "-")))
    yield "yaml-duplicate-nested-key", ex.replace("\n  name:", "\n  name: dup\n  name:", 1) \
        if "\n  name:" in ex else ex + "\n" + first_key + "\n"
    yield "yaml-merge-key", "<<: {x-extra: 1}\n" + ex
    yield "yaml-merge-key-alias", "x-base: &base {a: 1}\n<<: *base\n" + ex
    yield "yaml-anchor-alias", ex.replace(first_key, f"x-anchor: &a {{k: v}}\nx-alias: *a\n"
                                          f"{first_key}", 1)
    docs = parse(ex)
    body = json.dumps(docs[0])
    yield "json-duplicate-key", '{"kind": "Other", ' + body[1:]
    yield "json-duplicate-nested-key", body.replace('"metadata": {', '"metadata": {"x": 1, '
                                                    '"x": 2, ', 1) \
        if '"metadata": {' in body else body[:-1] + ', "k": 1, "k": 2}'
    items = json.dumps(docs)
    yield "json-doubled-items", ('{"apiVersion": "v1", "kind": "List", "items": '
                                 f'{items}, "items": {items}}}')
    yield "json-nan-and-infinity", body[:-1] + ', "x": NaN, "y": -Infinity}'

# ---------------------------------------------------------------------------------
# a file of another kind, and `kubectl get all -A -o yaml`


def _kind_example(kind: str) -> str:
    examples: dict[str, Callable[[], str]] = {
        "snapshot": SNAPSHOT, "profile": PROFILE, "policy": POLICY,
        "policytest": TARGETS["test"].example, "pods": TARGETS["simulate-pods"].example,
        "metrics": lambda: METRICS_EXAMPLE}
    return examples[kind]()


GET_ALL_EXTRA = """\
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template: {metadata: {labels: {app: web}}, spec: {containers: [{name: c, image: i}]}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec: {selector: {matchLabels: {app: agent}}, template: {spec: {containers: [{name: c, image: i}]}}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: once, namespace: jobs}
spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: i}]}}}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly, namespace: jobs}
spec: {schedule: "0 0 * * *", jobTemplate: {spec: {template: {spec: {containers: []}}}}}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {selector: {app: web}, ports: [{port: 80}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu, namespace: ml}
spec: {devices: {requests: [{name: g, exactly: {deviceClassName: gpu}}]}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: shop}
spec: {maxReplicas: 1e400}
"""


def _kind_cases(role: str) -> Iterator[tuple[str, str]]:
    own = {"snapshot": "snapshot", "policy": "policy", "profile": "profile",
           "policytest": "policytest", "pods": "pods", "metrics": "metrics"}.get(role)
    for kind in ("snapshot", "profile", "policy", "policytest", "pods", "metrics"):
        if kind != own:
            yield f"kind-{kind}", _kind_example(kind)
    if role in ("snapshot", "pods"):
        yield "kubectl-get-all", _kind_example(role) + GET_ALL_EXTRA
        as_list = {"apiVersion": "v1", "kind": "List",
                   "items": parse(_kind_example(role) + GET_ALL_EXTRA)}
        yield "kubectl-get-all-json", json.dumps(as_list, default=str)

def _bytes(data: bytes) -> Make:
    def make(path: Path) -> None:
        path.write_bytes(data)
    return make


# What the kubernetes client parses itself (with PyYAML): each a clear exit 2.
KUBECONFIG_GARBAGE: dict[str, Make] = {
    "kubeconfig-not-utf8": _bytes(b"\xff\xfe\x00k\x00i\x00n\x00d"),
    "kubeconfig-nul": _bytes(b"apiVersion: v1\n\x00\n"),
    "kubeconfig-unclosed-flow": _bytes(b"clusters: [1\n"),
    "kubeconfig-two-documents": _bytes(b"a: 1\n---\nb: 2\n"),
    "kubeconfig-empty": _bytes(b""),
    "kubeconfig-scalar": _bytes(b"42\n"),
    "kubeconfig-list": _bytes(b"- a\n- b\n"),
    "kubeconfig-clusters-scalar": _bytes(b"clusters: 5\ncontexts: 7\nusers: x\n"
                                         b"current-context: c\n"),
    "kubeconfig-context-garbage": _bytes(b"contexts: [{name: c, context: [1]}]\n"
                                         b"current-context: c\nclusters: [1]\n"),
    "kubeconfig-python-tag": _bytes(b"a: !!python/object/apply:os.system ['true']\n"),
    "kubeconfig-billion-laughs": _bytes(
        b'a: &a ["x","x","x","x","x","x","x","x"]\n'
        + b"".join(f"{c}: &{c} [{','.join(['*' + p] * 8)}]\n".encode()
                   for p, c in zip("abcdefg", "bcdefgh", strict=True))),
}

# ---------------------------------------------------------------------------------


Case = tuple[str, str, "str | Make", list[str]]


def _cases() -> Iterator[Case]:
    for role, names in ROLES.items():
        for target in names:
            for name, make in PATHS.items():
                yield target, name, make, []
        content: list[tuple[str, str | Make]] = [*_kind_cases(role), *_decoding_cases(role)]
        if role == BAD_KUBECONFIG_ROLE:
            content += KUBECONFIG_GARBAGE.items()
        else:
            content += _api_invalid_cases(role)
        for i, target in enumerate(CONTENT_TARGETS[role]):
            # The numbers go through the first two (each loader, then the scoring).
            numbers = list(_number_cases(role)) if i < 2 else []
            for name, text in [*content, *numbers]:
                yield target, name, text, []
        if role == "snapshot":  # --strict refuses what the default skips, at exit 2
            for name, text in _kind_cases(role):
                if name.startswith("kubectl-get-all"):
                    yield "simulate-scored-cluster", f"{name}-strict", text, ["--strict"]


# Cases this sweep found failing and that are not fixed yet (strict: a fix makes
# them fail here until removed).
KNOWN: dict[str, str] = {}


def _params() -> list[object]:
    return [pytest.param(t, c, extra, id=f"{t}:{n}", marks=[
        pytest.mark.xfail(strict=True, reason=KNOWN[f"{t}:{n}"])] if f"{t}:{n}" in KNOWN
        else []) for t, n, c, extra in _cases()]


@pytest.fixture(autouse=True)
def _short_pipe_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounded_read, "IDLE_TIMEOUT_S", FIFO_IDLE_S)


# A numpy overflow warning is the arithmetic seeing a number it should not (the issue's
# simulate printed them): an error here, so main() makes it an exit 70 the test sees.
@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize(("target_name", "content", "extra"), _params())
def test_issue_input(target_name: str, content: str | Make, extra: list[str]) -> None:
    target = ALL[target_name]
    with tempfile.TemporaryDirectory(prefix="policyd-sweep-") as tmp:
        d = Path(tmp)
        file = d / "input.yaml"
        if callable(content):
            content(file)
        else:
            file.write_text(content)
        outcome, bad = run_target(target, d, file, extra)
    # `violations` refuses a raw ESC; the one-byte CSI (C1 0x9b) drives terminals too.
    for stream, text in (("stdout", outcome.stdout), ("stderr", outcome.stderr)):
        if "\x9b" in text:
            bad.append(f"raw CSI on {stream}")
    # A plugin's crash is the pod's answer (kube-scheduler's Error status, exit 1), so
    # it shows on stdout: the issue's `1e308` was that, not an exit 70.
    if "internal error" in outcome.stdout:
        bad.append("'internal error' on stdout")
    # simulate's WHY NOT column names the crash without those words.
    crash = re.search(r"running \w+ plugin '[^']*': \w*(Error|Warning|Exception)\b",
                      outcome.stdout)
    if crash:
        bad.append(f"a plugin crashed: {crash.group(0)!r}")
    if extra == ["--strict"] and outcome.code != 2:  # the refusal kept for who asks
        bad.append(f"--strict: exit {outcome.code}, not 2")
    assert not bad, (f"{'; '.join(bad)}\n{outcome.describe()}\n"
                     f"  stdout: {outcome.stdout[:800]!r}")


def test_a_pipe_with_a_writer_is_read(tmp_path: Path) -> None:
    """The bound on pipes must not refuse one that delivers: `<(kubectl get ...)`."""
    import os
    import threading

    fifo = tmp_path / "cluster.yaml"
    os.mkfifo(fifo)
    data = SNAPSHOT().encode()

    def write() -> None:
        with open(fifo, "wb") as w:
            w.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    outcome, bad = run_target(ALL["simulate-scored-cluster"], tmp_path, fifo)
    writer.join(timeout=5)
    assert not bad, outcome.describe()
    assert outcome.code in (0, 1) and "node-" in outcome.stdout, outcome.describe()


def test_known_names_cases_that_exist() -> None:
    assert set(KNOWN) <= {f"{t}:{n}" for t, n, _, _ in _cases()}


def test_every_role_has_every_command_that_takes_it(tmp_path: Path) -> None:
    """A command that reads a role must be swept: the targets named exist, and each
    command of the CLI that takes --cluster, --policies, --config or a file is here."""
    for names in (*ROLES.values(), *CONTENT_TARGETS.values()):
        assert set(names) <= set(ALL), set(names) - set(ALL)
    commands = {ALL[n].argv(tmp_path, tmp_path / "f")[0] for names in ROLES.values()
                for n in names}
    assert {"lint", "check-config", "test", "explain", "simulate", "audit", "run"} <= commands
    assert {ALL[n].program for names in ROLES.values() for n in names} == {"policyd", KUBECTL}
