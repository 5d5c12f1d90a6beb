"""explain says what preemption would do: the node, the victims, why others lost."""

from __future__ import annotations

from policyd.config.plugins import default_framework
from policyd.engine.cycle import schedule_one
from policyd.engine.report import explain_json, explain_text
from policyd.model.cluster import ClusterState
from policyd.plugins.defaultpreemption.plugin import new as default_preemption
from tests.builders import make_node, make_pod


def test_explain_shows_the_preemption_it_would_make() -> None:
    fw = default_framework()
    fw.post_filter_plugins = [default_preemption(None)]
    nodes = [make_node(n).capacity(cpu="2", memory="4Gi", pods="10").obj()
             for n in ("n1", "n2")]
    pods = [make_pod("low").uid("low").node("n1").priority(10).req(cpu="2").obj(),
            make_pod("mid").uid("mid").node("n2").priority(500).req(cpu="2").obj()]
    urgent = make_pod("urgent").uid("urgent").priority(1000).req(cpu="2").obj()
    result = schedule_one(fw, urgent, ClusterState(nodes, pods), explain=True)
    assert result.post_filter is not None
    assert result.post_filter.nominated_node == "n1"
    [notes] = result.post_filter_notes.values()
    assert notes[0] == "would evict 1 pod(s) on n1 and nominate the pod there"
    text = explain_text(result)
    assert "DefaultPreemption:\n  would evict 1 pod(s) on n1" in text
    assert any("n2: lost on" in line for line in text.splitlines())
    assert explain_json(result)["postFilter"]["DefaultPreemption"] == notes
