"""Audit mode in the Framework and the cycle: an audited policy is in no filter or
score list, the pod lands exactly where it would without the policy, and each of its
filter rules is counted, per rule, over the feasible nodes."""

from __future__ import annotations

import random
from typing import Any

import pytest

from policyd.config.plugins import build_framework, default_framework
from policyd.engine.cycle import AuditFinding, ScheduleResult, schedule_one
from policyd.framework.interfaces import AuditPlugin, FilterPlugin, ScorePlugin
from policyd.model.cluster import ClusterState
from policyd.model.records import Node, Pod, node_from_dict, pod_from_dict
from policyd.policy.compiler import AuditedPolicy, compile_policy
from tests.builders import make_node, make_pod
from tests.gen.clusters import gen_cluster, gen_pod
from tests.unit.policy.conftest import make_policy

ENCRYPT = "example.com/encrypt"
HW = "example.com/hw"
REASON_HW = "node(s) don't offer hardware encryption"
REASON_ZONE = "node(s) are outside zone a"


def policy_doc(mode: str | None, *, scores: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "appliesTo": {"annotationSelector": {"matchAnnotations": {ENCRYPT: "true"}}},
        "filters": [
            {"id": "hw-node", "message": REASON_HW,
             "annotationToNodeLabel": {"annotation": ENCRYPT, "value": "true",
                                       "label": HW, "labelValue": "true"}},
            {"id": "zone-a", "message": REASON_ZONE,
             "nodeLabels": {"matchExpressions": [
                 {"key": "zone", "operator": "In", "values": ["a"]}]}},
        ],
    }
    if scores:
        # Prefers exactly the nodes the filters reject: were it counted, it would move
        # the pod.
        spec["scores"] = [{"id": "prefer-b", "weight": 1, "normalize": "none",
                           "labelValue": {"label": "zone", "values": {"b": 100},
                                          "default": 0}}]
    if mode is not None:
        spec["mode"] = mode
    return make_policy("hw-encrypt", "HwEncrypt", **spec)


def nodes() -> list[Node]:
    """n0..n5: hw on n0, n1, n2; zone a on n0, n3; n4 is full (fails NodeResourcesFit)."""
    out = []
    for i in range(6):
        b = make_node(f"n{i}").capacity(cpu="4", memory="8Gi", pods="10")
        b.label("zone", "a" if i in (0, 3) else "b")
        if i in (0, 1, 2):
            b.label(HW, "true")
        if i == 4:
            b.capacity(cpu="100m", memory="8Gi", pods="10")
        out.append(b.obj())
    return out


def encrypted_pod(name: str = "web") -> Pod:
    return make_pod(name).annotation(ENCRYPT, "true").req(cpu="500m").scheduler(
        "policyd").obj()


def run(policies: list[Any], pod: Pod, *, seed: int = 3, **kw: Any) -> ScheduleResult:
    fw = default_framework(policies, seed=seed)
    return schedule_one(fw, pod, ClusterState(nodes(), []), **kw)


def test_an_audited_policy_is_in_no_filter_or_score_list() -> None:
    audited = compile_policy(policy_doc("Audit"), "x.yaml:1")
    assert isinstance(audited, AuditedPolicy) and isinstance(audited, AuditPlugin)
    assert not isinstance(audited, FilterPlugin) and not isinstance(audited, ScorePlugin)
    fw = default_framework([audited])
    every = [*fw.pre_filter_plugins, *fw.filter_plugins, *fw.pre_score_plugins,
             *(wp.plugin for wp in fw.score_plugins)]
    assert audited not in every
    assert "HwEncrypt" not in {b.name for b in fw.filters} | {b.name for b in fw.scores}
    assert [(a.name, a.policy) for a in fw.audits] == [("HwEncrypt", "hw-encrypt")]
    # It never rejects, so it registers no queueing hint either.
    assert all(plugin != "HwEncrypt" for plugin, _ in fw.queueing_hints())


@pytest.mark.parametrize("scores", [True, False])
def test_audited_points_are_the_enforce_forms(scores: bool) -> None:
    """A profile may name the policy wherever it names its Enforce form."""
    from policyd.framework.interfaces import extension_points

    enforced = compile_policy(policy_doc(None, scores=scores))
    audited = compile_policy(policy_doc("Audit", scores=scores))
    assert extension_points(audited) == extension_points(enforced)
    score_only = make_policy("s", "S", mode="Audit", scores=[
        {"id": "x", "weight": 1, "normalize": "none",
         "labelValue": {"label": "zone", "values": {"b": 100}, "default": 0}}])
    assert extension_points(compile_policy(score_only)) == {"preScore", "score"}


