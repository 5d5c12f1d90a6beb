"""The pre-commit hooks, run by the real `pre-commit` tool on a GitOps-style repository:
policies and PolicyTests beside Kubernetes manifests, kustomizations and CI files.

Two ways to get the hooks, both from this checkout's `.pre-commit-hooks.yaml`:
- `installed`: what users do — `repo:` a git copy of this project at a commit;
  pre-commit builds the hooks' virtualenv with pip (needs PyPI; skipped without it).
- `system`: the same hook definitions (files, types, args, ...) as a `repo: local`
  hook running this checkout's code, so the matching rules are exercised offline.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[2]
PRE_COMMIT = Path(sys.executable).parent / "pre-commit"

# What `pip install .` of the project needs, and the hooks.
PROJECT_FILES = ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml", "policyd/")

POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: web-ssd}
spec:
  pluginName: WebSsd
  filters:
    - {id: ssd, message: "node(s) without ssd", nodeLabels: {matchLabels: {disk: ssd}}}
"""
BROKEN_POLICY = POLICY.replace("pluginName: WebSsd", "pluginName: web_ssd")

GITOPS_FILES = {
    "apps/web/deployment.yaml": """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      schedulerName: policyd
      containers: [{name: web, image: nginx}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {selector: {app: web}, ports: [{port: 80}]}
""",
    "apps/web/kustomization.yaml": """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [deployment.yaml]
""",
    "clusters/prod/kustomization.yaml": "resources: [../../apps/web]\n",
    ".github/workflows/ci.yaml": """\
name: ci
on: [push, pull_request]
jobs:
  lint:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: policyd lint policies/
""",
    "apps/web/web.policy.yaml": POLICY,  # a policy kept beside its app, by name
}


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None,
         timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _git(cwd: Path, *args: str) -> str:
    r = _run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com",
              "-c", "commit.gpgsign=false", *args], cwd)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def _hook_definitions() -> list[dict[str, Any]]:
    hooks: list[dict[str, Any]] = YAML(typ="safe").load(
        (ROOT / ".pre-commit-hooks.yaml").read_text())
    return hooks


@pytest.fixture(scope="module")
def project_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A git repository holding this checkout's working tree (committed or not) at one
    commit, as pre-commit's `repo:` needs."""
    dest = tmp_path_factory.mktemp("policyd-project")
    listed = _run(["git", "ls-files", "-co", "--exclude-standard", "--", *PROJECT_FILES],
                  ROOT).stdout.split("\n")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "policyd under test")
    return dest, _git(dest, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # One per module: the `installed` hook environment is built once, then reused.
    return tmp_path_factory.mktemp("pre-commit-home")


Config = Callable[[dict[str, dict[str, Any]]], str]


@pytest.fixture(params=["system", "installed"])
def make_config(request: pytest.FixtureRequest, project_repo: tuple[Path, str]) -> Config:
    """`.pre-commit-config.yaml` text using both hooks, with per-hook overrides (as
    users write them under the hook's id)."""
    repo, rev = project_repo

    def installed(overrides: dict[str, dict[str, Any]]) -> str:
        hooks = [{"id": h["id"], **overrides.get(h["id"], {})} for h in _hook_definitions()]
        return _dump({"repos": [{"repo": str(repo), "rev": rev, "hooks": hooks}]})

    def system(overrides: dict[str, dict[str, Any]]) -> str:
        hooks = []
        for h in _hook_definitions():
            program, rest = h["entry"].split(" ", 1)
            assert program == "policyd"
            hooks.append({**h, "language": "system",
                          "entry": f"{sys.executable} -m policyd {rest}",
                          **overrides.get(h["id"], {})})
        return _dump({"repos": [{"repo": "local", "hooks": hooks}]})

    return installed if request.param == "installed" else system


def _dump(data: Any) -> str:
    import io

    out = io.StringIO()
    YAML(typ="safe").dump(data, out)
    return out.getvalue()


@pytest.fixture
def gitops(tmp_path: Path) -> Path:
    """A repository with this project's policies and PolicyTests under policies/,
    manifests, kustomizations, a workflow, and a policy named *.policy.yaml."""
    repo = tmp_path / "gitops"
    shutil.copytree(ROOT / "policies", repo / "policies")
    for rel, text in GITOPS_FILES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    _git(repo, "init", "-q")
    return repo


def pre_commit(repo: Path, config: str, home: Path) -> subprocess.CompletedProcess[str]:
    # The dev extra installs it: without it the hooks are untested, a failure to see.
    assert PRE_COMMIT.exists(), "pre-commit is not installed (the dev extra has it)"
    (repo / ".pre-commit-config.yaml").write_text(config)
    _git(repo, "add", "-A")
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PYTHONPATH": str(ROOT),
           "PRE_COMMIT_COLOR": "never", "GITHUB_ACTIONS": ""}
    r = _run([str(PRE_COMMIT), "run", "--all-files", "--verbose"], repo, env)
    if r.returncode != 0 and "Installing environment" in r.stdout + r.stderr and any(
            s in r.stdout + r.stderr for s in (
                "NewConnectionError", "Temporary failure in name resolution",
                "No matching distribution found", "Network is unreachable",
                "ProxyError", "Could not find a version")):
        pytest.skip("PyPI is not reachable: cannot build the hooks' environment")
    return r


