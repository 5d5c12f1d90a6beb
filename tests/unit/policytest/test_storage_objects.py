"""PolicyTest files carry storage objects (spec.storage), so a policy can be tested on
pods with volumes: the volume plugins read them as they read a snapshot's."""

from __future__ import annotations

from pathlib import Path

from policyd.policytest.run_tests import run_tests

SUITE = """\
apiVersion: policyd.io/v1alpha1
kind: PolicyTest
metadata: {name: volumes}
spec:
  policies:
    - apiVersion: policyd.io/v1alpha1
      kind: SchedulingPolicy
      metadata: {name: any}
      spec:
        pluginName: AnyNode
        filters:
          - {id: any, message: "never", nodeLabels: {matchExpressions: [
              {key: kubernetes.io/hostname, operator: Exists}]}}
  nodes:
    - {name: n1}
    - {name: n2}
  storage:
    - kind: StorageClass
      apiVersion: storage.k8s.io/v1
      metadata: {name: local}
      provisioner: kubernetes.io/no-provisioner
      volumeBindingMode: WaitForFirstConsumer
    - kind: PersistentVolume
      apiVersion: v1
      metadata: {name: pv-on-n2}
      spec:
        capacity: {storage: 10Gi}
        accessModes: [ReadWriteOnce]
        storageClassName: local
        local: {path: /mnt/disk}
        nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [
          {key: kubernetes.io/hostname, operator: In, values: [n2]}]}]}}
      status: {phase: Available}
    - kind: PersistentVolumeClaim
      apiVersion: v1
      metadata: {name: data, namespace: default}
      spec:
        accessModes: [ReadWriteOnce]
        storageClassName: local
        resources: {requests: {storage: 1Gi}}
  pods:
    - apiVersion: v1
      kind: Pod
      metadata: {name: db, namespace: default}
      spec:
        containers: [{name: db, image: db}]
        volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
  tests:
    - name: the pod goes where its volume can be
      pod: db
      scheduledTo: n2
"""


def test_the_volume_plugins_read_the_suites_storage(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    f.write_text(SUITE)
    result = run_tests([f])
    assert not result.problems and not result.bad_paths
    assert [c.passed for c in result.cases] == [True]
    f.write_text(SUITE.replace("scheduledTo: n2", "scheduledTo: n1"))
    assert run_tests([f]).failed == 1


def test_bad_storage_entries_are_problems_with_positions(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    f.write_text(SUITE.replace("storageClassName: local\n        local:",
                               "storageClasName: local\n        local:")
                 .replace("    - kind: StorageClass", "    - kind: ConfigMap\n"
                          "      metadata: {name: x}\n    - kind: StorageClass"))
    result = run_tests([f])
    messages = sorted(p.message for p in result.problems)
    assert any("storageClasName" in m for m in messages), messages
    assert any("'ConfigMap' is not a storage kind" in m for m in messages), messages
    assert all(p.line > 0 for p in result.problems)
    assert not result.cases  # a broken suite runs nothing


def test_storage_metadata_the_api_server_would_refuse_is_refused_at_its_field(
        tmp_path: Path) -> None:
    # As a snapshot's storage objects: a claim in a namespace that is no DNS label, a
    # volume with a label key outside Kubernetes' syntax, each at its own line:column.
    f = tmp_path / "t.yaml"
    f.write_text(SUITE.replace("metadata: {name: data, namespace: default}",
                               "metadata: {name: data, namespace: Shop_EU}")
                 .replace("metadata: {name: pv-on-n2}",
                          "metadata: {name: pv-on-n2, labels: {\"bad key\": x}}"))
    result = run_tests([f])
    found = [(p.line, p.column, p.rule) for p in result.problems if p.level == "error"]
    lines = SUITE.splitlines()
    pv = next(i for i, line in enumerate(lines, 1) if "{name: pv-on-n2}" in line)
    pvc = next(i for i, line in enumerate(lines, 1) if "namespace: default}" in line)
    assert found == [(pv, 43, "invalid-object"), (pvc, 41, "invalid-object")]
    messages = [p.message for p in result.problems]
    assert "PersistentVolume pv-on-n2: metadata.labels.bad key: key:" in messages[0]
    assert "PersistentVolumeClaim Shop_EU/data: metadata.namespace: 'Shop_EU'" \
        in messages[1]
    assert not result.cases
