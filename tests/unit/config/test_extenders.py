"""`extenders` is refused with the reason, at the key's line and column: policyd does
not call scheduler extenders (docs/compatibility.md, "Scheduler extenders")."""

from __future__ import annotations

from pathlib import Path

from policyd.config.validate import EXTENDERS_MESSAGE, validate
from tests.unit.config.conftest import Check, where


def test_extenders_are_refused_at_the_key_with_the_reason(check: Check) -> None:
    problems = check("""\
        percentageOfNodesToScore: 50
        extenders:
          - urlPrefix: http://extender.example:8888
            filterVerb: filter
            prioritizeVerb: prioritize
            weight: 1
        """)
    assert where(problems) == [(5, 1, "extenders")]
    message = problems[0].message
    assert message == EXTENDERS_MESSAGE
    assert message.startswith("policyd does not call scheduler extenders")
    assert "HTTP round trip" in message and "filter and score rules" in message
    assert "managedResources" in message


def test_an_empty_extenders_list_is_refused_too(check: Check) -> None:
    assert where(check("extenders: []\n")) == [(4, 1, "extenders")]


def test_a_kube_scheduler_configuration_with_extenders_is_refused_there(tmp_path: Path
                                                                      ) -> None:
    """kube-scheduler's own file is read as written (test_kube_scheduler_config.py): its
    extenders are the one thing refused."""
    path = tmp_path / "kube-scheduler.yaml"
    path.write_text("apiVersion: kubescheduler.config.k8s.io/v1\n"
                    "kind: KubeSchedulerConfiguration\n"
                    "extenders:\n"
                    "  - urlPrefix: http://x\n")
    problems = validate(path).problems
    assert {(p.line, p.column, p.rule) for p in problems} == {(3, 1, "extenders")}
