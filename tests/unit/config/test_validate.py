"""validate_config_file: every rule, at its line and column, all problems in one pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from policyd.config.loader import build_frameworks, validate_config_file
from policyd.config.model import PolicydConfig
from policyd.config.validate import is_unreadable, validate
from tests.unit.config.conftest import HEAD, ROOT, Check, where

# (id, profile body after HEAD (which ends at line 3), expected (line, column, rule),
#  a fragment the first message must contain)
CASES = [
    ("valid-empty", "", [], None),
    ("unknown-plugin-hint", """\
        profiles:
          - schedulerName: policyd
            plugins:
              filter:
                enabled:
                  - name: hwEncrypt
        """, [(9, 19, "plugin-unknown")],
     'plugin "hwEncrypt" is not registered; did you mean "HwEncrypt"?'),
    ("unknown-plugin-no-hint", """\
        profiles:
          - plugins:
              score:
                disabled:
                  - name: Zzzzqqq
        """, [(8, 19, "plugin-unknown")], 'plugin "Zzzzqqq" is not registered'),
    ("unknown-builtin-hint", """\
        profiles:
          - plugins:
              multiPoint:
                enabled: [{name: NodeAffinty}]
        """, [(7, 26, "plugin-unknown")], 'did you mean "NodeAffinity"?'),
    ("upstream-only-plugin-enabled", """\
        profiles:
          - plugins:
              multiPoint:
                enabled: [{name: DefaultBinder}]
                disabled: [{name: PodGroupPodsCount}]
        """, [(7, 26, "plugin-not-implemented")],
     'policyd has no plugin "DefaultBinder" (a kube-scheduler plugin policyd does not '
     "implement)"),
    ("upstream-only-plugin-at-one-point", """\
        profiles:
          - plugins:
              preFilter:
                enabled: [{name: PodGroupPodsCount}]
        """, [(7, 26, "plugin-not-implemented")], 'policyd has no plugin "PodGroupPodsCount"'),
    ("upstream-only-plugin-config", """\
        profiles:
          - pluginConfig:
              - name: TopologyPlacementGenerator
                args: {}
        """, [(6, 15, "plugin-not-implemented")],
     'policyd has no plugin "TopologyPlacementGenerator" (a kube-scheduler plugin policyd '
     "does not implement)"),
    # Implemented since issue 27: enabled at its own points like any built-in.
    ("node-declared-features-at-its-points", """\
        profiles:
          - plugins:
              preFilter:
                enabled: [{name: NodeDeclaredFeatures}]
              filter:
                enabled: [{name: NodeDeclaredFeatures}]
        """, [], None),
    ("upstream-only-plugin-config-v136", """\
        profiles:
          - pluginConfig:
              - name: TopologyPlacementGenerator
        """, [(6, 15, "plugin-not-implemented")],
     'policyd has no plugin "TopologyPlacementGenerator"'),
    ("upstream-only-plugins-may-be-disabled", """\
        profiles:
          - plugins:
              multiPoint:
                disabled: [{name: SchedulingGates}, {name: TopologyPlacementGenerator},
                           {name: PodGroupPodsCount}, {name: NodeDeclaredFeatures}]
        """, [], None),
    ("extension-point", """\
        profiles:
          - plugins:
              filter:
                enabled:
                  - name: LowLatency
        """, [(8, 19, "extension-point")],
     'plugin "LowLatency" does not implement the filter extension point'),
    ("extension-point-other", """\
        profiles:
          - plugins:
              bind:
                enabled: [{name: HwEncrypt}]
        """, [(7, 26, "extension-point")], "no bind plugins"),
    ("extension-point-permit", """\
        profiles:
          - plugins:
              permit:
                enabled: [{name: HwEncrypt}]
        """, [(7, 26, "extension-point")],
     'plugin "HwEncrypt" does not implement the permit extension point'),
    ("plugin-config-not-enabled", """\
        profiles:
          - plugins:
              multiPoint:
                disabled: [{name: NodeResourcesFit}]
            pluginConfig:
              - name: NodeResourcesFit
                args: {}
        """, [(9, 15, "plugin-config-unused")],
     'pluginConfig for plugin "NodeResourcesFit", which is not enabled in this profile'),
    ("plugin-config-duplicate", """\
        profiles:
          - pluginConfig:
              - name: NodeAffinity
              - name: NodeAffinity
        """, [(7, 9, "plugin-config-duplicate")], 'Duplicate value: "NodeAffinity"'),
    ("plugin-config-unknown", """\
        profiles:
          - pluginConfig:
              - name: NodeResourceFit
        """, [(6, 15, "plugin-unknown")], 'did you mean "NodeResourcesFit"?'),
    ("plugin-args", """\
        profiles:
          - pluginConfig:
              - name: NodeResourcesFit
                args:
                  scoringStrategy:
                    type: Most
              - name: PodTopologySpread
                args:
                  defaultingType: Sometimes
        """, [(9, 19, "plugin-args"), (12, 27, "plugin-args")], 'Unsupported value: "Most"'),
    ("policy-takes-no-args", """\
        profiles:
          - pluginConfig:
              - name: HwEncrypt
                args: {x: 1}
        """, [(7, 15, "plugin-args")], "takes no args"),
    ("plugin-duplicate", """\
        profiles:
          - plugins:
              score:
                enabled:
                  - name: ImageLocality
                  - name: ImageLocality
        """, [(9, 19, "plugin-duplicate")], 'Duplicate value: "ImageLocality"'),
    ("duplicate-scheduler-name", """\
        profiles:
          - schedulerName: a
          - schedulerName: b
          - schedulerName: a
        """, [(7, 20, "duplicate-scheduler-name")], 'Duplicate value: "a"'),
    ("duplicate-default-scheduler-name", """\
        profiles:
          - {}
          - percentageOfNodesToScore: 5
        """, [(6, 5, "duplicate-scheduler-name")], 'Duplicate value: "policyd"'),
    ("percentage-range", """\
        percentageOfNodesToScore: 101
        profiles:
          - percentageOfNodesToScore: -1
        """, [(4, 27, "out-of-range"), (6, 31, "out-of-range")],
     "Invalid value: 101: not in valid range [0-100]"),
    ("backoff-initial", "podInitialBackoffSeconds: 0\n", [(4, 27, "out-of-range")],
     "Invalid value: 0: must be greater than 0"),
    ("backoff-order", "podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 2\n",
     [(5, 23, "backoff")],
     "Invalid value: 2: must be greater than or equal to podInitialBackoffSeconds"),
    ("backoff-order-default-max", "podInitialBackoffSeconds: 20\n", [(4, 27, "backoff")],
     "must be less than or equal to podMaxBackoffSeconds (default 10)"),
    ("parallelism", "parallelism: 0\n", [(4, 14, "out-of-range")],
     "should be an integer value greater than zero"),
    ("queue-sort-differs", """\
        profiles:
          - schedulerName: a
          - schedulerName: b
            plugins:
              queueSort:
                disabled: [{name: "*"}]
        """, [(8, 7, "queue-sort")], "must be the same for all profiles"),
    ("queue-sort-differs-multipoint", """\
        profiles:
          - schedulerName: a
            plugins:
              multiPoint:
                disabled: [{name: PrioritySort}]
          - schedulerName: b
        """, [(9, 5, "queue-sort")], "must be the same for all profiles"),
    ("unknown-field-hint", """\
        profiles:
          - schedulerName: a
            plugin: {}
        """, [(6, 5, "schema")], "unknown field 'plugin'; did you mean 'plugins'?"),
    ("unknown-field-in-plugin-set", """\
        profiles:
          - plugins:
              filter:
                enable: [{name: HwEncrypt}]
        """, [(7, 9, "schema")], "did you mean 'enabled'?"),
    ("unknown-extension-point", """\
        profiles:
          - plugins:
              filters: {}
        """, [(6, 7, "schema")], "did you mean 'filter'?"),
    ("wrong-kind", "", [], None),  # replaced below: HEAD's kind is right
    ("missing-plugin-name", """\
        profiles:
          - plugins:
              score:
                enabled:
                  - weight: 2
        """, [(8, 13, "schema")], "missing required field 'name'"),
    ("negative-weight", """\
        profiles:
          - plugins:
              score:
                enabled:
                  - {name: LowLatency, weight: -1}
        """, [(8, 40, "out-of-range")], "Invalid value: -1: must be non-negative"),
    ("type-error", "profiles: {}\n", [(4, 11, "schema")], "must be a list"),
    ("empty-profiles", "profiles: []\n", [(4, 11, "schema")], "at least one profile"),
    ("empty-scheduler-name", "profiles: [{schedulerName: ''}]\n", [(4, 28, "schema")],
     "Required value"),
    ("leader-election-durations", """\
        leaderElection:
          leaseDuration: 5s
          renewDeadline: 10s
          retryPeriod: fast
        """, [(5, 18, "leader-election"), (7, 16, "schema")],
     "leaseDuration (5s) must be greater than renewDeadline (10s)"),
    ("leader-election-retry", """\
        leaderElection:
          renewDeadline: 2s
          retryPeriod: 2s
        """, [(5, 18, "leader-election")], "must be greater than 1.2 x retryPeriod"),
    ("leader-election-zero", """\
        leaderElection:
          retryPeriod: 0s
          resourceLock: endpoints
        """, [(5, 16, "leader-election"), (6, 17, "schema")],
     'Invalid value: "0s": must be greater than zero'),
    ("leader-election-off-skips-durations", """\
        leaderElection:
          leaderElect: false
          leaseDuration: 1s
        """, [], None),
    ("client-connection", """\
        clientConnection:
          qps: 5
          burst: -1
          timeout: 10
        """, [(6, 10, "out-of-range"), (7, 12, "schema")], "must be non-negative"),
    ("client-connection-timeout-zero", "clientConnection: {timeout: 0s}\n",
     [(4, 29, "client-connection")], "must be greater than zero"),
    ("kubeconfig-missing-is-a-warning", "clientConnection: {kubeconfig: nope.conf}\n",
     [(4, 32, "client-connection")], "does not exist here"),
]
CASES += [
    ("metrics-providers-valid", """\
        metricsProviders:
          - name: prom
            kind: prometheus
            url: http://prometheus:9090
            refreshInterval: 15s
            timeout: 2s
            metrics:
              - {name: latency_ms, query: 'avg by (node) (lat)'}
              - {name: load, query: 'node_load1', allowNegative: false}
          - name: rtt
            kind: probe
            metric: rtt_ms
            port: 10250
            address: {annotation: myorg.io/probe-ip}
          - name: ann
            kind: nodeAnnotation
            metric: temperature
            annotation: myorg.io/temp
            allowNegative: true
        """, [], None),
    ("metrics-provider-field-of-another-kind", """\
        metricsProviders:
          - name: prom
            kind: prometheus
            url: http://prometheus:9090
            port: 80
            metrics: [{name: l, query: q}]
        """, [(8, 5, "metrics-provider")], "field 'port' is for kind probe, not prometheus"),
    ("metrics-provider-kind-required-fields", """\
        metricsProviders:
          - name: p
            kind: probe
            metric: rtt
        """, [(5, 5, "schema")], "missing required field 'port'"),
    ("metrics-provider-unknown-kind", """\
        metricsProviders:
          - name: p
            kind: snmp
        """, [(6, 11, "schema")], "'snmp' is not one of"),
    ("metrics-provider-duplicates", """\
        metricsProviders:
          - {name: a, kind: nodeAnnotation, metric: load, annotation: x}
          - {name: a, kind: nodeAnnotation, metric: load, annotation: z}
        """, [(6, 12, "duplicate-provider-name"), (6, 45, "duplicate-metric")],
     'Duplicate value: "a"'),
    ("metrics-provider-durations", """\
        metricsProviders:
          - name: p
            kind: nodeAnnotation
            metric: load
            annotation: x
            refreshInterval: 0s
            maxAge: 1m
        """, [(9, 22, "metrics-provider")], "must be greater than zero"),
    ("metrics-provider-max-age-shorter-than-refresh", """\
        metricsProviders:
          - name: p
            kind: prometheus
            url: http://p:9090
            metrics: [{name: l, query: q}]
            refreshInterval: 1m
            maxAge: 30s
            timeout: 2m
            bearerTokenFile: nothere
        """, [(10, 13, "metrics-provider"), (11, 14, "metrics-provider"),
              (12, 22, "metrics-provider")], "maxAge (30s) is shorter"),
    ("metrics-provider-bad-metric-name-and-url", """\
        metricsProviders:
          - name: p
            kind: prometheus
            url: prometheus:9090
            metrics: [{name: latency-ms, query: q}]
        """, [(7, 10, "schema"), (8, 22, "schema")], None),
]
CASES = [c for c in CASES if c[0] != "wrong-kind"]


@pytest.mark.parametrize(("body", "expected", "fragment"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule(check: Check, body: str, expected: list[tuple[int, int, str]],
              fragment: str | None) -> None:
    problems = check(body)
    assert where(problems) == expected, [str(p) for p in problems]
    if fragment is not None:
        assert fragment in problems[0].message


def test_policy_path_missing_and_empty(tmp_path: Path, policy_dir: Path) -> None:
    (tmp_path / "empty").mkdir()
    path = tmp_path / "profile.yaml"
    path.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
                    "policies:\n  - pol\n  - nothere\n  - empty\n")
    _, frameworks, problems = validate_config_file(path)
    assert where(problems) == [(5, 5, "policy-path"), (6, 5, "policy-path")]
    assert "does not exist" in problems[0].message
    assert "holds no *.yaml" in problems[1].message
    assert frameworks == {}


def test_policy_lint_problems_are_included_at_their_own_position(
        tmp_path: Path, policy_dir: Path) -> None:
    (policy_dir / "bad.yaml").write_text(
        "apiVersion: policyd.io/v1alpha1\nkind: SchedulingPolicy\nmetadata:\n  name: bad\n"
        "spec:\n  pluginName: BadOne\n  filters:\n    - id: r\n      message: m\n"
        "      extra: 1\n      nodeLabels:\n        matchLabels: {env: prod}\n")
    path = tmp_path / "profile.yaml"
    path.write_text(HEAD + "profiles:\n  - plugins:\n      filter:\n"
                    "        enabled: [{name: BadOne}]\n")
    _, frameworks, problems = validate_config_file(path)
    got = [(Path(p.file).name, p.line, p.column, p.rule) for p in problems]
    assert got == [("profile.yaml", 7, 26, "policy-invalid"),
                   ("bad.yaml", 10, 7, "schema")]
    assert "bad.yaml:6:15, which has errors" in problems[0].message
    assert frameworks == {}


def test_every_problem_in_one_pass(check: Check) -> None:
    problems = check("""\
        percentageOfNodesToScore: 101
        podInitialBackoffSeconds: 5
        podMaxBackoffSeconds: 2
        profiles:
          - schedulerName: x
            plugins:
              filter:
                enabled: [{name: hwEncrypt}, {name: LowLatency}]
            pluginConfig:
              - name: NodeAffinity
              - name: NodeAffinity
          - schedulerName: x
        """)
    assert where(problems) == [
        (4, 27, "out-of-range"), (6, 23, "backoff"), (11, 26, "plugin-unknown"),
        (11, 45, "extension-point"), (14, 9, "plugin-config-duplicate"),
        (15, 20, "duplicate-scheduler-name")]


def test_schema_error_is_not_reported_again(check: Check) -> None:
    # A wrongly typed pluginConfig entry is the schema's finding only.
    problems = check("profiles:\n  - pluginConfig: [3, {args: {}}]\n")
    assert where(problems) == [(5, 20, "schema"), (5, 23, "schema")]


def test_valid_profile_returns_frameworks_and_settings(tmp_path: Path,
                                                       policy_dir: Path) -> None:
    path = tmp_path / "profile.yaml"
    path.write_text(HEAD + """\
