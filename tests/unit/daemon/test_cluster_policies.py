"""The daemon's cluster policies as plain objects: which version of each
SchedulingPolicy runs, and what its status should say."""

from __future__ import annotations

import threading
from typing import Any

from policyd.daemon.cluster_policies import (
    COMPILED,
    CONFLICT,
    INVALID,
    NOT_APPLIED,
    ClusterPolicies,
    Condition,
    PolicySync,
    refusal_news,
    status_update,
    writes_due,
)
from policyd.policy.metric_refs import MetricCheck
from policyd.policy.objects import object_document
from tests.clocks import ManualClock

Obj = dict[str, Any]


def policy(name: str, plugin: str, generation: int = 1, *, uid: str = "",
           created: str = "2026-12-01T10:00:00Z", jmespath: str | None = None) -> Obj:
    rule: Obj = {"id": "hw", "message": f"no hw for {name}",
                 "nodeLabels": {"matchLabels": {"hw": "true"}}}
    if jmespath is not None:
        rule = {"id": "hw", "message": "bad", "jmespath": jmespath}
    # As a list item comes: no kind or apiVersion (the model adds them).
    return {"metadata": {"name": name, "uid": uid or f"uid-{name}", "generation": generation,
                         "resourceVersion": str(generation),
                         "creationTimestamp": created},
            "spec": {"pluginName": plugin, "filters": [rule]}}


def file_doc(name: str, plugin: str, file: str = "policies/file.yaml") -> Any:
    doc = object_document({"apiVersion": "policyd.io/v1alpha1", "kind": "SchedulingPolicy",
                           **policy(name, plugin)})
    doc.file = file
    return doc


NO_METRICS = MetricCheck(frozenset(), "policyd.yaml")  # a profile without providers


def applied(model: ClusterPolicies, files: tuple[Any, ...] = ()) -> dict[str, Any]:
    """As the daemon's rebuild does: ask for the policies, then say they run."""
    policies = model(files, NO_METRICS)
    model.applied()
    return policies


def test_an_accepted_object_runs_and_its_status_says_compiled() -> None:
    model = ClusterPolicies()
    model.upsert(policy("hw", "Hw", 3))
    assert list(applied(model)) == ["Hw"]
    (cond,) = model.conditions().values()
    assert (cond.accepted, cond.reason, cond.generation) == (True, COMPILED, 3)
    assert "'Hw'" in cond.message


def test_an_invalid_new_version_keeps_the_last_good_one_running() -> None:
    model = ClusterPolicies()
    model.upsert(policy("hw", "Hw", 1))
    first = applied(model)["Hw"]
    assert model.upsert(policy("hw", "Hw", 2, jmespath="node.metadata.["))
    policies = applied(model)
    assert policies["Hw"] is first  # the compiled generation 1 stays
    cond = model.conditions()["hw"]
    assert (cond.accepted, cond.reason, cond.generation) == (False, INVALID, 2)
    assert cond.message.startswith("spec.filters[0].jmespath")
    assert cond.message.endswith("generation 1 still in effect")
    # Fixed: generation 3 runs, Accepted again.
    model.upsert(policy("hw", "Hw", 3))
    assert applied(model)["Hw"] is not first
    assert model.conditions()["hw"].accepted
    assert model.running["hw"].generation == 3


def test_an_invalid_first_version_runs_nothing() -> None:
    model = ClusterPolicies()
    model.upsert(policy("hw", "Hw", 1, jmespath="node.["))
    assert applied(model) == {}
    assert model.conditions()["hw"].message.endswith("no version of it is in effect")


def test_a_deleted_object_stops_running_and_has_no_status() -> None:
    model = ClusterPolicies()
    model.upsert(policy("hw", "Hw"))
    applied(model)
    assert model.remove(policy("hw", "Hw"))
    assert applied(model) == {}
    assert model.conditions() == {}
    # A delete of another incarnation (another uid) removes nothing.
    model.upsert(policy("hw", "Hw", uid="new"))
    assert not model.remove(policy("hw", "Hw", uid="old"))


def test_a_recreated_object_does_not_inherit_the_old_ones_version() -> None:
    model = ClusterPolicies()
    model.upsert(policy("hw", "Hw", uid="a"))
    applied(model)
    model.upsert(policy("hw", "Hw", 1, uid="b", jmespath="node.["))
    assert applied(model) == {}


def test_status_updates_of_the_same_version_are_not_new_versions() -> None:
    model = ClusterPolicies()
    assert model.upsert(policy("hw", "Hw", 2))
    same = policy("hw", "Hw", 2)
    same["status"] = {"observedGeneration": 2}
    same["metadata"]["resourceVersion"] = "99"
    assert not model.upsert(same)
    assert model.upsert(policy("hw", "Hw", 3))


def test_a_name_or_plugin_a_file_uses_is_a_conflict_on_the_object() -> None:
    model = ClusterPolicies()
    model.upsert(policy("mine", "Hw"))
    policies = applied(model, (file_doc("theirs", "Hw"),))
    assert policies == {}
    cond = model.conditions()["mine"]
    assert (cond.accepted, cond.reason) == (False, CONFLICT)
    assert "policies/file.yaml" in cond.message


def test_a_file_that_takes_a_running_objects_plugin_name_wins() -> None:
    model = ClusterPolicies()
    model.upsert(policy("mine", "Hw"))
    applied(model)
    # A file reload now uses the pluginName: the object's running version goes too.
    assert applied(model, (file_doc("theirs", "Hw"),)) == {}
    cond = model.conditions()["mine"]
    assert cond.reason == CONFLICT and cond.message.endswith("no version of it is in effect")