def _contents(repo: Path) -> dict[str, bytes]:
    return {str(p.relative_to(repo)): p.read_bytes() for p in sorted(repo.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(repo).parts}


def test_manifests_pass_untouched_and_policies_are_checked(
        gitops: Path, make_config: Config, pre_commit_home: Path) -> None:
    before = _contents(gitops)
    r = pre_commit(gitops, make_config({}), pre_commit_home)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "policyd lint" in out and "policyd test" in out
    assert "not-a-policy" not in out
    # lint saw the policies (4 in policies/, 4 PolicyTests, the *.policy.yaml file)...
    assert "9 files checked, no problems" in out
    # ...and the tests ran.
    assert "13 passed, 0 failed" in out
    after = _contents(gitops)
    after.pop(".pre-commit-config.yaml")
    assert after == before


@pytest.mark.parametrize("rel", ["policies/web-ssd.yaml", "apps/web/web.policy.yaml",
                                 "deploy/scheduler/policies/web.yml"])
def test_a_broken_policy_fails_the_lint_hook(
        gitops: Path, make_config: Config, pre_commit_home: Path, rel: str) -> None:
    (gitops / rel).parent.mkdir(parents=True, exist_ok=True)
    (gitops / rel).write_text(BROKEN_POLICY)
    r = pre_commit(gitops, make_config({}), pre_commit_home)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert f"{rel}:5:" in out  # pluginName's line
    assert "Failed" in out
    for manifest in ("deployment.yaml", "kustomization.yaml", "ci.yaml"):
        assert manifest not in out


def test_a_failing_policy_test_fails_the_test_hook(
        gitops: Path, make_config: Config, pre_commit_home: Path) -> None:
    test_file = gitops / "policies/tests/hw-encrypt.test.yaml"
    test_file.write_text(test_file.read_text().replace("pass: [secure-1, secure-2]",
                                                       "pass: [secure-1, plain-1]"))
    r = pre_commit(gitops, make_config({}), pre_commit_home)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "policyd test" in out and "plain-1" in out


def test_a_policy_outside_the_default_files_is_checked_only_when_widened(
        gitops: Path, make_config: Config, pre_commit_home: Path) -> None:
    (gitops / "legacy").mkdir()
    (gitops / "legacy/web-ssd.yaml").write_text(BROKEN_POLICY)
    r = pre_commit(gitops, make_config({}), pre_commit_home)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "legacy/web-ssd.yaml" not in r.stdout

    # Widened to every YAML file, as the docs show: the broken policy is found, and the
    # manifests, kustomizations and the workflow still pass (--skip-non-policies).
    widened = make_config({"policyd-lint": {"files": r"\.ya?ml$"}})
    r = pre_commit(gitops, widened, pre_commit_home)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "legacy/web-ssd.yaml:5:" in out
    assert "not-a-policy" not in out
    for manifest in ("deployment.yaml", "kustomization.yaml", "ci.yaml"):
        assert manifest not in out

    # Widened without the skip (`args: []`): every manifest is reported as not a policy.
    strict = make_config({"policyd-lint": {"files": r"\.ya?ml$", "args": []}})
    r = pre_commit(gitops, strict, pre_commit_home)
    out = r.stdout + r.stderr
    assert r.returncode == 1
    assert "apps/web/deployment.yaml:2:" in out and "not-a-policy" in out


def test_the_project_copy_holds_the_working_tree(project_repo: tuple[Path, str]) -> None:
    repo, _ = project_repo
    assert (repo / ".pre-commit-hooks.yaml").read_text() == \
        (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert (repo / "policyd/cli/lint_cmd.py").read_text() == \
        (ROOT / "policyd/cli/lint_cmd.py").read_text()