def test_a_profile_decides_where_it_is_audited() -> None:
    audited = compile_policy(policy_doc("Audit"))
    named = build_framework(
        {"plugins": {"multiPoint": {"disabled": [{"name": "HwEncrypt"}]},
                     "filter": {"enabled": [{"name": "HwEncrypt"}]},
                     "score": {"enabled": [{"name": "HwEncrypt", "weight": 5}]}}},
        {"HwEncrypt": audited})
    assert [a.name for a in named.audits] == ["HwEncrypt"]
    assert "HwEncrypt" not in {s.name for s in named.scores}
    off = build_framework({"plugins": {"filter": {"disabled": [{"name": "HwEncrypt"}]}}},
                          {"HwEncrypt": audited})
    assert off.audits == ()


@pytest.mark.parametrize("reference", [False, True])
def test_the_pod_lands_where_it_would_without_the_policy(reference: bool) -> None:
    pod = encrypted_pod()
    absent = run([], pod, reference=reference)
    audited = run([compile_policy(policy_doc("Audit"))], encrypted_pod(), reference=reference)
    assert audited.node == absent.node and audited.node is not None
    assert sorted(audited.feasible) == sorted(absent.feasible) == ["n0", "n1", "n2", "n3",
                                                                  "n5"]
    enforced = run([compile_policy(policy_doc(None))], encrypted_pod(), reference=reference)
    assert enforced.node == "n0"  # the only node both rules pass: the policy counts there


@pytest.mark.parametrize("reference", [False, True])
def test_findings_count_each_rule_over_the_feasible_nodes(reference: bool) -> None:
    result = run([compile_policy(policy_doc("Audit"))], encrypted_pod(), reference=reference)
    chosen = result.node
    assert chosen is not None
    by_rule = {f.rule: f for f in result.findings}
    # Feasible: n0 n1 n2 n3 n5 (n4 is full). hw-node rejects n3, n5; zone-a n1, n2, n5.
    hw, zone = by_rule["hw-node"], by_rule["zone-a"]
    assert (hw.rejected, hw.considered, hw.reason) == (2, 5, REASON_HW)
    assert (zone.rejected, zone.considered, zone.reason) == (3, 5, REASON_ZONE)
    assert hw.policy == "hw-encrypt" and hw.plugin == "HwEncrypt"
    assert hw.chosen_violates == (chosen in ("n3", "n5"))
    assert zone.chosen_violates == (chosen in ("n1", "n2", "n5"))
    if reference:
        assert hw.rejected_nodes == ("n3", "n5")
        assert zone.rejected_nodes == ("n1", "n2", "n5")
    among = "among them" if hw.chosen_violates else "passes"
    assert hw.describe(chosen) == (
        f"policy hw-encrypt (Audit), rule hw-node: would not fit on 2 of 5 feasible "
        f"nodes (the chosen node {chosen} {among}): {REASON_HW}")
    assert hw.describe() == ("policy hw-encrypt (Audit), rule hw-node: would not fit on "
                             f"2 of 5 feasible nodes: {REASON_HW}")


def test_no_finding_when_the_policy_does_not_apply_or_nothing_fits() -> None:
    policies = [compile_policy(policy_doc("Audit"))]
    plain = run(policies, make_pod("plain").req(cpu="500m").obj())
    assert plain.node is not None and plain.audits == [] and plain.findings == []
    huge = run(policies, make_pod("huge").annotation(ENCRYPT, "true").req(cpu="64").obj())
    assert huge.node is None and huge.audits == []
    assert "Insufficient cpu" in huge.message and "hardware" not in huge.message


def test_a_rule_that_rejects_nothing_is_audited_but_no_finding() -> None:
    pod = make_pod("one").annotation(ENCRYPT, "true").req(cpu="500m").node_selector(
        {"kubernetes.io/hostname": "n0"}).obj()
    result = run([compile_policy(policy_doc("Audit"))], pod)
    assert result.node == "n0"
    assert [(a.rule, a.rejected, a.considered, a.chosen_violates) for a in result.audits] \
        == [("hw-node", 0, 1, False), ("zone-a", 0, 1, False)]
    assert result.findings == []


def test_an_audited_policy_that_raises_does_not_fail_the_cycle(
        caplog: pytest.LogCaptureFixture) -> None:
    audited = compile_policy(policy_doc("Audit"))

    def broken(*_: Any) -> Any:
        raise RuntimeError("boom")

    audited.audit_mask = broken  # type: ignore[attr-defined]
    result = run([audited], encrypted_pod())
    assert result.node is not None and result.error is None and result.audits == []
    assert "auditing plugin 'HwEncrypt'" in caplog.text


