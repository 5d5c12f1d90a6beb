"""`policyd explain` and `policyd simulate` on the inputs real users give: pods of the
default scheduler, pods being deleted or gated, clusters with no nodes, files with
typos, and the same object twice. Nothing is dropped or doubled without a word."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

from policyd.cli import schedule_cmds
from tests.cli_runs import run_cli

ROOT = Path(__file__).resolve().parents[3]
NO_NODES = "no nodes available to schedule pods"

NODES = """\
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {zone: a}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {zone: b}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
"""
PROFILE = """\
apiVersion: policyd.io/v1alpha1
kind: PolicydConfiguration
profiles:
  - schedulerName: {name}
"""
PROFILES_2 = """\
apiVersion: policyd.io/v1alpha1
kind: PolicydConfiguration
profiles:
  - schedulerName: policyd
  - schedulerName: policyd-secure
"""


def pod(name: str, *, scheduler: str | None = None, cpu: str = "100m", extra: str = "",
        spec: str = "", namespace: str = "default") -> str:
    sched = f"  schedulerName: {scheduler}\n" if scheduler else ""
    return (f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {namespace}"
            f"{extra}}}\nspec:\n{sched}  containers: [{{name: c, image: i, resources: "
            f"{{requests: {{cpu: {cpu}}}}}}}]\n{spec}")


@pytest.fixture
def app() -> typer.Typer:
    a = typer.Typer()
    a.command("explain")(schedule_cmds.explain)
    a.command("simulate")(schedule_cmds.simulate)
    return a


def run(app: typer.Typer, *args: str | Path) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) as `policyd` gives them: a PolicydError is exit 2 with
    its one line, as the real error boundary prints it."""
    r = run_cli(app, args)
    return r.code, r.stdout, r.stderr


def write(tmp: Path, name: str, *docs: str) -> Path:
    path = tmp / name
    path.write_text("---\n".join(docs))
    return path


def sim_json(app: typer.Typer, *args: str | Path) -> tuple[int, dict[str, Any], str]:
    code, out, err = run(app, "simulate", *args, "--format", "json")
    assert code in (0, 1), err
    return code, json.loads(out), err


# -- item: which pods are simulated ----------------------------------------------------------

@pytest.mark.parametrize("scheduler", [None, "default-scheduler"])
def test_without_config_default_scheduler_pods_are_scheduled(
        app: typer.Typer, tmp_path: Path, scheduler: str | None) -> None:
    cluster = write(tmp_path, "c.yaml", NODES)
    pods = write(tmp_path, "p.yaml", pod("web", scheduler=scheduler))
    code, out, err = run(app, "simulate", "--cluster", cluster, "--pods", pods)
    assert code == 0, err
    assert "1 scheduled, 0 unschedulable" in out
    assert "default/web" in out
    # The snapshot's own pending default-scheduler pods too (a `kubectl get` snapshot).
    cluster2 = write(tmp_path, "c2.yaml", NODES, pod("pending", scheduler=scheduler))
    code, doc, _ = sim_json(app, "--cluster", cluster2)
    assert code == 0 and doc["scheduled"] == 1 and doc["skipped"] == []


def test_without_config_policyd_pods_are_still_scheduled(app: typer.Typer,
                                                          tmp_path: Path) -> None:
    cluster = write(tmp_path, "c.yaml", NODES)
    pods = write(tmp_path, "p.yaml", pod("a", scheduler="policyd"), pod("b"))
    code, doc, _ = sim_json(app, "--cluster", cluster, "--pods", pods)
    assert code == 0 and doc["scheduled"] == 2


@pytest.mark.parametrize(("scheduler", "profile", "shown"), [
    (None, "policyd", '"default-scheduler" (unset in the pod)'),
    ("default-scheduler", "policyd", '"default-scheduler"'),
    ("volcano", "policyd", '"volcano"'),
    ("policyd", "other", '"policyd"'),
])
def test_with_config_an_unserved_pod_is_listed_as_skipped_and_fails(
        app: typer.Typer, tmp_path: Path, scheduler: str | None, profile: str,
        shown: str) -> None:
    cluster = write(tmp_path, "c.yaml", NODES)
    config = write(tmp_path, "profile.yaml", PROFILE.format(name=profile))
    pods = write(tmp_path, "p.yaml", pod("web", scheduler=scheduler))
    reason = f"schedulerName {shown} is not served by this profile (profiles: {profile})"
    code, out, _ = run(app, "simulate", "--cluster", cluster, "--pods", pods,
                       "--config", config)
    assert code == 1  # a pod the user asked about was not tried
    assert f"default/web: {reason}" in out
    assert "0 scheduled, 0 unschedulable, 1 skipped" in out
    code, doc, _ = sim_json(app, "--cluster", cluster, "--pods", pods, "--config", config)
    assert code == 1
    assert doc["skipped"] == [{"pod": "default/web", "reason": reason}]


