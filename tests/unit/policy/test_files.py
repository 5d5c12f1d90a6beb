"""The one policy-directory walker: nothing that could hold a policy is skipped without a
problem naming its path, and the layouts people really use (ConfigMap volumes, linked
directories, editor lock files) still load."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from policyd.policy.files import find_yaml_files
from policyd.policy.from_paths import load_policy_set

POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: p}
spec:
  pluginName: P
  filters:
    - {id: r, message: m, nodeLabels: {matchLabels: {env: prod}}}
"""


def found(*paths: Path) -> tuple[list[str], list[tuple[str, str, str]]]:
    """(file names relative to the first path's parent, (path, message, kind))."""
    base = paths[0].parent
    result = find_yaml_files(paths)
    files = [str(f.relative_to(base)) for f, _ in result.files]
    problems = [(str(Path(p.path).relative_to(base)), p.message, str(p.kind))
                for p in result.problems]
    return files, problems


@pytest.fixture
def d(tmp_path: Path) -> Path:
    d = tmp_path / "policies"
    d.mkdir()
    (d / "ok.yaml").write_text(POLICY)
    return d


def test_a_plain_directory(d: Path) -> None:
    (d / "sub").mkdir()
    (d / "sub" / "b.yml").write_text(POLICY)
    (d / "notes.txt").write_text("x")
    assert found(d) == (["policies/ok.yaml", "policies/sub/b.yml"], [])


@pytest.mark.parametrize(("name", "target"), [
    ("gone.yaml", "nothere.yaml"),  # a policy file link
    ("gone", "nothere"),  # a link that may have been a directory of policies
    ("gone.yml", "/does/not/exist.yml"),
])
def test_a_dangling_symlink_is_a_problem(d: Path, name: str, target: str) -> None:
    (d / name).symlink_to(target)
    files, problems = found(d)
    assert files == ["policies/ok.yaml"]
    assert problems == [(f"policies/{name}", f"dangling symlink (its target {target!r} "
                                             "does not exist)", "unreadable")]


def test_a_dangling_symlink_to_something_else_is_ignored(d: Path) -> None:
    (d / "README.md").symlink_to("nothere.md")
    assert found(d) == (["policies/ok.yaml"], [])


def test_a_symlink_loop_is_a_problem(d: Path) -> None:
    (d / "a").symlink_to("b")
    (d / "b").symlink_to("a")
    (d / "self.yaml").symlink_to("self.yaml")
    files, problems = found(d)
    assert files == ["policies/ok.yaml"]
    assert [(p, k) for p, _, k in problems] == [
        ("policies/a", "unreadable"), ("policies/b", "unreadable"),
        ("policies/self.yaml", "unreadable")]
    assert all("symlink loop" in m for _, m, _ in problems)


@pytest.mark.parametrize("link", ["..", ".", "../.."])
def test_a_directory_link_back_to_a_parent_is_a_loop(d: Path, link: str) -> None:
    (d / "sub" / "deeper").mkdir(parents=True)
    (d / "sub" / "deeper" / "up").symlink_to(link)
    files, problems = found(d)
    assert files == ["policies/ok.yaml"]
    [(path, message, kind)] = problems
    assert path == "policies/sub/deeper/up" and kind == "unreadable"
    assert message.startswith("symlink loop: leads back to ")


def test_linked_directories_are_followed_once(d: Path, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "team.yaml").write_text(POLICY)
    (d / "team").symlink_to(shared)
    (d / "team-again").symlink_to(shared)
    files, problems = found(d)
    assert problems == []
    assert files == ["policies/ok.yaml", "policies/team/team.yaml"]


def test_a_fifo_is_a_problem_not_a_hang(d: Path) -> None:
    os.mkfifo(d / "pipe.yaml")
    files, problems = found(d)
    assert files == ["policies/ok.yaml"]
    assert [(p, k) for p, _, k in problems] == [("policies/pipe.yaml", "unreadable")]
    assert "not a regular file" in problems[0][1]


def test_an_unlistable_directory_is_a_problem(d: Path, monkeypatch: pytest.MonkeyPatch
                                              ) -> None:
    # Root reads any directory; the CLI tests check the real thing without
    # CAP_DAC_OVERRIDE. Here the walker's own handling, in process.
    (d / "closed").mkdir()
    real = os.scandir

    def scandir(path: os.PathLike[str] | str) -> object:
        if Path(path).name == "closed":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    assert found(d) == (["policies/ok.yaml"], [
        ("policies/closed", "cannot read directory: Permission denied", "unreadable")])


def test_configmap_volume_layout_loads_without_problems(d: Path) -> None:
    # What kubelet writes: files are links into ..data, itself a link to a timestamped
    # directory; an editor's lock file is a dangling hidden link.
    stamp = d / "..2026_05_01_10_00_00.123"
    stamp.mkdir()
    (stamp / "gpu.yaml").write_text(POLICY)
    (d / "..data").symlink_to(stamp.name)
    (d / "gpu.yaml").symlink_to("..data/gpu.yaml")
    (d / ".#ok.yaml").symlink_to("root@host.1234")
    (d / ".git").mkdir()
    (d / ".git" / "x.yaml").write_text(POLICY)
    assert found(d) == (["policies/gpu.yaml", "policies/ok.yaml"], [])


def test_named_paths(d: Path) -> None:
    (d / "gone.yaml").symlink_to("nothere.yaml")
    empty = d / "empty"
    empty.mkdir()
    files, problems = found(d / "ok.yaml", d / "missing.yaml", d / "gone.yaml", empty)
    assert files == ["ok.yaml"]
    assert [(p, k) for p, _, k in problems] == [
        ("missing.yaml", "missing"), ("gone.yaml", "unreadable"), ("empty", "empty")]


def test_load_policy_set_reports_walk_problems_as_unreadable_input(d: Path) -> None:
    (d / "gone.yaml").symlink_to("nothere.yaml")
    result = load_policy_set([d], compile=False)
    assert [(p.file, p.rule, p.level) for p in result.problems] == [
        (str(d / "gone.yaml"), "file-unreadable", "error")]
    assert result.bad_paths == [f"{d / 'gone.yaml'}: dangling symlink (its target "
                                "'nothere.yaml' does not exist)"]
    assert len(result.documents) == 1