podInitialBackoffSeconds: 2
podMaxBackoffSeconds: 30
parallelism: 4
leaderElection: {leaseDuration: 1m, renewDeadline: 40s, retryPeriod: 500ms,
                 resourceName: ps, resourceNamespace: sched}
clientConnection: {qps: 20.5, burst: 7, timeout: 1m30s}
percentageOfNodesToScore: 40
profiles:
  - schedulerName: one
    percentageOfNodesToScore: 10
    plugins:
      score:
        enabled: [{name: LowLatency, weight: 7}]
        disabled: [{name: ImageLocality}]
    pluginConfig:
      - name: NodeResourcesFit
        args: {scoringStrategy: {type: MostAllocated}}
  - schedulerName: two
    plugins:
      multiPoint:
        disabled: [{name: HwEncrypt}]
""")
    config, frameworks, problems = validate_config_file(path)
    assert problems == []
    assert isinstance(config, PolicydConfig)
    assert config.pod_initial_backoff_seconds == 2
    assert config.pod_max_backoff_seconds == 30
    assert config.parallelism == 4
    assert config.percentage_of_nodes_to_score == 40
    le = config.leader_election
    assert (le.leader_elect, le.lease_duration, le.renew_deadline, le.retry_period,
            le.resource_lock, le.resource_name, le.resource_namespace) == (
        True, 60.0, 40.0, 0.5, "leases", "ps", "sched")
    cc = config.client_connection
    assert (cc.qps, cc.burst, cc.timeout, cc.kubeconfig) == (20.5, 7, 90.0, None)
    assert config.policies == (policy_dir,)
    assert sorted(p.name for p in config.policy_files) == ["hw-encrypt.yaml",
                                                           "low-latency.yaml"]
    assert [p.scheduler_name for p in config.profiles] == ["one", "two"]
    assert config.profiles[0].percentage_of_nodes_to_score == 10
    assert config.profiles[1].percentage_of_nodes_to_score is None
    assert config.profiles[0].plugin_config == {
        "NodeResourcesFit": {"scoringStrategy": {"type": "MostAllocated"}}}
    assert set(frameworks) == {"one", "two"}
    one, two = frameworks["one"], frameworks["two"]
    scores = {s.plugin.name: s.weight for s in one.score_plugins}
    assert scores["LowLatency"] == 7
    assert "ImageLocality" not in scores
    assert "HwEncrypt" in [p.name for p in one.filter_plugins]
    assert "HwEncrypt" not in [p.name for p in two.filter_plugins]
    assert {s.plugin.name: s.weight for s in two.score_plugins}["LowLatency"] == 2


def test_defaults(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n")
    config, frameworks, problems = validate_config_file(path)
    assert problems == []
    assert config == PolicydConfig(path=path)
    assert config.pod_initial_backoff_seconds == 1
    assert config.pod_max_backoff_seconds == 10
    assert config.client_connection.qps == 50 and config.client_connection.burst == 100
    assert list(frameworks) == ["policyd"]


def test_invalid_values_fall_back_to_defaults(check: Check, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(HEAD + "podInitialBackoffSeconds: -3\nparallelism: x\n"
                    "clientConnection: {burst: -1, timeout: soon}\n")
    config, frameworks, problems = validate_config_file(path)
    assert len(problems) == 4 and frameworks == {}
    assert config.pod_initial_backoff_seconds == 1
    assert config.parallelism == 16
    assert config.client_connection.burst == 100
    assert config.client_connection.timeout == 30.0


@pytest.mark.parametrize(("text", "expected"), [
    ("kind: PolicydConfiguration\n", [(1, 1, "schema")]),
    ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
     "policies: [p]\n", [(3, 1, "schema")]),
    ("- a\n- b\n", [(1, 1, "config-document")]),
    ("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n---\na: 1\n",
     [(4, 1, "config-document")]),
    ("a: [1\n", [(2, 1, "yaml-syntax")]),
    ("a: 1\na: 2\n", [(1, 1, "schema"), (1, 1, "schema"), (1, 1, "schema"),
                      (2, 1, "yaml-duplicate-key")]),
    ("", [(1, 1, "file-empty")]),
    (b"\xff\xfe", [(1, 1, "file-encoding")]),
])
def test_file_level_problems(tmp_path: Path, text: str | bytes,
                             expected: list[tuple[int, int, str]]) -> None:
    path = tmp_path / "p.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    _, frameworks, problems = validate_config_file(path)
    assert where(problems) == expected, [str(p) for p in problems]
    assert frameworks == {}


def test_kube_scheduler_kind_under_policyds_api_version_is_explained(tmp_path: Path
                                                                     ) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("apiVersion: policyd.io/v1alpha1\nkind: KubeSchedulerConfiguration\n")
    problems = validate_config_file(path)[2]
    assert where(problems) == [(1, 13, "schema")]
    assert "is read as apiVersion 'kubescheduler.config.k8s.io/v1'" in problems[0].message


def test_unreadable_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    config, frameworks, problems = validate_config_file(missing)
    assert where(problems) == [(0, 0, "file-unreadable")]
    assert is_unreadable(problems, missing)
    assert config.path == missing and frameworks == {}


def test_profile_inside_its_own_policy_directory_is_not_a_policy(tmp_path: Path,
                                                                 policy_dir: Path) -> None:
    path = policy_dir / "profile.yaml"
    path.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
                    "policies: [.]\n")
    config, frameworks, problems = validate_config_file(path)
    assert problems == []
    assert path not in config.policy_files
    assert "HwEncrypt" in [p.name for p in frameworks["policyd"].filter_plugins]


def test_extra_policies(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
                    "profiles:\n  - plugins:\n      score:\n"
                    "        enabled: [{name: LowLatency, weight: 5}]\n")
    assert where(validate_config_file(path)[2]) == [(6, 26, "plugin-unknown")]
    _, frameworks, problems = validate_config_file(
        path, extra_policies=[ROOT / "policies" / "low-latency.yaml"])
    assert problems == []
    assert {s.plugin.name: s.weight
            for s in frameworks["policyd"].score_plugins}["LowLatency"] == 5


def test_example_profile_is_valid() -> None:
    config, frameworks, problems = validate_config_file(
        ROOT / "examples" / "profiles" / "policyd.yaml")
    assert problems == []
    assert set(frameworks) == {"policyd", "policyd-secure"}
    assert config.policies == (ROOT / "policies",)



def test_validation_builds_nothing_and_building_needs_a_valid_result(tmp_path: Path
                                                                     ) -> None:
    checked = validate(ROOT / "examples" / "profiles" / "policyd.yaml")
    assert checked.valid and checked.problems == []
    assert [where for where, _ in checked.profiles] == [("profiles", 0), ("profiles", 1)]
    assert set(build_frameworks(checked, seed=1)) == {"policyd", "policyd-secure"}
    path = tmp_path / "p.yaml"
    path.write_text(HEAD.replace("policies: [pol]\n", "") + "parallelism: 0\n")
    invalid = validate(path)
    assert not invalid.valid
    with pytest.raises(ValueError, match="valid"):
        build_frameworks(invalid)


METRIC_POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: lat}
spec:
  pluginName: Lat
  scores:
    - id: lat
      weight: 1
      normalize: minmax
      metric: {name: latency_m, prefer: lowest}
"""