def test_other_schedulers_snapshot_pods_are_listed_but_do_not_fail(
        app: typer.Typer, tmp_path: Path) -> None:
    cluster = write(tmp_path, "c.yaml", NODES, pod("theirs", scheduler="volcano"))
    config = write(tmp_path, "profile.yaml", PROFILES_2)
    code, doc, _ = sim_json(app, "--cluster", cluster, "--config", config)
    assert code == 0
    assert doc["skipped"] == [{"pod": "default/theirs", "reason": 'schedulerName "volcano" '
                               "is not served by this profile (profiles: policyd, "
                               "policyd-secure)"}]


# -- item: pods the queue would not try ------------------------------------------------------

DELETING = ", deletionTimestamp: '2026-01-01T00:00:00Z'"
GATED = "  schedulingGates: [{name: example.com/quota}]\n"


def test_deleting_pods_are_skipped_not_placed(app: typer.Typer, tmp_path: Path) -> None:
    cluster = write(tmp_path, "c.yaml", NODES, pod("going", extra=DELETING, cpu="3"),
                    pod("stays", cpu="3"))
    code, doc, _ = sim_json(app, "--cluster", cluster)
    assert code == 0  # a terminating pod of the snapshot is not a failure
    assert [p["pod"] for p in doc["placements"]] == ["default/stays"]
    assert doc["skipped"] == [{"pod": "default/going",
                               "reason": "being deleted (metadata.deletionTimestamp is set)"}]
    # Given with --pods it was asked about: exit 1, and the text says why.
    pods = write(tmp_path, "p.yaml", pod("going2", extra=DELETING))
    code, out, _ = run(app, "simulate", "--cluster", cluster, "--pods", pods)
    assert code == 1
    assert "default/going2: being deleted (metadata.deletionTimestamp is set)" in out


def test_gated_pods_are_held_and_listed(app: typer.Typer, tmp_path: Path) -> None:
    cluster = write(tmp_path, "c.yaml", NODES, pod("snap-gated", spec=GATED))
    code, out, _ = run(app, "simulate", "--cluster", cluster)
    assert code == 0
    assert ("default/snap-gated: SchedulingGates: waiting for scheduling gates: "
            "[example.com/quota]") in out
    assert "1 held out of the queue" in out
    pods = write(tmp_path, "p.yaml", pod("gated", spec=GATED))
    code, doc, _ = sim_json(app, "--cluster", cluster, "--pods", pods)
    assert code == 1 and doc["scheduled"] == 0
    reason = "waiting for scheduling gates: [example.com/quota]"
    assert doc["gated"] == [
        {"pod": f"default/{name}", "plugin": "SchedulingGates", "reason": reason}
        for name in ("snap-gated", "gated")]


def test_bound_pods_in_pod_files_count_on_their_node_and_are_listed(
        app: typer.Typer, tmp_path: Path) -> None:
    cluster = write(tmp_path, "c.yaml", NODES)
    pods = write(tmp_path, "p.yaml", pod("running", cpu="3", spec="  nodeName: n1\n"),
                 pod("new", cpu="3"))
    code, doc, _ = sim_json(app, "--cluster", cluster, "--pods", pods)
    assert code == 0
    assert doc["placements"] == [{"pod": "default/new", "node": "n2", "message": ""}]
    assert doc["skipped"] == [{"pod": "default/running",
                               "reason": "already bound to node n1 (spec.nodeName is set)"}]


# -- item: no nodes --------------------------------------------------------------------------

def test_no_nodes_says_what_kube_scheduler_says(app: typer.Typer, tmp_path: Path) -> None:
    empty = write(tmp_path, "empty.yaml", "apiVersion: v1\nkind: List\nitems: []\n")
    pods = write(tmp_path, "p.yaml", pod("web"))
    code, out, _ = run(app, "explain", "--cluster", empty, "--pod", pods)
    assert code == 1
    assert out.splitlines()[:2] == ["Pod default/web is unschedulable:", f"  {NO_NODES}"]
    assert "0/0" not in out
    code, out, _ = run(app, "explain", "--cluster", empty, "--pod", pods, "--format", "json")
    assert json.loads(out)["message"] == NO_NODES
    code, doc, _ = sim_json(app, "--cluster", empty, "--pods", pods)
    assert code == 1
    assert doc["placements"] == [{"pod": "default/web", "node": None, "message": NO_NODES}]


