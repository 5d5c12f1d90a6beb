"""Exit 70 must be unreachable from any input file.

Every file policyd reads (policies, profiles, snapshots, pod files, PolicyTest files,
`--metrics` files, the dev cluster's kube-scheduler configuration) goes through the real
CLI, in-process through `main()` (the error boundary that turns a crash into exit 70),
on hostile files written by hand and on random mutations of the repository's valid
examples. Whatever the file holds, the answer is exit 0, 1 or 2, no traceback and no
"internal error", and an exit 2 says on its first line which file is wrong.

Known crashes that other changes fix are listed in KNOWN_CRASHES (strict xfail): when a
fix lands, its entries start passing and must be removed.

By default (CI) each kind of case goes through the targets that reach a distinct loader
or error path, in about a minute. `POLICYD_FUZZ_FULL=1` puts every case through every
target and sweeps every huge number; `POLICYD_FUZZ_EXAMPLES=500` runs the mutation test
longer, with a random seed and shrinking. Those runs find more than KNOWN_CRASHES lists.
"""

from __future__ import annotations

import copy
import datetime
import io
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from policyd.cli.schedule_cmds import DOCUMENT_FORMATS
from policyd.lint.reporters import REPORTERS
from policyd.policytest import render as policytest_render
from tests.unit.cli.fuzz_support import HANG_SECONDS, SEEDS, TARGETS, Target, run_target

# Why cases fail today -> the ids of those cases: crashes, hangs and unclear messages
# found by this file whose fix belongs to another change. A fix makes its cases pass, and
# strict xfail then fails them until their ids are removed here. None today: every crash
# class this file found (huge integers, deep JSON and JMESPath, alias bombs, long paths,
# backtracking durations, symlink loops, messages without the file) is fixed.
_KNOWN: dict[str, str] = {}
KNOWN_CRASHES: dict[str, str] = {case: reason for reason, cases in _KNOWN.items()
                                 for case in cases.split()}

# ---------------------------------------------------------------------------------
# YAML in and out


def _yaml() -> YAML:
    y = YAML(typ="safe", pure=True)
    y.default_flow_style = False
    y.allow_unicode = True
    y.width = 4096
    return y


def parse(text: str) -> list[Any]:
    return [d for d in _yaml().load_all(text) if d is not None]


def dump_yaml(docs: list[Any]) -> str:
    buf = io.StringIO()
    _yaml().dump_all(docs, buf)
    return buf.getvalue()


def dump_json(docs: list[Any], kind: str) -> str:
    if len(docs) == 1 and kind not in ("snapshot", "pods"):
        data: Any = docs[0]
    else:
        data = {"apiVersion": "v1", "kind": "List", "items": docs}
    return json.dumps(data, default=str)


# ---------------------------------------------------------------------------------
# walking documents


Path_ = tuple[Any, ...]


def paths(node: Any, at: Path_ = ()) -> Iterator[Path_]:
    yield at
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, (*at, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, (*at, i))


def get(node: Any, at: Path_) -> Any:
    for p in at:
        node = node[p]
    return node


def put(root: Any, at: Path_, value: Any) -> Any:
    """`root` with the node at `at` replaced (the root itself when `at` is empty)."""
    if not at:
        return value
    get(root, at[:-1])[at[-1]] = value
    return root


def map_leaves(node: Any, fn: Callable[[Any], Any]) -> Any:
    if isinstance(node, dict):
        return {k: map_leaves(v, fn) for k, v in node.items()}
    if isinstance(node, list):
        return [map_leaves(v, fn) for v in node]
    return fn(node)


def map_maps(node: Any, fn: Callable[[dict[Any, Any]], dict[Any, Any]]) -> Any:
    if isinstance(node, dict):
        return fn({k: map_maps(v, fn) for k, v in node.items()})
    if isinstance(node, list):
        return [map_maps(v, fn) for v in node]
    return node


