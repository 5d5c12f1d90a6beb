"""A file of SchedulingPolicy objects is the same whether applied or mounted: what
`kubectl get schedulingpolicies -o yaml` prints (a `kind: List` with server-set metadata,
managedFields and status) lints and compiles item by item, and a problem in an item
points at the item's own lines."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from policyd.lint.runner import lint_paths
from policyd.policy.from_paths import load_policy_set

FIXTURES = Path(__file__).resolve().parent / "fixtures"
KUBECTL_LIST = FIXTURES / "kubectl-get-list.yaml"
REPO_PLUGINS = ["EnvProd", "HwEncrypt", "LowLatency", "MemoryHeadroom"]

ITEM = """\
- apiVersion: policyd.io/v1alpha1
  kind: SchedulingPolicy
  metadata:
    name: {name}
    uid: 0b7c2a51-2c1e-4c43-9d55-5e1f0c1d2e3f
    resourceVersion: "42"
    generation: 3
    creationTimestamp: "2026-01-01T00:00:00Z"
  spec:
    pluginName: {plugin}
    weight: {weight}
    filters:
      - id: prod
        message: node(s) are not production nodes
        nodeLabels:
          matchLabels: {{env: prod}}
"""


def list_file(tmp_path: Path, *items: tuple[str, str, int],
              kind: str = "List", api_version: str = "v1") -> Path:
    body = "".join(ITEM.format(name=n, plugin=p, weight=w) for n, p, w in items)
    path = tmp_path / "list.yaml"
    path.write_text(f"apiVersion: {api_version}\nkind: {kind}\nmetadata:\n"
                    f"  resourceVersion: \"\"\nitems:\n{body}")
    return path


def test_kubectl_output_with_server_fields_and_status_lints_clean() -> None:
    text = KUBECTL_LIST.read_text()
    # The fixture really holds what the API server adds, or the test proves nothing.
    for field in ("managedFields:", "resourceVersion:", "uid:", "creationTimestamp:",
                  "status:", "lastTransitionTime:"):
        assert field in text
    result = lint_paths([KUBECTL_LIST])
    assert result.report.problems == []
    assert result.exit_code == 0


def test_kubectl_output_compiles_every_item() -> None:
    result = load_policy_set([KUBECTL_LIST])
    assert result.problems == []
    assert sorted(c.name for c in result.compiled) == REPO_PLUGINS
    # Each item is a document of its own, starting at its own line.
    assert [d.line for d in result.documents] == [6, 73, 113, 160]


def test_a_bad_item_is_reported_at_its_own_lines(tmp_path: Path) -> None:
    path = list_file(tmp_path, ("a", "Alpha", 1), ("b", "Beta", 500))
    result = load_policy_set([path])
    [problem] = result.problems
    lines = path.read_text().splitlines()
    assert (problem.rule, problem.path) == ("schema", "items[1].spec.weight")
    assert lines[problem.line - 1].strip() == "weight: 500"
    assert problem.column == lines[problem.line - 1].index("500") + 1
    # The good item still compiles: a problem of one item is not its sibling's.
    assert [c.name for c in result.compiled] == ["Alpha"]


def test_items_of_one_list_are_checked_against_each_other(tmp_path: Path) -> None:
    path = list_file(tmp_path, ("a", "Alpha", 1), ("b", "Alpha", 1),
                     kind="SchedulingPolicyList", api_version="policyd.io/v1alpha1")
    result = load_policy_set([path])
    [problem] = result.problems
    assert (problem.rule, problem.path) == ("duplicate-plugin-name",
                                            "items[1].spec.pluginName")
    assert path.read_text().splitlines()[problem.line - 1].strip() == "pluginName: Alpha"
    assert [c.name for c in result.compiled] == ["Alpha"]
    assert [d.line for d in result.documents] == [6, 22]


def test_an_item_that_is_not_a_policy_is_reported_at_its_kind(tmp_path: Path) -> None:
    path = tmp_path / "pods.yaml"
    path.write_text("apiVersion: v1\nkind: List\nitems:\n"
                    "  - apiVersion: v1\n    kind: Pod\n    metadata: {name: p}\n")
    [problem] = lint_paths([path]).report.problems
    assert (problem.rule, problem.line, problem.column, problem.path) == (
        "not-a-policy", 5, 11, "items[0].kind")


def test_items_that_are_not_a_list_are_a_problem(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("apiVersion: v1\nkind: List\nitems: {a: 1}\n")
    [problem] = lint_paths([path]).report.problems
    assert (problem.rule, problem.line, problem.path) == ("not-a-policy", 3, "items")


def test_an_empty_list_has_nothing_to_check(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("apiVersion: v1\nkind: List\nmetadata:\n  resourceVersion: \"\"\n"
                    "items: []\n")
    result = load_policy_set([path])
    assert (result.problems, result.documents) == ([], [])


def test_check_config_runs_the_policies_of_a_list_file(tmp_path: Path) -> None:
    import typer

    from policyd.cli.check_config_cmd import check_config

    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "cluster.yaml").write_text(KUBECTL_LIST.read_text())
    profile = tmp_path / "profile.yaml"
    # LowLatency is configured by name: it must exist, i.e. come from the list file.
    profile.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
                       "policies: [policies]\nprofiles:\n  - schedulerName: policyd\n"
                       "    plugins:\n      score:\n        enabled:\n"
                       "          - {name: LowLatency, weight: 3}\n")
    app = typer.Typer()
    app.command()(check_config)
    ok = CliRunner().invoke(app, [str(profile)], env={"GITHUB_ACTIONS": ""})
    assert (ok.exit_code, ok.stdout.endswith("no problems\n")) == (0, True), ok.stdout

    # The same profile with a bad item: check-config fails at the item's line.
    bad = KUBECTL_LIST.read_text().replace("    weight: 2\n", "    weight: 0\n")
    assert bad != KUBECTL_LIST.read_text()
    (policies / "cluster.yaml").write_text(bad)
    failed = CliRunner().invoke(app, [str(profile)],
                                env={"GITHUB_ACTIONS": ""})
    assert failed.exit_code == 1
    line = bad.splitlines().index("    weight: 0") + 1
    assert f"cluster.yaml:{line}:13:" in failed.stdout, failed.stdout