# -- item: strict field validation ------------------------------------------------------------

TYPO_SPECS = [
    ("  nodeSelectr: {zone: b}\n", "spec.nodeSelectr", "nodeSelector"),
    ("  tolerations: [{key: k, operater: Exists}]\n", "spec.tolerations[0].operater",
     "operator"),
    ("  tolerations: [{key: k, operator: Exists, efect: NoSchedule}]\n",
     "spec.tolerations[0].efect", "effect"),
    ("  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
     "{nodeSelectorTerms: [{matchExpressions: [{key: zone, operater: In, values: [b]}]}]}}}\n",
     "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
     "nodeSelectorTerms[0].matchExpressions[0].operater", "operator"),
]


@pytest.mark.parametrize(("spec", "field", "suggestion"), TYPO_SPECS)
@pytest.mark.parametrize("command", ["simulate", "explain"])
def test_a_typo_is_exit_2_naming_file_object_and_field(
        app: typer.Typer, tmp_path: Path, spec: str, field: str, suggestion: str,
        command: str) -> None:
    cluster = write(tmp_path, "c.yaml", NODES)
    pods = write(tmp_path, "p.yaml", pod("web", spec=spec))
    flag = "--pods" if command == "simulate" else "--pod"
    code, out, err = run(app, command, "--cluster", cluster, flag, pods)
    assert code == 2 and out == ""
    assert err.startswith(f"{pods} (document 1): Pod default/web: {field}: unknown field ")
    assert f'(did you mean "{suggestion}"?)' in err
    assert "\n" not in err


def test_resource_typo_in_the_snapshot_is_exit_2(app: typer.Typer, tmp_path: Path) -> None:
    bad = pod("web", spec="", cpu="1").replace("resources:", "resource:")
    cluster = write(tmp_path, "c.yaml", NODES, bad)
    code, _, err = run(app, "simulate", "--cluster", cluster)
    assert code == 2
    assert err.startswith(f"{cluster} (document 3): Pod default/web: "
                          'spec.containers[0].resource: unknown field "resource" (did you mean '
                          '"resources"?)')
    node_typo = NODES.replace("labels: {zone: a}", "lables: {zone: a}")
    code, _, err = run(app, "simulate", "--cluster", write(tmp_path, "n.yaml", node_typo))
    assert code == 2 and "Node n1: metadata.lables" in err


def test_warn_goes_on_and_reports_every_typo(app: typer.Typer, tmp_path: Path) -> None:
    cluster = write(tmp_path, "c.yaml", NODES)
    pods = write(tmp_path, "p.yaml", pod("web", spec=TYPO_SPECS[0][0] + TYPO_SPECS[2][0]))
    code, out, err = run(app, "simulate", "--cluster", cluster, "--pods", pods,
                         "--validate", "warn")
    assert code == 0 and "1 scheduled" in out
    warnings = err.splitlines()
    assert len(warnings) == 2
    assert all(w.startswith(f"policyd: warning: {pods} (document 1): Pod default/web: ")
               for w in warnings)
    code, doc, err = sim_json(app, "--cluster", cluster, "--pods", pods, "--validate", "warn")
    assert [w.split(": ")[2] for w in doc["warnings"]] == [
        "spec.nodeSelectr", "spec.tolerations[0].efect"]
    code, out, err = run(app, "explain", "--cluster", cluster, "--pod", pods,
                         "--validate", "warn", "--format", "json")
    assert code == 0 and len(json.loads(out)["warnings"]) == 2
    code, out, err = run(app, "simulate", "--cluster", cluster, "--pods", pods,
                         "--validate", "ignore")
    assert code == 0 and err == ""


def test_bad_validate_value_is_a_usage_error(app: typer.Typer, tmp_path: Path) -> None:
    code, _, err = run(app, "simulate", "--cluster", write(tmp_path, "c.yaml", NODES),
                       "--validate", "true")
    assert code == 2 and "--validate" in err


# -- item: duplicates ------------------------------------------------------------------------