def numeric_like(value: Any) -> bool:
    """Numbers and the strings Kubernetes reads as numbers (quantities, durations)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    return isinstance(value, str) and bool(value) and value[0].isdigit() and len(value) < 12


# ---------------------------------------------------------------------------------
# hand-written hostile files


Special = Callable[[Path], None]  # makes the input path something other than a file


def _dangling(path: Path) -> None:
    path.symlink_to(path.parent / "does-not-exist.yaml")


def _loop(path: Path) -> None:
    path.symlink_to(path)


def _directory(path: Path) -> None:
    path.mkdir()
    (path / "inner.yaml").write_text("kind: Nothing\n")


def _unreadable(path: Path) -> None:
    # Empty, so that the outcome is the same when root can read it anyway.
    path.write_text("")
    path.chmod(0)


def _billion_laughs(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        refs = ",".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


def _map_bomb(levels: int = 9) -> tuple[str, str]:
    """Anchors of maps of maps, and the alias of the biggest (for a mapping field)."""
    keys = "abcdefghi"
    lines = ["x-anchors:", "  - &m0 {" + ", ".join(f"{k}: lol" for k in keys) + "}"]
    for i in range(1, levels):
        lines.append(f"  - &m{i} {{" + ", ".join(f"{k}: *m{i - 1}" for k in keys) + "}")
    return "\n".join(lines) + "\n", f"*m{levels - 1}"


# Whole-file contents for any kind of input, through the PRIMARY targets (CORE through
# every target).
GENERIC: dict[str, bytes | Special] = {
    "empty": b"",
    "whitespace": b"  \n\n\t\n",
    "comment-only": b"# nothing here\n",
    "separators-only": b"---\n---\n...\n",
    "null": b"null\n",
    "scalar-int": b"42\n",
    "scalar-string": b'"just a string"\n',
    "json-number-1e400": b"1e400",
    "json-infinity": b"Infinity",
    "json-nan-list": b"[NaN, Infinity, -Infinity]",
    "yaml-inf-nan": b"a: .inf\nb: -.inf\nc: .nan\n",
    "json-10e30": b'{"kind": 1000000000000000000000000000000}',
    "json-5000-digit-int": b'{"kind": "Pod", "n": ' + b"9" * 5000 + b"}",
    "yaml-5000-digit-int": b"kind: Pod\nn: " + b"9" * 5000 + b"\n",
    "yaml-list": b"- a\n- b\n",
    "json-list-of-null": b"[null, null]",
    "binary-garbage": bytes(range(256)) * 8,
    "binary-no-nul": bytes(range(1, 256)) * 8,
    "non-utf8": b"kind: Pod\nmetadata: {name: \xff\xfe\xfd}\n",
    "utf16-with-bom": "kind: Pod\nmetadata: {name: p}\n".encode("utf-16"),
    "lone-bom": b"\xef\xbb\xbf",
    "json-deep-list-10k": b"[" * 10_000 + b"]" * 10_000,
    "json-deep-map-5k": b'{"a":' * 5_000 + b"1" + b"}" * 5_000,
    "json-deep-unclosed": b"[" * 100_000,
    "alias-undefined": b"kind: *nothing\n",
    "anchor-cycle-attempt": b"a: &a [*a]\n",
    "merge-key": b"base: &b {kind: Pod}\nmerged:\n  <<: *b\n",
    "complex-key": b"? [a, b]\n: c\n",
    "python-object-tag": b"kind: !!python/object/apply:os.system ['echo pwned']\n",
    "custom-tag": b"kind: !Pod {a: 1}\n",
    "binary-tag": b"kind: !!binary aGVsbG8=\n",
    "set-and-omap": b"a: !!set {x, y}\nb: !!omap [{x: 1}]\n",
    "tab-indentation": b"kind: Pod\nmetadata:\n\tname: p\n",
    "duplicate-top-keys": b"kind: Pod\nkind: Node\n",
    "invalid-yaml": b"key: [unclosed\n  - : :\n",
    "invalid-json": b'{"kind": "Pod",',
    "control-chars": b"kind: \x07\x08\x1b[31mPod\n",
    "dangling-symlink": _dangling,
    "symlink-loop": _loop,
    "directory": _directory,
    "unreadable": _unreadable,
}
# Big or slow to parse: through one target per loader and kind (every target in FULL).
HEAVY: dict[str, bytes | Special] = {
    "yaml-flow-list-10k": b"a: " + b"[" * 10_000 + b"]" * 10_000 + b"\n",
    "yaml-flow-map-5k": b"a: " + b"{a: " * 5_000 + b"1" + b"}" * 5_000 + b"\n",
    "yaml-block-map-1500": b"".join(b" " * i + b"a:\n" for i in range(1_500)) + b" " * 1_500
    + b"b: 1\n",
    "yaml-block-seq-5000": b"- " * 5_000 + b"x\n",
    "yaml-unclosed-flow": b"a: " + b"[" * 10_000 + b"\n",
    "billion-laughs": _billion_laughs().encode(),
    "billion-laughs-as-document": (_billion_laughs() + "kind: *a8\n").encode(),
    "many-null-documents": b"---\n" * 5_000,
    "many-documents": b"---\nkind: Pod\nmetadata: {name: p}\n" * 2_000,
    "long-line-1mb": b"kind: " + b"x" * 1_000_000 + b"\n",
    "long-key": b"x" * 200_000 + b": 1\n",
}
CORE = ["empty", "null", "scalar-int", "yaml-list", "binary-garbage", "non-utf8",
        "utf16-with-bom", "json-5000-digit-int", "yaml-5000-digit-int", "json-deep-list-10k",
        "python-object-tag", "invalid-yaml", "directory", "dangling-symlink", "symlink-loop",
        "unreadable"]
HEAVY_TARGETS = ["lint", "check-config", "test", "simulate-metrics", "simulate-cluster"]


# Whole-file contents derived from the kind's valid example.
def _derived(example: str, huge: list[Any]) -> dict[str, bytes]:
    docs = parse(example)

    def every_leaf(fn: Callable[[Any], Any]) -> bytes:
        return dump_yaml([map_leaves(d, fn) for d in docs]).encode()

    bomb, alias = _map_bomb()
    first_map = next((p for p in paths(docs[0]) if len(p) >= 1
                      and isinstance(get(docs[0], p), dict)), ("x-field",))
    bombed = put(copy.deepcopy(docs[0]), first_map, "__BOMB__")
    out = {
        "example-with-bom": b"\xef\xbb\xbf" + example.encode(),
        "example-crlf": example.replace("\n", "\r\n").encode(),
        "example-cr-only": example.replace("\n", "\r").encode(),
        "example-tabs": "\n".join(
            "\t" * ((len(line) - len(line.lstrip(" "))) // 2) + line.lstrip(" ")
            for line in example.split("\n")).encode(),
        "example-duplicate-keys": example.replace("\nkind:", "\nkind: Duplicate\nkind:",
                                                  1).encode(),
        "example-truncated": example[: len(example) // 2].encode(),
        "example-as-json": dump_json(docs, "snapshot" if len(docs) > 1 else "x").encode(),
        "example-alias-bomb-in-field":
            (bomb + dump_yaml([bombed]).replace("'__BOMB__'", alias)
             .replace("__BOMB__", alias)).encode(),
        "example-billion-laughs-key": (_billion_laughs() + dump_yaml([docs[0]])).encode(),
        "example-python-tag": example.replace("\nkind:", "\nx: !!python/name:os.system\n"
                                              "kind:", 1).encode(),
        "example-all-null": every_leaf(lambda v: None),
        "example-all-empty-maps": every_leaf(lambda v: {}),
        "example-all-lists": every_leaf(lambda v: [v]),
        "example-all-ints": every_leaf(lambda v: 7),
        "example-all-timestamps": every_leaf(lambda v: datetime.date(2024, 1, 1)),
        "example-long-strings": every_leaf(lambda v: "x" * 2_000 if isinstance(v, str) else v),
        "example-int-keys": dump_yaml([map_maps(d, lambda m: {**m, 1: "x", 2.5: None})
                                       for d in docs]).encode(),
        "example-bool-values": every_leaf(lambda v: not v if isinstance(v, bool) else True),
        "example-nested-deep": dump_yaml([put(copy.deepcopy(docs[0]), first_map,
                                              _deep(60, [1])), *docs[1:]]).encode(),
    }
    for value in huge:
        out[f"example-numbers-{_slug(value)}"] = every_leaf(_numbers_to(value))
    return out


def _numbers_to(value: Any) -> Callable[[Any], Any]:
    def replace(leaf: Any) -> Any:
        return value if numeric_like(leaf) else leaf
    return replace


def _text_writer(text: str) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        path.write_text(text)
    return write


def _deep(depth: int, leaf: Any) -> Any:
    for i in range(depth):
        leaf = [leaf] if i % 2 else {"a": leaf}
    return leaf


HUGE: list[Any] = [10**30, -(10**30), 10**400, float("inf"), float("-inf"), float("nan"),
                   1e-300, "1e400", "99999999999999999999999999999Ei", "1E30", "9" * 5_000,
                   "NaN", "Infinity", "-1", "0.0000000001m", "1e-400", -1, 0]
# The few that found every crash class so far; FULL runs all of HUGE.
HUGE_FEW: list[Any] = [10**400, float("nan"), "1e400", "99999999999999999999999999999Ei",
                       "9" * 5_000, -1]


def _slug(value: Any) -> str:
    text = repr(value)
    if len(text) > 24:
        text = f"{text[:6]}..{len(text)}chars"
    return "".join(c if c.isalnum() or c in "-." else "_" for c in text)


JMESPATH_EXPRESSIONS = {
    "parens-3000": "(" * 3_000 + "pod" + ")" * 3_000,
    "not-5000": "!" * 5_000 + "pod",
    "brackets-3000": "[" * 3_000 + "pod" + "]" * 3_000,
    "function-nesting-2000": "abs(" * 2_000 + "`1`" + ")" * 2_000,
    "or-chain-5000": " || ".join(["pod"] * 5_000),
    "subexpression-5000": "pod" + ".a" * 5_000,
    "pipe-5000": " | ".join(["pod"] * 5_000),
    "literal-deep-json": "`" + "[" * 5_000 + "]" * 5_000 + "`",
    "literal-1e400": "`1e400`",
    "literal-5000-digit-int": "`" + "9" * 5_000 + "`",
    "literal-nan": "`NaN`",
    "unclosed": "pod.(",
    "quotes-501": "'" * 501,
    "unicode": "pod.\u00e9\u00e9 == `\"\u2603\"`",
    "quantity-huge": "quantity('99999999999999999999999999999Ei')",
    "quantity-1e400": "quantity('1e400')",
    "to-number-1e400": "to_number('1e400')",
    "sort-mixed": "sort([`1`, 'a'])",
    "multiply-huge": "`1e308` * `1e308`",
}


def _jmespath_policies() -> dict[str, bytes]:
    """A policy with one hostile expression, as its condition, filter or score."""
    from tests.unit.cli.fuzz_support import JMESPATH_POLICY

    fields = {
        "condition": '"spec.priority == null || spec.priority > `-1`"',
        "filter": "\"label(node, 'myorg.io/rack') == annotation(pod, 'myorg.io/rack')\"",
        "score": '"quantity(node.status.allocatable.cpu)"',
    }
    return {f"jmespath-{name}-in-{field}": JMESPATH_POLICY.replace(old, json.dumps(expr)).encode()
            for name, expr in JMESPATH_EXPRESSIONS.items() for field, old in fields.items()}


def _policytest_cases() -> dict[str, bytes]:
    """PolicyTest fields the generic cases do not reach: metric values, node and pod
    shorthands, policy paths."""
    from tests.unit.cli.fuzz_support import METRIC_POLICY

    inline = json.dumps(parse(METRIC_POLICY)[0])

    def suite(policy: str = inline, node: str = "{name: a}", pod: str = "{name: p}",
              metrics: str = "{}") -> bytes:
        return (f"apiVersion: policyd.io/v1alpha1\nkind: PolicyTest\nmetadata: {{name: t}}\n"
                f"spec:\n  policies: [{policy}]\n  nodes: [{node}, {{name: b}}]\n"
                f"  pods: [{pod}]\n  metrics: {metrics}\n"
                "  tests: [{name: c, pod: p, scheduledTo: a}]\n").encode()

    big = "9" * 400
    return {
        "policytest-metric-400-digit-int": suite(metrics=f"{{latency_ms: {{a: {big}}}}}"),
        "policytest-metric-inf": suite(metrics="{latency_ms: {a: .inf}}"),
        "policytest-metric-int-keys": suite(metrics="{latency_ms: {1: 5}, 2: {a: 1}}"),
        "policytest-metric-string": suite(metrics="{latency_ms: {a: '5'}}"),
        "policytest-allocatable-1e400": suite(node="{name: a, allocatable: {cpu: 1e400}}"),
        "policytest-allocatable-400-digits":
            suite(node=f"{{name: a, allocatable: {{cpu: {big}}}}}"),
        "policytest-priority-400-digits": suite(pod=f"{{name: p, priority: {big}}}"),
        "policytest-requests-nan": suite(pod="{name: p, requests: {cpu: .nan}}"),
        "policytest-full-node-object": suite(node="{metadata: {name: a}, status: 7}"),
        "policytest-full-pod-object": suite(pod="{metadata: {name: p}, spec: []}"),
        "policytest-taints-garbage": suite(node="{name: a, taints: [{effect: 1e400}]}"),
        "policytest-tolerations-garbage": suite(pod="{name: p, tolerations: [{key: [1]}]}"),
        "policytest-inline-null-spec": suite(
            policy="{kind: SchedulingPolicy, apiVersion: policyd.io/v1alpha1, spec: null}"),
        "policytest-policy-path-3000-chars": suite(policy="x" * 3_000),
        "policytest-policy-path-nul": suite(policy='"a\\0b"'),
        "policytest-policy-path-is-this-file": suite(policy="input.yaml"),
    }


def _metrics_cases() -> dict[str, bytes]:
    big = "9" * 400
    return {
        "metrics-400-digit-int": f"latency_ms: {{node-a1: {big}}}\n".encode(),
        "metrics-negative-400-digit-int": f"latency_ms: {{node-a1: -{big}}}\n".encode(),
        "metrics-json-1e400": b'{"latency_ms": {"node-a1": 1e400}}',
        "metrics-string-5000-digits": f"latency_ms: {{node-a1: '{'9' * 5000}'}}\n".encode(),
        "metrics-int-metric-name": b"1: {node-a1: 1}\n",
        "metrics-null-nodes": b"latency_ms: null\n",
        "metrics-int-node-names": b"latency_ms: {1: 1, 2.5: 2, null: 3}\n",
        "metrics-bool-value": b"latency_ms: {node-a1: true}\n",
        "metrics-two-documents": b"latency_ms: {node-a1: 1}\n---\nload: {node-a1: 1}\n",
    }


SNAPSHOT_CASES: dict[str, bytes] = {
    "snapshot-nameless-pod": b"kind: Pod\nmetadata: {}\n",
    "snapshot-unsupported-kind": b"kind: ConfigMap\nmetadata: {name: c}\n",
    "snapshot-list-of-garbage": b"kind: List\nitems: [1, null, [], {kind: [1]}]\n",
    "snapshot-items-not-a-list": b"kind: PodList\nitems: {a: 1}\n",
    "snapshot-pod-spec-garbage": b"kind: Pod\nmetadata: {name: p}\nspec: [1]\n",
    "snapshot-node-status-garbage": b"kind: Node\nmetadata: {name: n}\nstatus: {allocatable: 7}\n",
    "snapshot-namespace-labels-list": b"kind: Namespace\nmetadata: {name: a, labels: [1]}\n",
}


def _cases() -> Iterator[tuple[str, str, bytes | Special]]:
    for target in TARGETS.values():
        for name, content in GENERIC.items():
            if FULL or target.name in PRIMARY or name in CORE:
                yield target.name, name, content
        if FULL or target.name in HEAVY_TARGETS:
            for name, content in HEAVY.items():
                yield target.name, name, content
        if FULL or target.name in PRIMARY:
            for name, data in _derived(target.example(), HUGE if FULL else HUGE_FEW).items():
                yield target.name, name, data
        if target.kind == "policy" and (FULL or target.name in ("lint", "simulate-policies")):
            for name, data in _jmespath_policies().items():
                yield target.name, name, data
        if target.kind == "policytest":
            yield from ((target.name, n, d) for n, d in _policytest_cases().items())
        if target.kind == "metrics":
            yield from ((target.name, n, d) for n, d in _metrics_cases().items())
        if target.kind in ("snapshot", "pods", "pod"):
            yield from ((target.name, n, d) for n, d in SNAPSHOT_CASES.items())


# Set POLICYD_FUZZ_FULL=1 to put every case through every target (minutes, not seconds).
FULL = bool(os.environ.get("POLICYD_FUZZ_FULL"))
# The targets that get the cases derived from their example (one per loader and kind).
PRIMARY = ["lint", "simulate-policies", "check-config", "simulate-cluster", "explain-pod-file",
           "test", "simulate-metrics", "dev-up-scheduler-config"]
# Seconds before a run that is known to hang is stopped (it is an xfail anyway).
KNOWN_HANG_SECONDS = 2.0


def _params(cases: Iterator[tuple[str, str, Any]]) -> list[Any]:
    out = []
    for target, name, content in cases:
        case_id = f"{target}:{name}"
        marks = []
        reason = KNOWN_CRASHES.get(case_id)
        if reason:
            marks.append(pytest.mark.xfail(strict=True, reason=reason))
        hang = KNOWN_HANG_SECONDS if reason and reason.startswith("hang") else HANG_SECONDS
        out.append(pytest.param(target, content, hang, id=case_id, marks=marks))
    return out


def _check(target: Target, write: Callable[[Path], None], extra: list[str] | None = None,
           hang_seconds: float = HANG_SECONDS) -> None:
    with tempfile.TemporaryDirectory(prefix="policyd-fuzz-") as tmp:
        d = Path(tmp)
        file = d / "input.yaml"
        write(file)
        try:
            outcome, bad = run_target(target, d, file, extra or [], hang_seconds)
        finally:
            if file.exists() and not file.is_symlink():
                file.chmod(0o600)
        assert not bad, f"{'; '.join(bad)}\n{outcome.describe()}"


@pytest.mark.parametrize(("target_name", "content", "hang_seconds"), _params(_cases()))
def test_hostile_file(target_name: str, content: bytes | Special, hang_seconds: float
                      ) -> None:
    def write(path: Path) -> None:
        if callable(content):
            content(path)
        else:
            path.write_bytes(content)

    _check(TARGETS[target_name], write, hang_seconds=hang_seconds)


# ---------------------------------------------------------------------------------
# a wrong type at every place of each kind's example

WRONG: list[Any] = [
    [], {}, 0, None, "x", True, 1.5, [{"a": None}], {"a": {"b": []}}, -(10**30),
    datetime.date(2024, 1, 1), {1: "x"}, "x" * 3_000, [[[[]]]], "",
]
# One target per loader path, and which documents of its example to sweep.
SWEEPS: dict[str, list[int]] = {
    "lint": [0], "simulate-policies": [0], "check-config": [0],
    "simulate-cluster": [0, 6], "explain-pod-file": [0], "test": [0],
    "simulate-metrics": [0], "dev-up-scheduler-config": [0],
    **({"simulate-config": [0], "simulate-pods": [1]} if os.environ.get("POLICYD_FUZZ_FULL")
       else {}),
}


def _sweep_cases() -> Iterator[tuple[str, str, Any]]:
    """Each place gets one wrong value (the next of WRONG), numbers also huge ones."""
    for name, doc_indexes in SWEEPS.items():
        docs = parse(TARGETS[name].example())
        for doc_index in doc_indexes:
            for n, at in enumerate(paths(docs[doc_index])):
                spot = ".".join(str(p) for p in at) or "<root>"
                values = WRONG if FULL else [WRONG[n % len(WRONG)]]
                if numeric_like(get(docs[doc_index], at)):
                    values = [*values, *(HUGE if FULL else HUGE_SWEEP)]
                yield name, f"doc{doc_index}.{spot}", (doc_index, at, values)


HUGE_SWEEP: list[Any] = [10**400, float("nan"), "99999999999999999999999999999Ei"]


@pytest.mark.parametrize(("target_name", "spot", "hang_seconds"), _params(_sweep_cases()))
def test_wrong_type_everywhere(target_name: str, spot: tuple[int, Path_, list[Any]],
                               hang_seconds: float) -> None:
    doc_index, at, values = spot
    target = TARGETS[target_name]
    for value in values:
        docs = parse(target.example())
        docs[doc_index] = put(docs[doc_index], at, copy.deepcopy(value))
        text = dump_yaml(docs)
        _check(target, _text_writer(text), hang_seconds=hang_seconds)


# ---------------------------------------------------------------------------------
# random mutations of the valid examples

TEXT = st.characters(exclude_categories=["Cs"])
SPECIAL_VALUES: list[Any] = [
    *HUGE, "", "0", "1Gi", "100m", "-5", "x" * 300, datetime.date(2024, 1, 1), "kube-system",
    "pod", "node", "In", "Exists", "NoSchedule", "policyd", "default-scheduler",
    "policyd.io/v1alpha1", "SchedulingPolicy", "PolicyTest", "Node", "Pod", "List",
    "(" * 50, "pod.metadata", "*", "\u0000", "\ufeff",
]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                    st.text(TEXT, max_size=12), st.sampled_from(SPECIAL_VALUES))
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(TEXT, max_size=8) | st.integers(-3, 3), inner, max_size=4),
    max_leaves=12)


def _mutate(data: st.DataObject, docs: list[Any]) -> list[Any]:
    root: Any = docs
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        spots = list(paths(root))
        at = data.draw(st.sampled_from(spots), label="at")
        node = get(root, at)
        op = data.draw(st.sampled_from(["replace", "delete", "duplicate", "nest", "retype",
                                        "add-key", "rename-key"]), label="op")
        if op == "replace" or (op in ("delete", "rename-key") and not at):
            root = put(root, at, data.draw(VALUES, label="value"))
        elif op == "delete":
            parent = get(root, at[:-1])
            del parent[at[-1]]
        elif op == "duplicate" and isinstance(node, list):
            node.extend(copy.deepcopy(node))
        elif op == "nest":
            depth = data.draw(st.sampled_from([2, 20, 200]), label="depth")
            root = put(root, at, _deep(depth, node))
        elif op == "retype" and not isinstance(node, dict | list):
            root = put(root, at, data.draw(st.sampled_from([
                str(node), [node], {"value": node}, None, 0, True, -1.5,
                int(node) if isinstance(node, float) and node == node
                and abs(node) < 1e300 else 1]), label="retyped"))
        elif op == "add-key" and isinstance(node, dict):
            node[data.draw(st.text(TEXT, max_size=10), label="key")] = data.draw(VALUES)
        elif op == "rename-key" and isinstance(get(root, at[:-1]), dict):
            parent = get(root, at[:-1])
            parent[str(at[-1]).upper() + "_"] = parent.pop(at[-1])
        if not isinstance(root, list):
            root = [root]
    mutated: list[Any] = root
    return mutated


EXAMPLES = int(os.environ.get("POLICYD_FUZZ_EXAMPLES", "0"))
# Each command's --format choices, from the registries the CLI takes them from.
FORMATS = {"lint": list(REPORTERS), "check": list(REPORTERS),
           "test": list(policytest_render.FORMATS),
           "simulate": ["text", *DOCUMENT_FORMATS], "explain": ["text", *DOCUMENT_FORMATS]}


@pytest.mark.parametrize("kind", sorted(SEEDS))
@settings(max_examples=EXAMPLES or 20, deadline=None, derandomize=not EXAMPLES,
          # Shrinking reruns the CLI hundreds of times; the failing draws are printed
          # anyway, so only long runs shrink.
          phases=list(Phase) if EXAMPLES else [Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_mutated_example(kind: str, data: st.DataObject) -> None:
    seed = data.draw(st.sampled_from(SEEDS[kind]), label="seed")
    targets = sorted(t for t, target in TARGETS.items() if target.kind == kind)
    target = TARGETS[data.draw(st.sampled_from(targets), label="target")]
    docs = _mutate(data, parse(seed()))
    as_json = data.draw(st.booleans(), label="json")
    text = dump_json(docs, kind) if as_json else dump_yaml(docs)
    formats = FORMATS.get(target.name.split("-")[0], [])
    extra = ["--format", data.draw(st.sampled_from(formats), label="format")] if formats \
        else []
    _check(target, _text_writer(text), extra)


def test_known_crashes_name_cases_that_exist() -> None:
    """A stale id in KNOWN_CRASHES would hide nothing and mislead whoever reads it."""
    ids = {f"{t}:{n}" for t, n, _ in _cases()} | {f"{t}:{n}" for t, n, _ in _sweep_cases()}
    assert set(KNOWN_CRASHES) <= ids, sorted(set(KNOWN_CRASHES) - ids)
