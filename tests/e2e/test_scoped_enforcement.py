"""Scoped enforcement end to end, `policyd run` on the real API server: a policy
Enforce in `prod-*` namespaces and Audit elsewhere, with an exception for one
workload.

- The same pod the policy's filter rejects everywhere: in a prod namespace it stays
  pending with the policy's message; in a dev namespace it binds, with the audit's
  PolicyViolation event.
- A pod the exception names binds in the prod namespace, and its PolicyException event
  names the exception, its reason and its expiry.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from policyd.devcluster.controlplane import ControlPlane
from tests.e2e.helpers import DaemonFactory, fresh_cluster, write_profile
from tests.polling import wait_for

POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: zone-a}
spec:
  pluginName: ZoneA
  mode: Audit
  scopedModes:
    - {mode: Enforce, namespaces: ["prod-*"]}
  exceptions:
    - name: legacy-batch
      reason: moving to zone a by March (TICKET-42)
      expires: "2999-03-31T00:00:00Z"
      rules: [zone]
      match:
        namespaces: ["prod-*"]
        workloads: [{kind: Pod, name: "legacy-*"}]
  filters:
    - id: zone
      message: node(s) are not in zone a
      nodeLabels:
        matchExpressions: [{key: zone, operator: In, values: [a]}]
"""


def test_the_namespace_decides_and_an_exception_lets_its_workload_in(
        control_plane: ControlPlane, daemons: DaemonFactory, tmp_path: Path) -> None:
    scheduler = f"scoped-{uuid.uuid4().hex[:6]}"
    policies = tmp_path / "scoped-policies"
    policies.mkdir()
    (policies / "zone.yaml").write_text(POLICY)
    profile = write_profile(tmp_path, scheduler, policies=str(policies))
    with fresh_cluster(control_plane, "prod") as prod, \
            fresh_cluster(control_plane, "dev") as dev:
        prod.node("nb", labels={"zone": "b"})  # no node in zone a
        daemons.start(profile)
        prod.pod("web", scheduler)
        dev.pod("web", scheduler)
        prod.pod("legacy-1", scheduler)

        assert dev.wait_bound("web") == "nb"  # Audit in dev: bound, and told
        wait_for(lambda: dev.events(pod="web", reason="PolicyViolation"), 15,
                 "the audit's PolicyViolation event in dev")
        assert "node(s) are not in zone a" in \
            dev.events(pod="web", reason="PolicyViolation")[0]["message"]

        assert prod.wait_bound("legacy-1") == "nb"  # exempt by the exception
        wait_for(lambda: prod.events(pod="legacy-1", reason="PolicyException"), 15,
                 "the PolicyException event")
        message = prod.events(pod="legacy-1", reason="PolicyException")[0]["message"]
        assert message == (
            "placed on nb with exemptions: rule zone of policy zone-a: exception "
            "legacy-batch (moving to zone a by March (TICKET-42); expires "
            "2999-03-31T00:00:00Z)")

        # Enforce in prod: the same pod stays pending, with the policy's message.
        wait_for(lambda: prod.events(pod="web", reason="FailedScheduling"), 15,
                 "FailedScheduling in prod")
        failed = prod.events(pod="web", reason="FailedScheduling")[0]["message"]
        assert failed.startswith("0/1 nodes are available: 1 node(s) are not in zone a.")
        assert prod.node_of("web") is None
        assert not dev.events(pod="web", reason="FailedScheduling")