def test_duplicate_node_in_the_snapshot_is_exit_2(app: typer.Typer, tmp_path: Path) -> None:
    cluster = write(tmp_path, "c.yaml", NODES, NODES.split("---\n")[1])
    code, _, err = run(app, "simulate", "--cluster", cluster)
    assert (code, err) == (2, f"{cluster}: Node n2 is defined twice (a cluster has one "
                              "Node per name)")
    code, _, err = run(app, "explain", "--cluster", cluster, "--pod", "x")
    assert code == 2 and "Node n2 is defined twice" in err


def test_duplicate_namespace_in_the_snapshot_is_exit_2(app: typer.Typer,
                                                       tmp_path: Path) -> None:
    ns = "kind: Namespace\nmetadata: {name: shop, labels: {team: %s}}\n"
    cluster = write(tmp_path, "c.yaml", NODES, ns % "a", ns % "b")
    code, _, err = run(app, "simulate", "--cluster", cluster)
    assert code == 2 and "Namespace shop is defined twice" in err and str(cluster) in err


def test_duplicate_pod_in_the_snapshot_is_exit_2(app: typer.Typer, tmp_path: Path) -> None:
    cluster = write(tmp_path, "c.yaml", NODES, pod("web"), pod("web", cpu="2"))
    code, _, err = run(app, "simulate", "--cluster", cluster)
    assert code == 2 and err.startswith(f"{cluster}: Pod default/web is defined twice")


def test_the_same_pod_in_two_pod_files_is_exit_2(app: typer.Typer, tmp_path: Path) -> None:
    cluster = write(tmp_path, "c.yaml", NODES)
    a = write(tmp_path, "a.yaml", pod("web"))
    b = write(tmp_path, "b.yaml", pod("other"), pod("web"))
    code, _, err = run(app, "simulate", "--cluster", cluster, "--pods", a, "--pods", b)
    assert code == 2 and err.startswith(f"Pod default/web is in both {a} and {b}")
    code, _, err = run(app, "simulate", "--cluster", cluster, "--pods", b, "--pods", b)
    assert (code, err) == (2, f"{b}: given twice with --pods (its pods would be placed "
                              "twice)")
    same = write(tmp_path, "same.yaml", pod("web"), pod("web", cpu="2"))
    code, _, err = run(app, "simulate", "--cluster", cluster, "--pods", same)
    assert code == 2 and err.startswith(f"{same}: Pod default/web is defined twice")


@pytest.mark.parametrize("bound", [False, True])
def test_a_pod_file_copy_replaces_the_snapshots_and_is_placed_once(
        app: typer.Typer, tmp_path: Path, bound: bool) -> None:
    on_n1 = "  nodeName: n1\n" if bound else ""
    cluster = write(tmp_path, "c.yaml", NODES, pod("web", cpu="3", spec=on_n1,
                                                    extra=", uid: u1"))
    pods = write(tmp_path, "p.yaml", pod("web", cpu="3"))
    code, doc, _ = sim_json(app, "--cluster", cluster, "--pods", pods)
    assert code == 0
    assert [p["pod"] for p in doc["placements"]] == ["default/web"]
    note = f"pod default/web from {pods} replaces the snapshot's copy"
    assert doc["notes"] == [note + (", which was bound to node n1" if bound else "")]
    code, out, _ = run(app, "simulate", "--cluster", cluster, "--pods", pods)
    assert f"note: {note}" in out and "1 scheduled, 0 unschedulable" in out
    # The snapshot's copy no longer holds its 3 CPUs: both nodes are free for it.
    code, out, _ = run(app, "explain", "--cluster", cluster, "--pod", pods, "--format", "json")
    explained = json.loads(out)
    assert explained["feasibleNodes"] == ["n1", "n2"]
    assert explained["notes"] == [note + (", which was bound to node n1" if bound else "")]


# -- explain: which profile ------------------------------------------------------------------

