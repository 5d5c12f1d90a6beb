"""Validate a PolicydConfiguration file completely, before anything else runs.

`validate(path)` reports every problem of the profile and of the policies it loads, and
builds nothing: `loader.validate_config_file` builds the frameworks when there is no
error (the one path from a profile file to frameworks, which every command and the
daemon call). Each problem is a `Problem` with file, line, column, JSON path and rule
id (the ids and what they find: `policyd.lint.rules`), so the same reporters serve
`lint` and `check-config`. Policy problems are reported at their own file:line:column.

A problem the schema reports is not reported again by a later check of the same value.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from policyd.config import plugins as pl
from policyd.config import profile_schema as config_schema
from policyd.config.model import (
    PolicydConfig,
    config_from_dict,
    feature_gates_from,
    parse_duration,
)
from policyd.features import DEFAULTS, FeatureGates, check_setting, dependency_problems
from policyd.model.duration import DurationTooLong
from policyd.model.file_kinds import PROFILE, wrong_file
from policyd.model.int64 import INT32_MAX
from policyd.model.spelling import show_value
from policyd.policy.files import find_yaml_files
from policyd.policy.from_paths import UNREADABLE_RULE, load_policy_set, path_problem
from policyd.policy.metric_refs import UNKNOWN_METRIC, MetricCheck
from policyd.policy.policy_schema import PATTERN_MESSAGES
from policyd.problems import ERROR, WARNING, Problem
from policyd.sourcefile import JsonPath, SourceDocument, format_path, load_file
from policyd.sourcefile.schema_problems import schema_problems

# The daemon's cluster policies (SchedulingPolicy objects, `clusterPolicies: true`):
# given the documents of the file policies just loaded, the policies compiled from the
# objects that run beside them, by pluginName. A callable rather than a mapping because
# which objects may run depends on those files (a name or pluginName a file uses is
# refused on the object: `policyd.policy.objects.check_objects`), and the profile's
# metrics, which the objects' `metric` rules must name as a file's must.
ClusterPolicies = Callable[[Sequence[SourceDocument], MetricCheck], Mapping[str, Any]]

# Upstream's wording for numbers out of range, by field name (field.Invalid messages of
# ValidateKubeSchedulerConfiguration and component-base's validators).
_RANGE_MESSAGES = {
    "percentageOfNodesToScore": "not in valid range [0-100]",
    "podInitialBackoffSeconds": "must be greater than 0",
    "parallelism": "should be an integer value greater than zero",
    "burst": "must be non-negative",
    "weight": "must be non-negative",
}
_RANGE_VALIDATORS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
# Upper bounds that are upstream's types, not rules of their own: said with the type.
_TYPE_BOUNDS = {
    INT32_MAX: "kube-scheduler reads it as an int32",
    config_schema.MAX_BACKOFF_SECONDS: "the most whole seconds a Go time.Duration holds",
    config_schema.FLOAT32_MAX: "kube-scheduler reads it as a float32",
    -config_schema.FLOAT32_MAX: "kube-scheduler reads it as a float32",
}
# Why a profile's `extenders` is refused (docs/compatibility.md, "Scheduler extenders").
EXTENDERS_MESSAGE = (
    "policyd does not call scheduler extenders: a SchedulingPolicy expresses filter "
    "and score rules that run in-process, where an extender adds an HTTP round trip "
    "to every scheduling cycle (and kube-scheduler itself steers new work to "
    "framework plugins). Write the extender's filter and prioritize logic as a "
    "policy's filter and score rules (docs/policy-language.md); managedResources, "
    "bind and preempt verbs have no policyd equivalent. Remove `extenders` to run "
    "this profile")
# client-go's leader elector refuses renewDeadline <= JitterFactor * retryPeriod.
_LEADER_JITTER = 1.2


@cache
def _validator() -> Any:
    # jsonschema (~0.2 s) only when a profile is validated, not for its model or schema.
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

    return Draft202012Validator(config_schema.SCHEMA)


def is_unreadable(problems: Sequence[Problem], path: Path | str | None = None) -> bool:
    """Whether a file could not be read (a usage error, exit 2): the profile at `path`,
    or with no `path` any file, the profile or a policy it loads."""
    return any(p.rule == UNREADABLE_RULE and (path is None or p.file == str(path))
               for p in problems)


@dataclass(slots=True)
class ValidatedConfig:
    """What validation found: the settings, every problem, and what building needs."""

    config: PolicydConfig
    problems: list[Problem]
    # Each profile with its JSON path (the default profile's is the document root).
    profiles: list[tuple[JsonPath, Mapping[str, Any]]] = field(default_factory=list)
    policies: dict[str, Any] = field(default_factory=dict)  # CompiledPolicy by pluginName
    # The file policies' documents (what cluster policies are checked against).
    policy_documents: list[SourceDocument] = field(default_factory=list)
    # Of `policies`, the pluginNames that came from cluster policies.
    cluster_plugins: tuple[str, ...] = ()

    @property
    def valid(self) -> bool:
        return not any(p.level == ERROR for p in self.problems)


def validate(path: Path, *, extra_policies: Sequence[Path] = (),
             cluster_policies: ClusterPolicies | None = None,
             gate_overrides: Sequence[tuple[str, bool]] = (),
             cluster_policies_flag: bool = False) -> ValidatedConfig:
    """Every problem of the profile at `path` and of the policies it names; builds
    nothing.

    `cluster_policies` (the daemon's, already checked and compiled) are asked for once
    the policy files are loaded and join them as plugins the profiles may name and
    that are enabled by default, exactly as a file policy is. `gate_overrides`
    (`policyd run --feature-gates`, each setting already accepted by
    `features.with_settings`) apply over the profile's `featureGates`.
    `cluster_policies_flag` (`--cluster-policies`) sets `clusterPolicies: true` over
    the file, the one way a KubeSchedulerConfiguration can have it.

    The steps run in this order, each skipping what an earlier one reported: the file
    (YAML, exactly one mapping document), the schema, the top-level settings, the
    metrics providers, the policies (loaded and compiled, since profiles enable them
    as plugins) and their metric rules, then the profiles and their plugins.
    """
    path = Path(path)
    overrides = (gate_overrides, cluster_policies_flag)
    source = load_file(path)
    problems: list[Problem] = list(source.problems)
    if not source.documents:
        return ValidatedConfig(config_from_dict({}, path, (), *overrides), problems)
    doc = source.documents[0]
    for extra in source.documents[1:]:
        problems.append(extra.problem((), "config-document",
                                      "expected exactly one PolicydConfiguration document "
                                      f"in the file, found {len(source.documents)}"))
    if not isinstance(doc.data, Mapping):
        problems.append(doc.problem((), "config-document",
                                    "a PolicydConfiguration must be a mapping with apiVersion "
                                    "and kind"))
        return ValidatedConfig(config_from_dict({}, path, (), *overrides), problems)
    if (other := wrong_file(doc.data, doc.file, PROFILE)) is not None:
        # A policy, a PolicyTest, a snapshot: one problem saying so, not every field
        # a profile does not have.
        problems.append(doc.problem(("kind",), "config-document", other))
        return ValidatedConfig(config_from_dict({}, path, (), *overrides), problems)
    data: Mapping[str, Any] = doc.data
    if data.get("kind") == config_schema.KUBE_SCHEDULER_KIND:
        data = _as_policyd_configuration(doc, problems)
    check = _Check(doc, path, data)
    check.schema()
    check.settings()
    check.feature_gates(gate_overrides)
    check.metrics_providers()
    check.policies(extra_policies)
    check.cluster_policies(cluster_policies)
    check.metric_references()
    check.profiles()
    problems = sorted([*problems, *check.problems], key=lambda p: p.sort_key())
    problems.extend(sorted(check.policy_problems, key=lambda p: p.sort_key()))
    return ValidatedConfig(config_from_dict(data, path, tuple(check.policy_files),
                                            *overrides),
                           problems, check.profile_list, check.compiled,
                           check.policy_documents, check.cluster_plugins)


def _as_policyd_configuration(doc: SourceDocument, problems: list[Problem]
                              ) -> dict[str, Any]:
    """A kube-scheduler configuration file, read unchanged: KubeSchedulerConfiguration
    v1's fields are PolicydConfiguration's, so it is checked as one (problems point
    into the file as written). A field of policyd's own in it is refused: kube-scheduler
    would refuse the file, and a file two schedulers read must stay valid for both."""
    data = dict(doc.data)
    version = data.get("apiVersion")
    if version != config_schema.KUBE_SCHEDULER_API_VERSION:
        problems.append(doc.problem(
            ("apiVersion",), "schema",
            f"Invalid value: {_show(version)}: a KubeSchedulerConfiguration is read as "
            f"apiVersion {config_schema.KUBE_SCHEDULER_API_VERSION!r} (kube-scheduler "
            "v1.36 reads no other)"))
    for name, flag in config_schema.POLICYD_ONLY_FIELDS.items():
        if name in data:
            del data[name]
            problems.append(doc.problem(
                (name,), "schema",
                f"{name} is not a field of KubeSchedulerConfiguration (kube-scheduler "
                f"would refuse this file): to set it, make the file a "
                f"{config_schema.KIND} (apiVersion {config_schema.API_VERSION!r}), whose "
                "fields are kube-scheduler's plus policyd's"
                + (f", or give `policyd run {flag}`" if flag else ""), key=True))
    data.update(apiVersion=config_schema.API_VERSION, kind=config_schema.KIND)
    return data


class _Check:
    """The checks of one profile document, sharing what the schema already reported."""

    def __init__(self, doc: SourceDocument, path: Path, data: Mapping[str, Any]) -> None:
        self.doc = doc
        self.data = data
        self.path = path
        self.problems: list[Problem] = []
        self.policy_problems: list[Problem] = []
        self.policy_files: list[Path] = []
        self.failed_plugins: dict[str, str] = {}  # pluginName -> file of a failed policy
        self.failed_policy_files = 0
        self.compiled: dict[str, Any] = {}  # CompiledPolicy by pluginName
        self.profile_list: list[tuple[JsonPath, Mapping[str, Any]]] = []
        self.policy_documents: list[SourceDocument] = []
        self.cluster_plugins: tuple[str, ...] = ()
        self.metric_names: dict[str, JsonPath] = {}  # metric -> where a provider defines it
        self.gates: FeatureGates = DEFAULTS  # what the plugins are checked with
        # Values the schema already found wrong: later checks skip them and everything
        # under them, so each mistake is reported once.
        self.reported: set[JsonPath] = set()

    # helpers ------------------------------------------------------------------------
    def add(self, where: JsonPath, rule: str, message: str, *, level: str = ERROR,
            key: bool = False) -> None:
        if self.is_reported(where):
            return
        self.problems.append(self.doc.problem(where, rule, message, level=level, key=key))

    def is_reported(self, where: JsonPath) -> bool:
        return any(where[:n] in self.reported for n in range(len(where) + 1))

    def get(self, where: JsonPath) -> Any:
        node: Any = self.data
        for part in where:
            in_list = isinstance(part, int) and isinstance(node, list) and 0 <= part < len(node)
            in_map = isinstance(part, str) and isinstance(node, Mapping) and part in node
            if not (in_list or in_map):
                return None
            node = node[part]
        return node

    # schema -------------------------------------------------------------------------
    def schema(self) -> None:
        errors = list(_validator().iter_errors(self.data))
        # `.inf` for an integer is both not an integer and out of range: the type alone.
        mistyped = {tuple(e.absolute_path) for e in errors if e.validator == "type"}
        errors = [e for e in errors if not (e.validator in _RANGE_VALIDATORS
                                            and tuple(e.absolute_path) in mistyped)]
        for error in errors:
            self._note_reported(error)
        self.problems.extend(schema_problems(self.doc, errors,
                                             pattern_messages=PATTERN_MESSAGES,
                                             special=self._upstream_wording))

    def _note_reported(self, error: Any) -> None:
        """Remember what the schema found wrong, so later checks skip it."""
        where: JsonPath = tuple(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
            known = error.schema.get("properties", {})
            self.reported.update((*where, k) for k in error.instance if k not in known)
        elif error.validator != "required":
            self.reported.add(where)

    def _upstream_wording(self, error: Any) -> Problem | None:
        """Ranges and empty values in upstream's words, durations with an example; None
        for the general wording."""
        where: JsonPath = tuple(error.absolute_path)
        validator = error.validator
        if validator in _RANGE_VALIDATORS:
            field = next((p for p in reversed(where) if isinstance(p, str)), "")
            bound = error.validator_value
            if bound in _TYPE_BOUNDS and validator in ("maximum", "minimum"):
                side = "less" if validator == "maximum" else "greater"
                msg = f"must be {side} than or equal to {bound:g}" if isinstance(
                    bound, float) else f"must be {side} than or equal to {bound}"
                msg += f" ({_TYPE_BOUNDS[bound]})"
            else:
                msg = _RANGE_MESSAGES.get(field) or _range_text(error.schema)
            return self.doc.problem(where, "out-of-range",
                                    f"Invalid value: {_show(error.instance)}: {msg}")
        if validator == "minLength" and error.instance == "":
            return self.doc.problem(where, "schema", "Required value: must not be empty")
        if validator == "minItems" and where == ("profiles",):
            return self.doc.problem(where, "schema", "Required value: at least one profile "
                                    "(or leave profiles out for the default one)")
        if validator == "type" and error.schema.get("pattern") == config_schema.DURATION_PATTERN:
            return self.doc.problem(where, "schema", f"Invalid value: {_show(error.instance)}"
                                    ": a duration is a string with a unit, e.g. 15s, 1m30s "
                                    "or 500ms")
        if validator == "pattern" and error.validator_value == config_schema.DURATION_PATTERN:
            return self.doc.problem(where, "schema", f"Invalid value: {_show(error.instance)}"
                                    ": not a duration; write e.g. 15s, 1m30s or 500ms")
        if validator == "not" and where == ("extenders",):
            return self.doc.problem(where, "extenders", EXTENDERS_MESSAGE, key=True)
        return None

    # top-level settings ------------------------------------------------------------
    def finite_numbers(self) -> None:
        """YAML spells NaN and infinity (.nan, .inf); no profile field means them and
        kube-scheduler's decoder cannot read them (JSON has no such numbers). A NaN
        passes every range in the schema, so it is refused here, anywhere."""
        stack: list[tuple[JsonPath, Any]] = [((), self.data)]
        while stack:
            where, value = stack.pop()
            if isinstance(value, float) and not math.isfinite(value):
                self.add(where, "out-of-range",
                         f"Invalid value: {show_value(value)}: not a finite number")
            elif isinstance(value, Mapping):
                stack.extend(((*where, k), v) for k, v in value.items())
            elif isinstance(value, list):
                stack.extend(((*where, i), v) for i, v in enumerate(value))

    def settings(self) -> None:
        self.finite_numbers()
        data = self.data
        # The profiling fields are on by default in kube-scheduler; only a field that
        # changes what a user may rely on (delayed caches) is worth a warning.
        for name, what in config_schema.KUBE_SCHEDULER_ONLY_FIELDS.items():
            if data.get(name) is True and name == "delayCacheUntilActive":
                self.add((name,), "no-effect", f"has no effect in policyd (true makes "
                         f"kube-scheduler {what})", level=WARNING)
        initial = data.get("podInitialBackoffSeconds",
                           config_schema.DEFAULT_POD_INITIAL_BACKOFF_SECONDS)
        maximum = data.get("podMaxBackoffSeconds",
                           config_schema.DEFAULT_POD_MAX_BACKOFF_SECONDS)
        if _is_int(initial) and _is_int(maximum) and maximum < initial \
                and not self.is_reported(("podInitialBackoffSeconds",)):
            if "podMaxBackoffSeconds" in data:
                self.add(("podMaxBackoffSeconds",), "backoff",
                         f"Invalid value: {maximum}: must be greater than or equal to "
                         f"podInitialBackoffSeconds ({initial})")
            else:
                self.add(("podInitialBackoffSeconds",), "backoff",
                         f"Invalid value: {initial}: must be less than or equal to "
                         f"podMaxBackoffSeconds (default {maximum})")
        self._leader_election()
        conn = data.get("clientConnection")
        if isinstance(conn, Mapping):
            self._positive_duration(("clientConnection", "timeout"), "client-connection")
            kubeconfig = conn.get("kubeconfig")
            if isinstance(kubeconfig, str) and kubeconfig \
                    and not (self.path.parent / kubeconfig).exists():
                self.add(("clientConnection", "kubeconfig"), "client-connection",
                         f"kubeconfig file {str(self.path.parent / kubeconfig)!r} does not "
                         "exist here (fine if it is mounted where policyd runs)",
                         level=WARNING)

    def _positive_duration(self, where: JsonPath, rule: str) -> float | None:
        raw = self.get(where)
        if raw is None or self.is_reported(where):
            return None
        try:
            seconds = parse_duration(raw)
        except DurationTooLong as exc:  # well-formed (the schema's pattern), too long
            self.add(where, rule, f"Invalid value: {_show(raw)}: {exc}")
            return None
        except ValueError:
            return None
        if seconds <= 0:
            self.add(where, rule, f"Invalid value: {_show(raw)}: must be greater than zero")
            return None
        return seconds

    def _leader_election(self) -> None:
        le = self.data.get("leaderElection")
        if not isinstance(le, Mapping) or le.get("leaderElect") is False:
            return
        base = ("leaderElection",)
        rule = "leader-election"
        lease = self._positive_duration((*base, "leaseDuration"), rule)
        renew = self._positive_duration((*base, "renewDeadline"), rule)
        retry = self._positive_duration((*base, "retryPeriod"), rule)
        lease_s = lease if lease is not None else (
            15.0 if "leaseDuration" not in le else None)
        renew_s = renew if renew is not None else (
            10.0 if "renewDeadline" not in le else None)
        retry_s = retry if retry is not None else (
            2.0 if "retryPeriod" not in le else None)
        if lease_s is not None and renew_s is not None and lease_s <= renew_s:
            at = "leaseDuration" if "leaseDuration" in le else "renewDeadline"
            self.add((*base, at), rule,
                     f"Invalid value: {_show(le.get(at, '15s'))}: leaseDuration "
                     f"({_seconds(lease_s)}) must be greater than renewDeadline "
                     f"({_seconds(renew_s)})")
        elif renew_s is not None and retry_s is not None \
                and renew_s <= _LEADER_JITTER * retry_s:
            at = "renewDeadline" if "renewDeadline" in le else "retryPeriod"
            self.add((*base, at), rule,
                     f"Invalid value: {_show(le.get(at, '10s'))}: renewDeadline "
                     f"({_seconds(renew_s)}) must be greater than {_LEADER_JITTER:g} x "
                     f"retryPeriod ({_seconds(retry_s)}), or the leader elector refuses "
                     "to start")

    # feature gates ----------------------------------------------------------------
    def feature_gates(self, overrides: Sequence[tuple[str, bool]]) -> None:
        """Each `featureGates` entry policyd refuses, at its key, in component-base's
        words (an unknown name with the known ones); then, with every entry accepted,
        the gates left on whose dependencies are off, with `overrides` applied."""
        raw = self.data.get("featureGates")
        where: JsonPath = ("featureGates",)
        refused = False
        if isinstance(raw, Mapping) and not self.is_reported(where):
            for name, value in raw.items():
                if not isinstance(value, bool):
                    refused = True  # the schema said so
                    continue
                problem = check_setting(str(name), value)
                if problem is not None:
                    refused = True
                    self.add((*where, name), "feature-gate", problem, key=True)
        self.gates = feature_gates_from(raw, overrides)
        if refused:
            return
        at: JsonPath = where if isinstance(raw, Mapping) else ()
        for problem in dependency_problems(self.gates):
            self.add(at, "feature-gate", problem + (" (with --feature-gates applied)"
                                                    if overrides else ""), key=bool(at))

    # metrics providers ----------------------------------------------------------------
    def metrics_providers(self) -> None:
        raw = self.data.get("metricsProviders")
        if not isinstance(raw, list):
            return
        names: dict[str, JsonPath] = {}
        for i, p in enumerate(raw):
            where: JsonPath = ("metricsProviders", i)
            if not isinstance(p, Mapping) or self.is_reported(where):
                continue
            name, kind = p.get("name"), p.get("kind")
            if isinstance(name, str):
                if name in names:
                    self.add((*where, "name"), "duplicate-provider-name",
                             f'Duplicate value: "{name}" (also {_fmt(names[name])})')
                else:
                    names[name] = (*where, "name")
            if kind in config_schema.METRICS_KIND_FIELDS:
                mine = config_schema.METRICS_KIND_FIELDS[kind]
                for key in p:
                    owners = [k for k, fields in config_schema.METRICS_KIND_FIELDS.items()
                              if key in fields]
                    if owners and key not in mine:
                        self.add((*where, key), "metrics-provider",
                                 f"field {show_value(key)} is for kind "
                                 f"{' or '.join(owners)}, not "
                                 f"{kind}", key=True)
            defined: list[tuple[JsonPath, Any]] = []
            declared = (config_schema.METRICS_PROVIDER_KINDS.get(kind)
                        if isinstance(kind, str) else None)
            if declared is not None and not declared.metric_list:
                defined = [((*where, "metric"), p.get("metric"))]
            elif declared is not None and isinstance(p.get("metrics"), list):
                defined = [((*where, "metrics", j, "name"), m.get("name"))
                           for j, m in enumerate(p["metrics"]) if isinstance(m, Mapping)]
            for at, metric in defined:
                if not isinstance(metric, str) or self.is_reported(at):
                    continue
                if metric in self.metric_names:
                    self.add(at, "duplicate-metric",
                             f'Duplicate value: "{metric}" (also defined at '
                             f"{_fmt(self.metric_names[metric])}); each metric comes from "
                             "one provider")
                else:
                    self.metric_names[metric] = at
            refresh = self._positive_duration((*where, "refreshInterval"), "metrics-provider")
            timeout = self._positive_duration((*where, "timeout"), "metrics-provider")
            max_age = self._positive_duration((*where, "maxAge"), "metrics-provider")
            self._positive_duration((*where, "maxBackoff"), "metrics-provider")
            refresh_s = refresh if refresh is not None else (
                config_schema.DEFAULT_METRICS_REFRESH_SECONDS if "refreshInterval" not in p
                else None)
            if max_age is not None and refresh_s is not None and max_age < refresh_s:
                self.add((*where, "maxAge"), "metrics-provider",
                         f"maxAge ({_seconds(max_age)}) is shorter than refreshInterval "
                         f"({_seconds(refresh_s)}): every value goes missing before the "
                         "next refresh", level=WARNING)
            if timeout is not None and refresh_s is not None and timeout > refresh_s:
                self.add((*where, "timeout"), "metrics-provider",
                         f"timeout ({_seconds(timeout)}) is longer than refreshInterval "
                         f"({_seconds(refresh_s)}): a slow refresh delays the next one",
                         level=WARNING)
            token = p.get("bearerTokenFile")
            if isinstance(token, str) and token and not (self.path.parent / token).exists():
                self.add((*where, "bearerTokenFile"), "metrics-provider",
                         f"bearerTokenFile {str(self.path.parent / token)!r} does not exist "
                         "here (fine if it is mounted where policyd runs)", level=WARNING)

    @property
    def metric_check(self) -> MetricCheck:
        return MetricCheck(frozenset(self.metric_names), str(self.path))

    def metric_references(self) -> None:
        """Every policy `metric` rule must name a metric some provider defines; reported
        at the rule's file:line:column with the policy's problems."""
        for pdoc in self.policy_documents:
            for where, message in self.metric_check.unknown(pdoc.data):
                self.policy_problems.append(pdoc.problem(where, UNKNOWN_METRIC, message))

    # policies -----------------------------------------------------------------------
    def policies(self, extra: Sequence[Path]) -> None:
        """Load and compile the policies into `compiled`, by plugin name; their problems
        go to `policy_problems`."""

        entries = self.data.get("policies")
        files: list[Path] = []
        me = _resolved(self.path)
        for i, entry in enumerate(entries if isinstance(entries, list) else []):
            where = ("policies", i)
            if not isinstance(entry, str) or not entry or self.is_reported(where):
                continue
            target = Path(os.path.normpath(self.path.parent / entry))
            found = find_yaml_files([target])
            for problem in found.problems:
                if problem.kind == "unreadable":  # exit 2, at the path that failed
                    self.policy_problems.append(path_problem(problem))
                else:
                    what = ("does not exist" if problem.kind == "missing"
                            else "holds no *.yaml or *.yml files")
                    self.add(where, "policy-path", f"{str(target)!r} {what} (paths are "
                             "relative to this file)")
            files.extend(f for f, _ in found.files if _resolved(f) != me)
        found = find_yaml_files(extra)
        files.extend(f for f, _ in found.files)
        self.policy_problems.extend(
            path_problem(p) if p.kind == "unreadable"
            else Problem(p.path, 0, 0, "policy-path", ERROR, str(p)) for p in found.problems)
        unique: dict[Path, Path] = {}
        for f in files:
            unique.setdefault(_resolved(f), f)
        self.policy_files = list(unique.values())
        if not self.policy_files:
            return
        result = load_policy_set(self.policy_files)
        self.policy_problems.extend(result.problems)
        self.policy_documents = list(result.documents)
        compiled = {p.name: p for p in result.compiled}
        for pdoc in result.documents:
            spec = pdoc.data.get("spec") if isinstance(pdoc.data, Mapping) else None
            name = spec.get("pluginName") if isinstance(spec, Mapping) else None
            if isinstance(name, str) and name not in compiled:
                line, col = pdoc.position(("spec", "pluginName"))
                self.failed_plugins.setdefault(name, f"{pdoc.file}:{line}:{col}")
        self.failed_policy_files = len({p.file for p in result.problems
                                        if p.level == ERROR})
        self.compiled = compiled

    def cluster_policies(self, source: ClusterPolicies | None) -> None:
        """Add the cluster policies to `compiled`, after the files' (so the default
        profile lists file policies first). They never replace a file policy: the
        source refuses a pluginName a file uses, and this keeps the file's if not."""
        if source is None:
            return
        extra = {name: p for name, p in source(self.policy_documents,
                                                self.metric_check).items()
                 if name not in self.compiled}
        self.cluster_plugins = tuple(extra)
        self.compiled = {**self.compiled, **extra}

    # profiles -----------------------------------------------------------------------
    def profiles(self) -> None:

        raw = self.data.get("profiles")
        if raw is None:
            profiles: list[tuple[JsonPath, Mapping[str, Any]]] = [
                ((), {"schedulerName": config_schema.DEFAULT_SCHEDULER_NAME})]
        elif isinstance(raw, list):
            profiles = [(("profiles", i), p) for i, p in enumerate(raw)
                        if isinstance(p, Mapping)]
        else:
            return
        self.profile_list = profiles
        names: dict[str, JsonPath] = {}
        queue_sorts: list[tuple[JsonPath, str | None, Any]] = []
        for where, profile in profiles:
            name = profile.get("schedulerName", config_schema.DEFAULT_SCHEDULER_NAME)
            if isinstance(name, str) and name:
                if name in names:
                    at = (*where, "schedulerName") if "schedulerName" in profile else where
                    self.add(at, "duplicate-scheduler-name",
                             f'Duplicate value: "{name}" (also {_fmt(names[name])})')
                else:
                    names[name] = (*where, "schedulerName")
            resolved = pl.check_profile(profile, self.compiled, path=where,
                                        report=self._plugin_problem, features=self.gates)
            queue_sort = resolved.names_at("queueSort")
            qs = queue_sort[0] if len(queue_sort) == 1 else None
            if len(queue_sort) <= 1:
                queue_sorts.append((where, qs, _plugin_args(profile, qs)))
        if queue_sorts:
            first_where, first_name, first_args = queue_sorts[0]
            for where, qs, args in queue_sorts[1:]:
                if qs != first_name or args != first_args:
                    at = (*where, "plugins", "queueSort")
                    shown = f'"{qs}"' if qs else "none"
                    first = f'"{first_name}"' if first_name else "none"
                    what = "queueSort plugin" if qs != first_name else "queueSort plugin's args"
                    while self.get(at) is None and len(at) > len(where):
                        at = at[:-1]
                    self.add(at, "queue-sort",
                             f"Invalid value: {shown}: must be the same for all profiles "
                             f"(the {what} of {_fmt(first_where) or 'the first profile'} is "
                             f"{first if qs != first_name else 'different'})", key=True)

    def _plugin_problem(self, where: JsonPath, rule: str, message: str) -> None:
        """`policyd.config.plugins`' report: placed in the file, and a plugin that is
        unknown because its policy failed to load said so."""

        if rule == pl.RULE_SHAPE:
            return  # the schema has said it, better
        if rule == pl.RULE_UNKNOWN:
            name = self.get(where)
            if isinstance(name, str) and name in self.failed_plugins:
                rule = "policy-invalid"
                message = (f'plugin "{name}" comes from the policy at '
                           f"{self.failed_plugins[name]}, which has errors (see below)")
            elif self.failed_policy_files and "did you mean" not in message:
                message += (f" ({self.failed_policy_files} policy file(s) failed to load; "
                            "see their problems)")
        self.add(where, rule, message)


def _plugin_args(profile: Mapping[str, Any], name: str | None) -> Any:
    configs = profile.get("pluginConfig")
    for pc in configs if isinstance(configs, list) else []:
        if isinstance(pc, Mapping) and pc.get("name") == name:
            return pc.get("args")
    return None


def _resolved(p: Path) -> Path:
    try:
        return p.resolve()
    except OSError:
        return p.absolute()


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _show(v: Any) -> str:
    return f'"{v}"' if isinstance(v, str) else show_value(v)


def _seconds(v: float) -> str:
    return f"{v:g}s"


def _fmt(where: JsonPath) -> str:
    return format_path(where)


def _range_text(schema: Mapping[str, Any]) -> str:
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if lo is not None and hi is not None:
        return f"not in valid range [{lo}-{hi}]"
    if lo is not None:
        return f"must be greater than or equal to {lo}"
    if schema.get("exclusiveMinimum") is not None:
        return f"must be greater than {schema['exclusiveMinimum']}"
    if hi is not None:
        return f"must be less than or equal to {hi}"
    return f"must be less than {schema.get('exclusiveMaximum')}"