@pytest.mark.parametrize("seed", range(12))
def test_generated_clusters_same_placements_and_both_forms_agree(seed: int) -> None:
    """On generated clusters, with the policy in Audit mode every pod goes where it goes
    without it (same seed), and the fast and reference paths count the same."""
    rng = random.Random(seed)
    raw_nodes, existing = gen_cluster(rng, rng.randint(3, 30), rng.randint(0, 30))
    for n in raw_nodes:
        labels = n["metadata"].setdefault("labels", {})
        if rng.random() < 0.5:
            labels[HW] = "true"
        labels["zone"] = rng.choice("ab")
    pods = []
    for i in range(15):
        raw = gen_pod(rng, f"new-{i}").raw()
        if rng.random() < 0.7:
            raw["metadata"].setdefault("annotations", {})[ENCRYPT] = "true"
        pods.append(raw)

    def place(policies: list[Any], reference: bool
              ) -> list[tuple[str | None, list[AuditFinding]]]:
        cluster = ClusterState([node_from_dict(n) for n in raw_nodes],
                               [pod_from_dict(p) for p in existing])
        fw = default_framework(policies, seed=seed)
        out = []
        for raw in pods:
            pod = pod_from_dict(raw)
            r = schedule_one(fw, pod, cluster, reference=reference)
            out.append((r.node, [a for a in r.audits]))
            if r.node is not None:
                cluster.assume(pod, r.node)
        return out

    absent = place([], False)
    fast = place([compile_policy(policy_doc("Audit"))], False)
    ref = place([compile_policy(policy_doc("Audit"))], True)
    assert [n for n, _ in fast] == [n for n, _ in absent] == [n for n, _ in ref]
    for (_, f), (_, r) in zip(fast, ref, strict=True):
        # The fast path does not name the rejected nodes; everything else is equal.
        assert [(a.rule, a.rejected, a.considered, a.chosen_violates) for a in f] == \
            [(a.rule, a.rejected, a.considered, a.chosen_violates) for a in r]
        for a in r:
            assert len(a.rejected_nodes) == a.rejected


def test_explain_shows_audited_rules_apart_from_the_tables() -> None:
    from policyd.engine.report import explain_json, explain_text

    result = run([compile_policy(policy_doc("Audit"))], encrypted_pod(), explain=True)
    text = explain_text(result)
    head, _, audit = text.partition("\nAudited (not enforced): judged on the 5 feasible "
                                    "node(s); they rejected and scored nothing:\n")
    assert audit, text
    # Not a column of the score table, not a rejecting filter.
    assert "HwEncrypt" not in head and "hw-encrypt" not in head
    assert "  policy hw-encrypt (Audit), rule hw-node: would not fit on 2 of 5" in audit
    assert "    would reject: n3, n5\n" in audit
    assert "    would reject: n1, n2, n5" in audit
    doc = explain_json(result)
    assert [(a["rule"], a["rejected"], a["considered"], a["rejectedNodes"])
            for a in doc["audit"]] == [("hw-node", 2, 5, ["n3", "n5"]),
                                      ("zone-a", 3, 5, ["n1", "n2", "n5"])]
    assert doc["audit"][0]["chosenViolates"] == (result.node in ("n3", "n5"))
    assert all("HwEncrypt" not in n["filters"] and "HwEncrypt" not in n["scores"]
               for n in doc["nodes"])
    plain = explain_json(run([compile_policy(policy_doc("Audit"))],
                             make_pod("plain").req(cpu="500m").obj(), explain=True))
    assert plain["audit"] == []


def test_explain_lists_a_rule_that_passes_every_node() -> None:
    from policyd.engine.report import explain_text

    pod = make_pod("one").annotation(ENCRYPT, "true").req(cpu="500m").node_selector(
        {"kubernetes.io/hostname": "n0"}).obj()
    text = explain_text(run([compile_policy(policy_doc("Audit"))], pod, explain=True))
    assert "  policy hw-encrypt (Audit), rule zone-a: passes all 1 feasible node(s)" in text


def test_simulate_lists_findings_per_pod() -> None:
    from policyd.engine.report import simulate_json, simulate_text
    from policyd.engine.simulate import simulate

    fw = default_framework([compile_policy(policy_doc("Audit"))], seed=1)
    pods = [encrypted_pod("a"), make_pod("plain").req(cpu="500m").scheduler("policyd").obj(),
            encrypted_pod("b")]
    sim = simulate({"policyd": fw}, ClusterState(nodes(), []), pods)
    doc = simulate_json(sim)
    by_pod = {p["pod"]: p for p in doc["placements"]}
    assert "audit" not in by_pod["default/plain"]
    assert [(f["policy"], f["rule"]) for f in by_pod["default/a"]["audit"]] == [
        ("hw-encrypt", "hw-node"), ("hw-encrypt", "zone-a")]
    assert by_pod["default/a"]["audit"][0]["considered"] == 5
    assert "rejectedNodes" not in by_pod["default/a"]["audit"][0]
    assert "3 scheduled, 0 unschedulable, 2 violating a policy in Audit mode" in \
        simulate_text(sim)


def test_lint_warns_that_an_audited_policys_scores_do_not_count() -> None:
    from tests.unit.policy.conftest import check_docs

    audited = check_docs(policy_doc("Audit"))
    assert [(p.rule, p.path, p.level) for p in audited.problems] == [
        ("audit-scores", "spec.scores", "warning")]
    assert len(audited.compiled) == 1
    assert check_docs(policy_doc("Audit", scores=False)).problems == []
    assert check_docs(policy_doc("Enforce")).problems == []