def test_the_older_object_keeps_a_plugin_name_its_retained_version_holds() -> None:
    model = ClusterPolicies()
    model.upsert(policy("old", "Hw", created="2026-01-01T00:00:00Z"))
    applied(model)
    # old's new version is invalid (generation 1 keeps running as Hw) ...
    model.upsert(policy("old", "Other", 2, created="2026-01-01T00:00:00Z",
                        jmespath="node.["))
    # ... and a newer object claims Hw: refused, never two plugins named Hw.
    model.upsert(policy("new", "Hw", created="2026-02-01T00:00:00Z"))
    policies = applied(model)
    assert list(policies) == ["Hw"] and model.running["old"].generation == 1
    cond = model.conditions()["new"]
    assert cond.reason == CONFLICT and "schedulingpolicy/old" in cond.message


def test_a_profile_that_cannot_run_the_plan_keeps_the_running_versions() -> None:
    model = ClusterPolicies()
    model.upsert(policy("hw", "Hw", 1))
    applied(model)
    model.upsert(policy("hw", "Hw", 2))
    model((), NO_METRICS)
    model.refused("profiles[0].plugins.filter.enabled[0].name: plugin \"Hw\" ...")
    assert model.running["hw"].generation == 1
    cond = model.conditions()["hw"]
    assert (cond.accepted, cond.reason, cond.generation) == (False, NOT_APPLIED, 2)
    assert "profiles[0]" in cond.message and "generation 1 still in effect" in cond.message


# -- status writes ------------------------------------------------------------------------

WANT_TRUE = Condition("u", 3, True, COMPILED, "in effect as plugin 'Hw'")
WANT_FALSE = Condition("u", 4, False, INVALID, "spec.filters[0].jmespath: bad")


def test_status_update_sets_the_condition_and_observed_generation() -> None:
    status = status_update({"metadata": {}}, WANT_TRUE, "T1")
    assert status == {"observedGeneration": 3, "conditions": [{
        "type": "Accepted", "status": "True", "reason": COMPILED,
        "message": WANT_TRUE.message, "lastTransitionTime": "T1", "observedGeneration": 3}]}


def test_nothing_is_written_when_the_status_already_says_it() -> None:
    obj = {"status": status_update({}, WANT_TRUE, "T1")}
    assert status_update(obj, WANT_TRUE, "T2") is None


def test_last_transition_time_moves_only_when_the_status_flips() -> None:
    obj: Obj = {"status": status_update({}, WANT_FALSE, "T1")}
    # Still False, another generation and message: rewritten, time kept.
    other = Condition("u", 5, False, CONFLICT, "pluginName taken")
    again = status_update(obj, other, "T2")
    assert again is not None and again["conditions"][0]["lastTransitionTime"] == "T1"
    assert again["observedGeneration"] == 5
    flipped = status_update({"status": again}, WANT_TRUE, "T3")
    assert flipped is not None and flipped["conditions"][0]["lastTransitionTime"] == "T3"


def test_other_conditions_are_kept() -> None:
    obj = {"status": {"conditions": [{"type": "Audited", "status": "True"}]}}
    status = status_update(obj, WANT_TRUE, "T1")
    assert status is not None
    assert [c["type"] for c in status["conditions"]] == ["Audited", "Accepted"]


def test_a_refusal_is_news_once_per_generation_and_reason() -> None:
    assert refusal_news({}, WANT_FALSE)
    shown = {"status": status_update({}, WANT_FALSE, "T1")}
    assert not refusal_news(shown, WANT_FALSE)
    assert refusal_news(shown, Condition("u", 5, False, INVALID, "x"))
    assert not refusal_news({}, WANT_TRUE)


def test_only_the_leader_writes_and_only_what_changed() -> None:
    model = ClusterPolicies()
    model.upsert(policy("hw", "Hw", 2))
    applied(model)
    assert writes_due(model, leader=False) == {}
    due = writes_due(model, leader=True)
    assert list(due) == ["hw"] and due["hw"].accepted
    # The watch shows the status written: nothing more is due.
    written = policy("hw", "Hw", 2)
    written["status"] = status_update(written, due["hw"], "T1")
    model.upsert(written)
    assert writes_due(model, leader=True) == {}


# -- the sync loop ---------------------------------------------------------------------------

def test_a_burst_of_changes_rebuilds_once_and_status_only_updates_never() -> None:
    model = ClusterPolicies()
    rebuilds: list[str] = []
    submitted: list[dict[str, Condition]] = []

    def recombine(change: str) -> bool:
        rebuilds.append(change)
        applied(model)
        return True

    sync = PolicySync(model, recombine=recombine, submit=submitted.append,
                      is_leader=lambda: True, clock=ManualClock())
    sync.on_add(policy("a", "A"))
    sync.on_add(policy("b", "B"))
    sync.step()
    assert len(rebuilds) == 1 and "schedulingpolicy/a added" in rebuilds[0]
    assert set(submitted[-1]) == {"a", "b"}
    status_only = policy("a", "A")
    status_only["status"] = {"observedGeneration": 1}
    sync.on_update(policy("a", "A"), status_only)
    sync.step()
    assert len(rebuilds) == 1
    sync.on_delete(policy("b", "B"))
    sync.step()
    assert len(rebuilds) == 2 and "schedulingpolicy/b deleted" in rebuilds[1]
    assert "B" not in model.running


def test_the_sync_loop_stops() -> None:
    model = ClusterPolicies()
    sync = PolicySync(model, recombine=lambda c: True, submit=lambda w: None,
                      is_leader=lambda: True, resync=0.01)
    stop = threading.Event()
    t = threading.Thread(target=sync.run, args=(stop,))
    t.start()
    stop.set()
    t.join(2)
    assert not t.is_alive()

