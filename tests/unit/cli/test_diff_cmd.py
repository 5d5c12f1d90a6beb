"""`policyd diff` as CI runs it: two paths or `--base REF` on a real git repository,
the exit codes (--fail-on), the three formats, a profile change that reaches the
built-in filters, and bad input (one line, exit 2)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from policyd.cli.app import register_commands
from tests.cli_runs import Ran, run_cli

NODES = """\
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {env: prod}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {env: staging}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
"""


def pod(name: str, node: str = "", *, tier: str = "prod") -> str:
    bound = f"  nodeName: {node}\n" if node else ""
    phase = "Running" if node else "Pending"
    return (f"---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: shop, "
            f"labels: {{tier: {tier}}}}}\nspec:\n{bound}"
            "  containers: [{name: c, image: i, resources: {requests: {cpu: 100m}}}]\n"
            f"status: {{phase: {phase}}}\n")


CLUSTER = NODES + pod("web-1", "n1") + pod("web-2", "n2") + pod("waiting")


def env_policy(values: str, mode: str = "Enforce") -> str:
    return f"""\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {{name: env-prod}}
spec:
  pluginName: EnvProd
  mode: {mode}
  appliesTo: {{labelSelector: {{matchLabels: {{tier: prod}}}}}}
  filters:
    - id: prod-nodes
      message: node(s) are not allowed for prod pods
      nodeLabels:
        matchExpressions: [{{key: env, operator: In, values: {values}}}]
