"""One decoding contract for every file kind (docs/explain-simulate-audit.md, "Input
files"): each problem a file can have (a duplicate or merge key, bytes that are not
UTF-8, a NUL byte, a syntax error, a tab in indentation, no document at all, a path that
is a device or a pipe nobody writes to)
gives the same message at file:line:column and exit 2, whether the file is a snapshot, a
pod file, a policy, a profile, a policy test or a metrics file.

Each case runs the real `policyd` in a subprocess (the real error boundary), with the
pipe timeout shortened so that a named pipe without a writer is refused quickly.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from policyd.errors import EXIT_USAGE

ROOT = Path(__file__).resolve().parents[3]

NODES = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
"""
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec: {containers: [{name: c, image: i}]}
"""
POLICY = (ROOT / "policies" / "hw-encrypt.yaml").read_text()
PROFILE = """\
apiVersion: policyd.io/v1alpha1
kind: PolicydConfiguration
profiles:
- schedulerName: policyd
"""
POLICY_TEST = """\
apiVersion: policyd.io/v1alpha1
kind: PolicyTest
metadata: {name: t}
spec:
  policies: [policy.yaml]
  nodes: [{name: n1}]
  pods: [{name: p}]
  tests:
  - {name: fits, pod: p, scheduledTo: n1}