@pytest.mark.parametrize(("providers", "fragment"), [
    ("metricsProviders:\n  - {name: p, kind: nodeAnnotation, metric: latency_ms, "
     "annotation: x}\n", "did you mean 'latency_ms'?"),
    ("", "the profile has no metricsProviders"),
])
def test_metric_rule_naming_an_undefined_metric(tmp_path: Path, policy_dir: Path,
                                                providers: str, fragment: str) -> None:
    (policy_dir / "lat.yaml").write_text(METRIC_POLICY)
    path = tmp_path / "profile.yaml"
    path.write_text(HEAD + providers)
    _, frameworks, problems = validate_config_file(path)
    assert [(p.file, p.line, p.column, p.rule) for p in problems if p.is_error] == [
        (str(policy_dir / "lat.yaml"), 10, 22, "unknown-metric")], [str(p) for p in problems]
    assert fragment in problems[-1].message
    assert frameworks == {}


def test_metric_rule_with_its_provider_is_valid_and_providers_are_parsed(
        tmp_path: Path, policy_dir: Path) -> None:
    (policy_dir / "lat.yaml").write_text(METRIC_POLICY.replace("latency_m,", "latency_ms,"))
    (tmp_path / "token").write_text("s3cret\n")
    path = tmp_path / "profile.yaml"
    path.write_text(HEAD + "metricsProviders:\n  - name: prom\n    kind: prometheus\n"
                    "    url: http://127.0.0.1:9090/\n    bearerTokenFile: token\n"
                    "    refreshInterval: 10s\n    nodeLabel: instance_node\n"
                    "    metrics: [{name: latency_ms, query: q}]\n"
                    "  - {name: rtt, kind: probe, metric: rtt_ms, port: 22, workers: 4}\n")
    config, frameworks, problems = validate_config_file(path)
    assert [p for p in problems if p.is_error] == []
    assert frameworks
    prom, rtt = config.metrics_providers
    assert (prom.name, prom.kind, prom.refresh_interval, prom.max_age, prom.timeout) == (
        "prom", "prometheus", 10.0, 30.0, 5.0)
    assert prom.bearer_token_file == tmp_path / "token"
    assert prom.node_label == "instance_node" and prom.metric_names == ("latency_ms",)
    assert (rtt.metric_names, rtt.port, rtt.workers, rtt.address_from) == (
        ("rtt_ms",), 22, 4, "internalIP")