def test_explain_says_which_profile_it_used(app: typer.Typer, tmp_path: Path) -> None:
    cluster = write(tmp_path, "c.yaml", NODES)
    pods = write(tmp_path, "p.yaml", pod("web"))
    code, out, _ = run(app, "explain", "--cluster", cluster, "--pod", pods, "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["profile"] == "policyd" and doc["notes"] == []
    config = write(tmp_path, "profile.yaml", PROFILE.format(name="mine"))
    code, out, _ = run(app, "explain", "--cluster", cluster, "--pod", pods, "--config", config)
    assert code == 0
    assert ('note: pod default/web: schedulerName "default-scheduler" (unset in the pod) is '
            "not served by this profile (profiles: mine); explained with profile mine "
            "anyway") in out


def test_explain_with_several_profiles_and_none_serving_fails_clearly(
        app: typer.Typer, tmp_path: Path) -> None:
    cluster = write(tmp_path, "c.yaml", NODES)
    pods = write(tmp_path, "p.yaml", pod("web", scheduler="volcano"))
    config = write(tmp_path, "profile.yaml", PROFILES_2)
    code, out, err = run(app, "explain", "--cluster", cluster, "--pod", pods, "--config", config)
    assert code == 2 and out == ""
    assert err == ('pod default/web: schedulerName "volcano" is not served by this profile '
                   "(profiles: policyd, policyd-secure); set its spec.schedulerName to the "
                   "profile to explain it with")
    pods = write(tmp_path, "p2.yaml", pod("web", scheduler="policyd-secure"))
    code, out, _ = run(app, "explain", "--cluster", cluster, "--pod", pods, "--config", config,
                       "--format", "json")
    assert code == 0 and json.loads(out)["profile"] == "policyd-secure"


@pytest.mark.parametrize(("extra", "spec", "words"), [
    (DELETING, "", "is being deleted (metadata.deletionTimestamp is set): kube-scheduler "
                   "would not try it"),
    ("", GATED, "is held by scheduling gates (example.com/quota)"),
    ("", "  nodeName: n2\n", "is already bound to node n2 (spec.nodeName is set)"),
])
def test_explain_notes_pods_the_scheduler_would_not_try(
        app: typer.Typer, tmp_path: Path, extra: str, spec: str, words: str) -> None:
    cluster = write(tmp_path, "c.yaml", NODES, pod("web", extra=extra, spec=spec))
    code, out, _ = run(app, "explain", "--cluster", cluster, "--pod", "default/web")
    assert code == 0
    assert f"note: pod default/web {words}" in out


CLAIM_FROM_TEMPLATE = "  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]\n"
NO_CLAIM_YET = 'pod "default/web": ResourceClaim not created yet'


def test_a_pod_whose_claim_does_not_exist_is_held_not_tried(
        app: typer.Typer, tmp_path: Path) -> None:
    """DynamicResources' PreEnqueue: kube-scheduler keeps the pod out of its queue
    (no FailedScheduling) until the claim controller has created its claim."""
    cluster = write(tmp_path, "c.yaml", NODES, pod("web", spec=CLAIM_FROM_TEMPLATE))
    code, doc, _ = sim_json(app, "--cluster", cluster)
    assert code == 0 and doc["placements"] == []
    assert doc["gated"] == [{"pod": "default/web", "plugin": "DynamicResources",
                             "reason": NO_CLAIM_YET}]
    code, out, _ = run(app, "explain", "--cluster", cluster, "--pod", "default/web")
    assert code == 1  # explained as if let in: PreFilter refuses it for the same reason
    assert (f"note: pod default/web is held out of the queue by DynamicResources "
            f"({NO_CLAIM_YET}): kube-scheduler will not try it") in out


# -- through the real entry point --------------------------------------------------------------

def test_entry_point_exit_codes(tmp_path: Path) -> None:
    cluster = write(tmp_path, "c.yaml", NODES)
    pods = write(tmp_path, "p.yaml", pod("web", spec=TYPO_SPECS[0][0]))

    def policyd(*args: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "policyd", *map(str, args)],
                              capture_output=True, text=True, timeout=120, cwd=ROOT)

    r = policyd("simulate", "--cluster", cluster, "--pods", pods)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith(f"policyd: error: {pods} (document 1): Pod default/web: "
                               "spec.nodeSelectr: unknown field")
    r = policyd("simulate", "--cluster", cluster, "--pods", pods, "--validate", "warn")
    assert r.returncode == 0 and "1 scheduled" in r.stdout
    assert r.stderr.startswith("policyd: warning: ")


# -- simulate --all-schedulers: other schedulers' pods, with the profile explain uses ----------
# Pods of every schedulerName are scheduled with the profile explain would explain them
# with (the default one, else the only one), with a note saying how many; without the
# option they stay skipped, with a note pointing at it; several profiles and no default
# one is a usage error, as explain's.

PROFILES_WITH_DEFAULT = PROFILES_2 + "  - schedulerName: default-scheduler\n"