"""
METRICS = "latency:\n  n1: 5\n"

# kind: (the good file's text, the command reading it as F; the other files exist).
KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "snapshot": (NODES, ("simulate", "--cluster", "F", "--pods", "pod.yaml")),
    "pod file": (POD, ("explain", "--cluster", "nodes.yaml", "--pod", "F")),
    "policy": (POLICY, ("explain", "--cluster", "nodes.yaml", "--pod", "pod.yaml",
                        "--policies", "F")),
    "profile": (PROFILE, ("simulate", "--cluster", "nodes.yaml", "--config", "F")),
    "policy test": (POLICY_TEST, ("test", "F")),
    "metrics file": (METRICS, ("explain", "--cluster", "nodes.yaml", "--pod", "pod.yaml",
                               "--metrics", "F")),
}


def _first_key(text: str) -> str:
    return next(line for line in text.splitlines()
                if line and not line.startswith("#")).split(":")[0]


def _lines(text: str) -> int:
    return text.count("\n")


def duplicate_key(text: str) -> tuple[bytes, str]:
    first = next(line for line in text.splitlines() if line and not line.startswith("#"))
    at = text.splitlines().index(first) + 1
    broken = text.replace(first + "\n", first + "\n" + first + "\n", 1)
    return broken.encode(), (f":{at + 1}:1: duplicate key {_first_key(text)!r} "
                             f"(first defined at line {at})")


def duplicate_json_key(text: str) -> tuple[bytes, str]:
    import yaml_rs

    doc = yaml_rs.loads(text, parse_datetime=False)
    key = next(iter(doc))
    body = json.dumps(doc, indent=1)  # '{\n "key": ...'
    return (f"{{\"{key}\": 1," + body[1:]).encode(), (
        f":2:2: duplicate key {key!r} (first defined at line 1)")


def merge_key(text: str) -> tuple[bytes, str]:
    return (text + "<<: {}\n").encode(), (
        f":{_lines(text) + 1}:1: merge keys (<<) are not supported: write the fields out")


def latin1(text: str) -> tuple[bytes, str]:
    return text.encode() + b"# caf\xe9\n", f":{_lines(text) + 1}:6: not UTF-8 text (byte 0xe9)"


def nul_byte(text: str) -> tuple[bytes, str]:
    return text.encode() + b"\x00", f":{_lines(text) + 1}:1: binary file (NUL byte)"


def misplaced_bracket(text: str) -> tuple[bytes, str]:
    # The parsers word syntax errors their own way; the place is the contract.
    return text.encode() + b"extra: ]x\n", f":{_lines(text) + 1}:8: "


def bad_indentation(text: str) -> tuple[bytes, str]:
    return text.encode() + b"extra: 1\n  more: 2\n", f":{_lines(text) + 2}:7: "


def tab_indentation(text: str) -> tuple[bytes, str]:
    return text.encode() + b"extra:\n\tmore: 1\n", (
        f":{_lines(text) + 2}:1: tab character in indentation: YAML indents with spaces only")


def empty(text: str) -> tuple[bytes, str]:
    return b"# nothing here yet\n---\n", ":1:1: empty file: no YAML or JSON document"


DEFECTS: dict[str, Callable[[str], tuple[bytes, str]]] = {
    "duplicate key": duplicate_key,
    "duplicate key in JSON": duplicate_json_key,
    "merge key": merge_key,
    "not UTF-8": latin1,
    "NUL byte": nul_byte,
    "misplaced bracket": misplaced_bracket,
    "bad indentation": bad_indentation,
    "tab in indentation": tab_indentation,
    "empty": empty,
}


def policyd(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    code = ("import policyd.model.bounded_read as b; b.IDLE_TIMEOUT_S = 0.5; "
            "from policyd.cli.app import main; main()")
    env = {**os.environ, "GITHUB_ACTIONS": "",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                          text=True, timeout=120, cwd=tmp, env=env)


def setup(tmp: Path) -> None:
    (tmp / "nodes.yaml").write_text(NODES)
    (tmp / "pod.yaml").write_text(POD)
    (tmp / "policy.yaml").write_text(POLICY)


def run_kind(tmp: Path, kind: str, path: Path) -> subprocess.CompletedProcess[str]:
    args = tuple(str(path) if a == "F" else a for a in KINDS[kind][1])
    return policyd(tmp, *args)


def assert_refused(proc: subprocess.CompletedProcess[str], where: str, message: str) -> None:
    """Exit 2 and `WHERE: MESSAGE`, as the data-file reader says it, or `WHERE: error:
    MESSAGE [rule]`, as a finding of the policy and profile loaders is printed."""
    out = proc.stdout + proc.stderr
    assert proc.returncode == EXIT_USAGE, out
    assert re.search(re.escape(f"{where}: ") + "(?:error: )?" + re.escape(message), out), out
    assert "internal error" not in out and "Traceback" not in out


@pytest.mark.parametrize("kind", KINDS)
def test_the_good_files_are_accepted(tmp_path: Path, kind: str) -> None:
    """The baseline of the table below: without the defect, each command succeeds."""
    setup(tmp_path)
    path = tmp_path / "input.yaml"
    path.write_text(KINDS[kind][0])
    proc = run_kind(tmp_path, kind, path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("defect", DEFECTS)
@pytest.mark.parametrize("kind", KINDS)
def test_each_decoding_problem_is_reported_alike_in_every_file_kind(
        tmp_path: Path, kind: str, defect: str) -> None:
    setup(tmp_path)
    data, where = DEFECTS[defect](KINDS[kind][0])
    path = tmp_path / "input.yaml"
    path.write_bytes(data)
    proc = run_kind(tmp_path, kind, path)
    place, message = where.split(": ", 1)
    assert_refused(proc, f"{path}{place}", message)


@pytest.mark.parametrize("kind", KINDS)
def test_a_named_pipe_without_a_writer_is_refused_not_waited_for(
        tmp_path: Path, kind: str) -> None:
    setup(tmp_path)
    fifo = tmp_path / "input.yaml"
    os.mkfifo(fifo)
    proc = run_kind(tmp_path, kind, fifo)
    assert_refused(proc, str(fifo), "named pipe: no data within 0.5 s")


@pytest.mark.parametrize(("kind", "device"), [
    *((kind, "/dev/zero") for kind in KINDS),  # endless: read, it ran out of memory
    ("snapshot", "/dev/urandom"), ("policy", "/dev/urandom"), ("profile", "/dev/null")])
def test_a_character_device_is_refused_unread(tmp_path: Path, kind: str,
                                              device: str) -> None:
    setup(tmp_path)
    proc = run_kind(tmp_path, kind, Path(device))
    assert_refused(proc, device, "is a character device")


@pytest.mark.parametrize("kind", KINDS)
def test_a_pipe_keeps_working(tmp_path: Path, kind: str) -> None:
    """`policyd ... <(cat file)` and `/dev/stdin`: the bytes of a pipe, read to its end."""
    setup(tmp_path)
    if kind == "policy test":  # its policies are relative to the file, not to a pipe
        (tmp_path / "input.yaml").write_text(
            POLICY_TEST.replace("policy.yaml", str(tmp_path / "policy.yaml")))
    else:
        (tmp_path / "input.yaml").write_text(KINDS[kind][0])
    args = ["/dev/stdin" if a == "F" else a for a in KINDS[kind][1]]
    code = "from policyd.cli.app import main; main()"
    env = {**os.environ, "GITHUB_ACTIONS": "",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cat = subprocess.Popen(["cat", str(tmp_path / "input.yaml")], stdout=subprocess.PIPE)
    try:
        proc = subprocess.run([sys.executable, "-c", code, *args], stdin=cat.stdout,
                              capture_output=True, text=True, timeout=120, cwd=tmp_path,
                              env=env)
    finally:
        assert cat.stdout is not None
        cat.stdout.close()
        cat.wait()
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_pipe_that_never_ends_is_cut_at_its_limit(tmp_path: Path) -> None:
    """`yes |`: a pipe is read up to a limit of its own, then refused (here a policy's
    128 KiB), not read until memory runs out."""
    setup(tmp_path)
    code = "from policyd.cli.app import main; main()"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    yes = subprocess.Popen(["yes", "a: b"], stdout=subprocess.PIPE)
    try:
        proc = subprocess.run([sys.executable, "-c", code, "lint", "/dev/stdin"],
                              stdin=yes.stdout, capture_output=True, text=True,
                              timeout=120, cwd=tmp_path, env=env)
    finally:
        assert yes.stdout is not None
        yes.stdout.close()
        yes.kill()
        yes.wait()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out  # lint's finding (file-too-large), as for a file
    assert "/dev/stdin:1:1: error: pipe is larger than the limit of 128 KiB" in out, out
    assert "Traceback" not in out