"""


def profile(extra: str = "") -> str:
    return ("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
            "policies: [../policies]\nprofiles:\n  - schedulerName: default-scheduler\n"
            + extra)


def diff(*args: str | Path) -> Ran:
    return run_cli(register_commands(), ["diff", *args])


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    for name, values in (("old", "[prod, staging]"), ("new", "[prod]")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "env.yaml").write_text(env_policy(values))
    return tmp_path


def test_a_narrowed_policy_fails_naming_the_pod_and_node(files: Path) -> None:
    r = diff(files / "old", files / "new", "--cluster", files / "cluster.yaml")
    assert r.code == 1, r.output
    lines = r.stdout.splitlines()
    assert lines[1] == "policies: env-prod changed"
    assert ["bound pods that become violations", "1"] in [
        line.strip().rsplit(None, 1) for line in lines[2:]]
    assert ("  shop/web-2 on n2: policy env-prod (Enforce), rule prod-nodes: node(s) are "
            "not allowed for prod pods") in lines


def test_the_reverse_change_fixes_it_and_passes(files: Path) -> None:
    r = diff(files / "new", files / "old", "--cluster", files / "cluster.yaml", "-o", "json")
    assert r.code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["summary"]["newViolations"] == 0
    assert [(v["pod"], v["node"], v["rule"]) for v in doc["fixedViolations"]] == [
        ("shop/web-2", "n2", "prod-nodes")]
    [placement] = doc["placements"]  # the pending pod may now go to n2 as well
    assert placement["pod"] == "shop/waiting" and placement["change"] in ("tie", "moves")
    assert placement["old"]["node"] == "n1"


def test_fail_on_enforce_ignores_an_audit_mode_violation(files: Path) -> None:
    (files / "new" / "env.yaml").write_text(env_policy("[prod]", mode="Audit"))
    args = (files / "old", files / "new", "--cluster", files / "cluster.yaml")
    assert diff(*args).code == 1
    r = diff(*args, "--fail-on", "enforce")
    assert r.code == 0, r.output
    assert "policy env-prod (Audit)" in r.stdout  # still reported


def test_markdown_has_the_summary_table_and_collapsible_details(files: Path) -> None:
    r = diff(files / "old", files / "new", "--cluster", files / "cluster.yaml", "-o",
             "markdown")
    assert r.code == 1
    assert "| bound pods that become violations | 1 |" in r.stdout
    assert "<details><summary>Bound pods that become violations (1)</summary>" in r.stdout
    assert "| shop/web-2 | n2 | env-prod | EnvProd | prod-nodes | Enforce |" in r.stdout


@pytest.mark.parametrize(("pods", "name_length", "message_length"), [
    (60, 240, 20_000), (45, 8, 1_500), (80, 8, 60)])
def test_markdown_fits_a_pull_request_comment(tmp_path: Path, pods: int, name_length: int,
                                              message_length: int) -> None:
    """Long policy messages (up to 32,768 characters), long pod names and many findings:
    the comment stays under GitHub's 65,536 characters, cells are cut, and a table says
    how many rows it left out and why."""
    message = ("node(s) are not allowed for prod pods " * 1000)[:message_length].strip()
    names = [f"web-{i}-".ljust(name_length, "x") for i in range(pods)]
    # Every bound pod becomes a violation, every pending one stops fitting.
    cluster = NODES + "".join(pod(n, "n1") + pod(f"{n}-p") for n in names)
    (tmp_path / "cluster.yaml").write_text(cluster)
    for name, values in (("old", "[prod, staging]"), ("new", "[nowhere]")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "env.yaml").write_text(env_policy(values).replace(
            "node(s) are not allowed for prod pods", message))
    r = diff(tmp_path / "old", tmp_path / "new", "--cluster", tmp_path / "cluster.yaml",
             "-o", "markdown")
    assert r.code == 1, r.output
    assert len(r.stdout) <= 65_536
    assert f"<details><summary>Bound pods that become violations ({pods})</summary>" \
        in r.stdout
    assert f"<details><summary>Pending pods ({pods})</summary>" in r.stdout
    rows = [line for line in r.stdout.splitlines() if line.startswith("| shop/web-")]
    assert all(len(row) < 1_000 for row in rows)
    if name_length > 200:  # two tables of long rows cannot both be listed whole
        assert len(rows) < 2 * min(pods, 50)
        assert "more (`-o json` lists them all, the comment's length limit)" in r.stdout
    else:
        assert len(rows) == 2 * min(pods, 50)
        if pods > 50:
            assert f"... and {pods - 50} more (`-o json` lists them all)" in r.stdout


def test_a_profile_change_to_a_builtin_filter_is_judged_on_bound_pods(tmp_path: Path
                                                                      ) -> None:
    # The new profile turns NodeResourcesFit's filter into a stricter one: a pod
    # that overfills its node only counts under the new version.
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "env.yaml").write_text(env_policy("[prod, staging]"))
    (tmp_path / "profiles").mkdir()
    old = tmp_path / "profiles" / "old.yaml"
    new = tmp_path / "profiles" / "new.yaml"
    old.write_text(profile("    plugins: {filter: {disabled: [{name: NodeResourcesFit}]}}\n"))
    new.write_text(profile())
    big = pod("big", "n1").replace("cpu: 100m", "cpu: '5'")
    (tmp_path / "cluster.yaml").write_text(CLUSTER + big)
    r = diff(old, new, "--cluster", tmp_path / "cluster.yaml", "-o", "json")
    assert r.code == 1, r.output
    doc = json.loads(r.stdout)
    assert doc["summary"]["builtinFiltersCompared"] is True
    # Both pods on n1 overfill it: each is judged with itself taken off the node.
    assert [(v["pod"], v["node"], v["plugin"], v["policy"], v["message"])
            for v in doc["newViolations"]] == [
        ("shop/big", "n1", "NodeResourcesFit", None, "Insufficient cpu"),
        ("shop/web-1", "n1", "NodeResourcesFit", None, "Insufficient cpu")]


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    (repo / "policies").mkdir(parents=True)
    (repo / "profiles").mkdir()
    (repo / "policies" / "env.yaml").write_text(env_policy("[prod, staging]"))
    (repo / "profiles" / "main.yaml").write_text(profile())
    git(repo, "init", "-q", "-b", "main")
    git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "add", ".")
    git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "base")
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    # The change under review, in the working tree only.
    (repo / "policies" / "env.yaml").write_text(env_policy("[prod]"))
    return repo


def test_base_compares_the_working_tree_with_the_commit(repo: Path) -> None:
    cluster = repo.parent / "cluster.yaml"
    r = diff("--base", "HEAD", repo / "policies", "--cluster", cluster, "-o", "json")
    assert r.code == 1, r.output
    doc = json.loads(r.stdout)
    assert doc["old"].startswith("HEAD (") and doc["new"] == "working tree"
    assert [(v["pod"], v["node"]) for v in doc["newViolations"]] == [("shop/web-2", "n2")]
    # The working tree was not touched.
    assert "[prod]}" in (repo / "policies" / "env.yaml").read_text()
    assert subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], check=True,
                          capture_output=True, text=True).stdout.split() == [
        "M", "policies/env.yaml"]


def test_base_follows_a_profiles_policies_at_the_commit(repo: Path) -> None:
    cluster = repo.parent / "cluster.yaml"
    r = diff("--base", "main", repo / "profiles" / "main.yaml", "--cluster", cluster)
    assert r.code == 1, r.output
    assert "shop/web-2 on n2: policy env-prod (Enforce)" in r.stdout


def test_base_with_no_change_passes(repo: Path) -> None:
    git(repo, "checkout", "-q", "--", ".")
    r = diff("--base", "HEAD", repo / "policies", "--cluster", repo.parent / "cluster.yaml")
    assert r.code == 0, r.output
    assert "policies: none added, removed or changed" in r.stdout


def test_a_file_new_in_the_working_tree_is_empty_at_the_base(repo: Path) -> None:
    (repo / "extra.yaml").write_text(env_policy("[prod]").replace("env-prod", "extra")
                                     .replace("EnvProd", "Extra"))
    r = diff("--base", "HEAD", repo / "extra.yaml", "--cluster", repo.parent / "cluster.yaml")
    assert r.code == 1, r.output
    assert "policies: extra added" in r.stdout
    assert "note: " in r.stdout and "extra.yaml is not in HEAD" in r.stdout


BAD_VERSIONS = pytest.mark.parametrize(("args", "message"), [
    (["--base", "no-such-ref", "{repo}/policies"], "--base no-such-ref: no such commit"),
    (["--base", "--oops", "{repo}/policies"], "is not a git revision"),
    (["--base", "HEAD", "{repo}/missing"], "missing: no such file or directory"),
    (["{repo}/policies"], "give the two versions to compare"),
    (["{repo}/policies", "{repo}/nope"], "nope: no such file or directory"),
    (["--base", "HEAD"], "name at least one PATH"),
    (["--base", "HEAD", "/"], "/ is not in a git repository"),
    (["--base", "HEAD", "{repo}/policies", "{repo}/../cluster.yaml"],
     "is outside the git repository"),
])


@BAD_VERSIONS
@pytest.mark.parametrize("cluster", ["cluster.yaml", "unreadable.yaml"])
def test_bad_input_is_one_line_and_exit_2(repo: Path, args: list[str], message: str,
                                          cluster: str) -> None:
    # The versions are checked before the cluster is read (a large snapshot or a live
    # cluster takes seconds): the same error with a cluster that could not be read.
    r = diff(*[a.format(repo=repo) for a in args], "--cluster", repo.parent / cluster)
    assert r.code == 2, r.output
    assert message in r.stderr and "\n" not in r.stderr.strip(), r.stderr


def test_an_invalid_policy_in_the_new_version_is_exit_2(files: Path) -> None:
    (files / "new" / "env.yaml").write_text(env_policy("[prod]").replace("filters", "filterz"))
    r = diff(files / "old", files / "new", "--cluster", files / "cluster.yaml")
    assert r.code == 2
    assert "env.yaml" in r.stderr and "filterz" in r.stderr


def test_two_profiles_in_one_version_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(profile().replace("../policies", "policies"))
    (tmp_path / "b.yaml").write_text(profile().replace("../policies", "policies"))
    (tmp_path / "policies").mkdir()
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "-c", "user.email=t@e", "-c", "user.name=t",
                    "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    git(tmp_path, "-c", "user.email=t@e", "-c", "user.name=t", "add", ".")
    git(tmp_path, "-c", "user.email=t@e", "-c", "user.name=t", "commit", "-qm", "y")
    r = diff("--base", "HEAD", tmp_path / "a.yaml", tmp_path / "b.yaml", "--cluster",
             tmp_path / "cluster.yaml")
    assert r.code == 2
    assert "are both profiles" in r.stderr


def staging_pod(name: str) -> str:
    """A prod pod that only a staging node takes: it fits before the narrowing only."""
    return pod(name).replace("spec:\n", "spec:\n  nodeSelector: {env: staging}\n")


def test_pods_files_add_pending_pods_to_compare(files: Path) -> None:
    (files / "release.yaml").write_text(staging_pod("next-1") + staging_pod("next-2"))
    r = diff(files / "old", files / "new", "--cluster", files / "cluster.yaml",
             "--pods", files / "release.yaml", "-o", "json")
    doc = json.loads(r.stdout)
    assert doc["summary"]["stopsFitting"] == 2, r.output
    stopped = sorted(p["pod"] for p in doc["placements"] if p["change"] == "stops-fitting")
    assert stopped == ["shop/next-1", "shop/next-2"]
    assert doc["summary"]["newViolations"] == 1  # web-2, from the snapshot, as before


def test_a_bound_pod_of_a_pods_file_is_judged_on_its_node(files: Path) -> None:
    (files / "bound.yaml").write_text(pod("web-3", "n2"))
    r = diff(files / "old", files / "new", "--cluster", files / "cluster.yaml",
             "--pods", files / "bound.yaml")
    assert r.code == 1
    assert any(line.startswith("  shop/web-3 on n2: policy env-prod") for line in
               r.stdout.splitlines()), r.stdout


def test_a_pods_file_pod_replaces_the_clusters_copy_with_a_note(files: Path) -> None:
    (files / "waiting.yaml").write_text(staging_pod("waiting"))
    r = diff(files / "old", files / "new", "--cluster", files / "cluster.yaml",
             "--pods", files / "waiting.yaml", "-o", "json")
    doc = json.loads(r.stdout)
    assert [(p["pod"], p["change"]) for p in doc["placements"]] == [
        ("shop/waiting", "stops-fitting")], r.stdout  # once, the file's copy
    assert doc["summary"]["pending"] == 1
    assert "note: pod shop/waiting from " in r.stderr and "replaces the snapshot's copy" \
        in r.stderr


def test_a_pod_in_two_pods_files_is_exit_2(files: Path) -> None:
    for name in ("a.yaml", "b.yaml"):
        (files / name).write_text(pod("twice"))
    r = diff(files / "old", files / "new", "--cluster", files / "cluster.yaml",
             "--pods", files / "a.yaml", "--pods", files / "b.yaml")
    assert r.code == 2
    assert "Pod shop/twice is in both" in r.stderr, r.stderr