def all_sched_json(app: typer.Typer, *args: str | Path) -> tuple[int, dict[str, Any]]:
    code, out, err = run(app, "simulate", *map(str, args), "-o", "json")
    assert code in (0, 1), err
    return code, json.loads(out)


def test_other_schedulers_pods_are_scheduled_only_when_asked(
        app: typer.Typer, tmp_path: Path) -> None:
    cluster = write(tmp_path, "c.yaml", NODES, pod("mine"), pod("theirs", scheduler="volcano"),
                    pod("batch", scheduler="yunikorn"), pod("batch2", scheduler="yunikorn"))
    code, doc = all_sched_json(app, "--cluster", cluster)
    assert code == 0 and doc["scheduled"] == 1
    skipped = doc["skipped"]
    assert isinstance(skipped, list)
    assert [s["pod"] for s in skipped] == ["default/theirs", "default/batch", "default/batch2"]
    assert doc["notes"] == ["3 pending pod(s) of other schedulers skipped; "
                            "--all-schedulers schedules them with profile policyd"]
    code, doc = all_sched_json(app, "--cluster", cluster, "--all-schedulers")
    assert code == 0 and doc["scheduled"] == 4 and doc["skipped"] == []
    assert doc["notes"] == [
        '1 pod(s) of schedulerName "volcano" scheduled with profile policyd (--all-schedulers)',
        '2 pod(s) of schedulerName "yunikorn" scheduled with profile policyd (--all-schedulers)']


def test_a_requested_pod_of_another_scheduler_no_longer_fails(
        app: typer.Typer, tmp_path: Path) -> None:
    cluster = write(tmp_path, "c.yaml", NODES)
    pods = write(tmp_path, "p.yaml", pod("web", scheduler="volcano"))
    assert all_sched_json(app, "--cluster", cluster, "--pods", pods)[0] == 1
    code, doc = all_sched_json(app, "--cluster", cluster, "--pods", pods, "--all-schedulers")
    assert code == 0 and doc["placements"][0]["pod"] == "default/web"


@pytest.mark.parametrize(("profiles", "chosen"), [
    (PROFILE.format(name="mine"), "mine"),  # the only profile
    (PROFILES_WITH_DEFAULT, "default-scheduler"),  # the default one among several
])
def test_with_a_profile_file_the_stand_in_is_the_one_explain_uses(
        app: typer.Typer, tmp_path: Path, profiles: str, chosen: str) -> None:
    cluster = write(tmp_path, "c.yaml", NODES)
    pods = write(tmp_path, "p.yaml", pod("web", scheduler="volcano"))
    config = write(tmp_path, "profile.yaml", profiles)
    code, doc = all_sched_json(app, "--cluster", cluster, "--pods", pods, "--config", config,
                              "--all-schedulers")
    assert code == 0
    assert doc["notes"] == [f'1 pod(s) of schedulerName "volcano" scheduled with profile '
                            f"{chosen} (--all-schedulers)"]
    code, out, _ = run(app, "explain", "--cluster", cluster, "--pod", pods, "--config", config,
                       "-o", "json")
    assert code == 0 and json.loads(out)["profile"] == chosen


def test_several_profiles_and_no_default_is_a_usage_error(
        app: typer.Typer, tmp_path: Path) -> None:
    cluster = write(tmp_path, "c.yaml", NODES, pod("theirs", scheduler="volcano"))
    config = write(tmp_path, "profile.yaml", PROFILES_2)
    code, out, err = run(app, "simulate", "--cluster", cluster, "--config", config,
                         "--all-schedulers")
    assert code == 2 and out == ""
    assert err.startswith('--all-schedulers: pods of schedulerName "volcano" are served by '
                          "no profile and there is no default one to take them (profiles: "
                          'policyd, policyd-secure; none serves "default-scheduler")')
    # Without the option nothing changes: skipped, listed, not a failure.
    code, doc = all_sched_json(app, "--cluster", cluster, "--config", config)
    assert code == 0 and doc["notes"] == []


def test_bound_and_finished_pods_of_other_schedulers_stay_skipped(
        app: typer.Typer, tmp_path: Path) -> None:
    bound = pod("bound", scheduler="volcano", spec="  nodeName: n1\n")
    done = pod("done", scheduler="volcano") + "status: {phase: Succeeded}\n"
    cluster = write(tmp_path, "c.yaml", NODES, bound, done)
    code, doc = all_sched_json(app, "--cluster", cluster, "--all-schedulers")
    assert code == 0 and doc["scheduled"] == 0 and doc["notes"] == []
