"""Every rule id a problem can carry: its level and what it finds, in one line.

The rule table of `policyd lint` in docs/policy-language.md is generated from here
(`python -m policyd.cli.doc_blocks`), and a unit test fails when the code can
emit an id that is not registered, or a registered id nothing emits.

`commands` says which command reports a rule first: `lint` rules concern policy files,
so `check-config`, `test` and every command that loads policies report them too.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from policyd.problems import ERROR, WARNING, Level

LINT = "lint"
CHECK_CONFIG = "check-config"
TEST = "test"
LOAD = "explain, simulate, test, run"  # commands that compile the policies they load


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    levels: tuple[Level, ...]  # the first is the default; more when severity varies
    description: str
    commands: tuple[str, ...] = (LINT,)

    @property
    def level(self) -> Level:
        return self.levels[0]


_E: tuple[Level, ...] = (ERROR,)
_W: tuple[Level, ...] = (WARNING,)

RULES: tuple[Rule, ...] = (
    # YAML and files (every file policyd reads with positions)
    Rule("yaml-syntax", _E, "YAML that does not parse, or an alias to no anchor"),
    Rule("yaml-tab", _E, "a tab character in indentation: YAML indents with spaces only"),
    Rule("yaml-duplicate-key", _E, "the same key twice in one mapping (parsers disagree "
                                   "on which value wins)"),
    Rule("yaml-merge-key", _E, "a merge key (`<<`): write the fields out"),
    Rule("yaml-complex-key", _E, "a key that is not a plain scalar"),
    Rule("yaml-tag", _E, "a tag other than YAML's core ones, or a number no parser can "
                         "read"),
    Rule("yaml-ambiguous", _W, "a plain `yes`/`no`/`on`/`off`/`y`/`n`: a string for "
                               "policyd (YAML 1.2) but a boolean for YAML 1.1 tools such as "
                               "kubectl; quote it"),
    Rule("yaml-depth", _E, "nesting over 64 levels"),
    Rule("yaml-too-big", _E, "more than 20,000 nodes after alias expansion (a \"billion "
                             "laughs\" is rejected in milliseconds), or more than 1000 "
                             "documents"),
    Rule("file-too-large", _E, "a file over 128 KiB"),
    Rule("file-binary", _E, "a NUL byte: not a text file"),
    Rule("file-encoding", _E, "not UTF-8"),
    Rule("file-empty", _E, "no YAML document"),
    Rule("file-unreadable", _E, "cannot be read: no permission, a dangling symlink, a "
                                "symlink loop, a FIFO (exit 2)"),
    # policies
    Rule("schema", _E, "the JSON Schema: unknown fields (with a \"did you mean\"), types, "
                       "ranges (weights 1..100), required fields; for one-of choices the "
                       "best match, not every branch"),
    Rule("not-a-policy", _E, "a document of another kind"),
    Rule("label-key", _E, "a label key the Kubernetes API server would reject (qualified "
                          "name syntax, 63-character limits)"),
    Rule("label-value", _E, "a label value the Kubernetes API server would reject"),
    Rule("annotation-key", _E, "an annotation key the Kubernetes API server would reject"),
    Rule("namespace", _E, "a namespace name the Kubernetes API server would reject"),
    Rule("resource-name", _E, "a resource name the Kubernetes API server would reject"),
    Rule("jmespath", _E, "parse errors with the column inside the expression and a caret; "
                         "unknown functions; wrong argument counts; nesting deeper than 64 "
                         "levels of brackets, calls, `!` and `&`, or a parsed tree deeper "
                         "than 128 (long `\\|\\|`/`&&`/`\\|` chains)"),
    Rule("cel", (ERROR, WARNING), "compile errors at their line and column with a caret "
                                  "and a result type the rule cannot use (filters: bool, "
                                  "scores: int, uint or double), errors; a worst-case cost "
                                  "beyond one pass over the data, a warning ([CEL](#cel))"),
    Rule("quantity", _E, "quantities Kubernetes would reject, beyond 2^63-1, or negative "
                         "([grammar](#numbers-and-quantities))"),
    Rule("number", _E, "`.inf` or `.nan` anywhere (in a PolicyTest's metrics: any value "
                       "that is not a finite number)", (LINT, TEST)),
    Rule("never-matches", _E, "requirements that contradict each other (`In [a]` + "
                              "`NotIn [a]`, `Exists` + `DoesNotExist`, `Gt 5` + `Lt 6`, "
                              "disjoint `In` lists), a policy whose namespaces are all "
                              "excluded"),
    Rule("duplicate-name", _E, "two policies (or a PolicyTest's two nodes or pods) with "
                               "one name", (LINT, TEST)),
    Rule("duplicate-plugin-name", _E, "two policies with one `spec.pluginName`"),
    Rule("builtin-plugin-name", _E, "a `spec.pluginName` that is a built-in plugin's or "
                                    "another kube-scheduler v1.36 plugin's"),
    Rule("duplicate-id", _E, "two rules of one policy with one id"),
    Rule("key-case", _W, "a label key equal to another used key or a well-known Kubernetes "
                         "key except for case; plugin names that differ only by case"),
    Rule("score-range", _W, "points that `none` will clamp; normalization that stretches "
                            "allocation scores"),
    Rule("useless-policy", _W, "neither filters nor scores"),
    Rule("exception-unknown-rule", _E, "a policy exception names a rule id the policy's "
                                       "filters do not have"),
    Rule("exception-matches-nothing", _W, "a policy exception that can match no pod the "
                                          "policy applies to (its namespaces are outside "
                                          "`appliesTo.namespaces`, or no pod has both its "
                                          "podSelector's labels and "
                                          "`appliesTo.labelSelector`'s), or none in the "
                                          "audited cluster (audit)"),
    Rule("exception-expired", _W, "a policy exception whose `expires` has passed: it "
                                  "exempts nothing any more"),
    Rule("exception-expiring", _W, "a policy exception that expires within 14 days: "
                                   "renew it or fix its workloads first"),
    Rule("exception-expiry", _E, "a policy exception's `expires` is not an RFC 3339 time "
                                 "with a zone"),
    Rule("exception-duplicate", _E, "two exceptions of one policy share a name"),
    Rule("exception-empty-match", _E, "a policy exception's `match` names no part: it "
                                      "would exempt every pod"),
    Rule("scoped-mode-shadowed", _W, "a `scopedModes` entry whose namespaces an earlier "
                                     "entry already takes, so it never decides"),
    Rule("scoped-mode-matches-nothing", _W, "a `scopedModes` entry whose namespaces are "
                                            "outside `appliesTo.namespaces`: the policy "
                                            "never applies there, so it decides nothing"),
    Rule("autoscaler-invisible", _E, "with `--require-autoscaler-visible`: a filter rule "
                                     "of an Enforce-mode policy that no kube-scheduler "
                                     "constraint expresses, so cluster-autoscaler and "
                                     "Karpenter cannot see it"),
    Rule("audit-scores", _W, "scores on a policy in Audit mode: they do not count (only "
                             "its filters are audited) until it is enforced"),
    Rule("message", (ERROR, WARNING), "a filter `message` with a line break (error), with "
                                      "`\", \"` or leading/trailing whitespace (warnings): "
                                      "each breaks the one-line FailedScheduling text"),
    Rule("compile", _E, "a valid policy the compiler still rejects (a bug: please report "
                        "it)", (LOAD,)),
    Rule("path", _E, "a policy path that does not exist or cannot be read", (LOAD,)),
    # profiles
    Rule("config-document", _E, "not exactly one PolicydConfiguration mapping in the file",
         (CHECK_CONFIG,)),
    Rule("out-of-range", _E, "a number outside its range, in upstream's words",
         (CHECK_CONFIG,)),
    Rule("backoff", _E, "podMaxBackoffSeconds below podInitialBackoffSeconds",
         (CHECK_CONFIG,)),
    Rule("leader-election", _E, "durations that are not positive, a lease that expires "
                                "before its renew deadline", (CHECK_CONFIG,)),
    Rule("client-connection", (ERROR, WARNING), "a timeout that is not positive; a "
                                                "kubeconfig not found (warning)",
         (CHECK_CONFIG,)),
    Rule("feature-gate", _E, "a feature gate unknown, locked, not modelled by policyd, or "
                             "on with a gate it depends on off", (CHECK_CONFIG,)),
    Rule("extenders", _E, "`extenders`: policyd does not call scheduler extenders",
         (CHECK_CONFIG,)),
    Rule("no-effect", _W, "a kube-scheduler field policyd accepts and does not act on, "
                          "set to what kube-scheduler would act on (delayCacheUntilActive: "
                          "true)", (CHECK_CONFIG,)),
    Rule("duplicate-scheduler-name", _E, "two profiles with one schedulerName",
         (CHECK_CONFIG,)),
    Rule("queue-sort", _E, "more than one queueSort plugin, or different ones across "
                           "profiles", (CHECK_CONFIG,)),
    Rule("plugin-unknown", _E, "a plugin name nothing registers (with the closest one)",
         (CHECK_CONFIG,)),
    Rule("plugin-not-implemented", _E, "a kube-scheduler plugin policyd does not implement",
         (CHECK_CONFIG,)),
    Rule("extension-point", _E, "a plugin enabled at an extension point it does not "
                                "implement", (CHECK_CONFIG,)),
    Rule("plugin-duplicate", _E, "one plugin enabled twice at one extension point",
         (CHECK_CONFIG,)),
    Rule("plugin-config-unused", _E, "pluginConfig for a plugin that is not enabled",
         (CHECK_CONFIG,)),
    Rule("plugin-config-duplicate", _E, "two pluginConfig entries for one plugin",
         (CHECK_CONFIG,)),
    Rule("plugin-args", _E, "plugin args the plugin rejects; args for a policy",
         (CHECK_CONFIG,)),
    Rule("duplicate-provider-name", _E, "two metricsProviders with one name",
         (CHECK_CONFIG,)),
    Rule("duplicate-metric", _E, "one metric defined by two metricsProviders",
         (CHECK_CONFIG,)),
    Rule("metrics-provider", (ERROR, WARNING),
         "a field of another kind of provider, a duration that is not positive; a maxAge "
         "shorter than the refresh interval, a timeout longer than it, a bearerTokenFile "
         "not found (warnings)", (CHECK_CONFIG,)),
    Rule("unknown-metric", _E, "a policy `metric` rule naming a metric no provider defines",
         (CHECK_CONFIG,)),
    Rule("policy-path", _E, "a `policies` entry that does not exist or holds no YAML",
         (CHECK_CONFIG,)),
    Rule("policy-invalid", _E, "a plugin whose policy failed lint", (CHECK_CONFIG,)),
    # PolicyTest files
    Rule("unknown-field", _E, "a field a PolicyTest node's taint or pod's toleration does "
                              "not have", (TEST,)),
    Rule("invalid-object", _E, "a node or pod of a PolicyTest Kubernetes would reject",
         (TEST,)),
    Rule("unknown-node", _E, "a node name no node of the PolicyTest has", (TEST,)),
    Rule("unknown-pod", _E, "a test's pod that is not in spec.pods", (TEST,)),
    Rule("unknown-policy", _E, "a test's policy that is not in spec.policies", (TEST,)),
    Rule("unknown-pod-group", _E, "a test's podGroup that is not a scheduling.k8s.io "
                                  "PodGroup of spec.podGroups or the cluster file", (TEST,)),
    Rule("wrong-expectation", _E, "a pod case stating a pod group's expectations (placed, "
                                  "nodes, fits) or a podGroup case stating a pod's",
         (TEST,)),
    Rule("not-a-pod-group", _E, "a spec.podGroups entry of another kind", (TEST,)),
    Rule("no-tests", _E, "a PolicyTest with an empty spec.tests", (TEST,)),
    Rule("profile-ref", _E, "a PolicyTest's spec.profile (or `test --config`) that cannot "
                            "run: no such file, a profile with errors, no profile of that "
                            "schedulerName", (TEST,)),
    Rule("cluster-file", _E, "a PolicyTest's spec.cluster.file that does not load as a "
                             "snapshot", (TEST,)),
    Rule("not-a-test", _W, "a file named on the command line that holds no PolicyTest "
                           "(says what it is and which command takes it)", (TEST,)),
)

BY_ID = {r.id: r for r in RULES}


def markdown(rules: Sequence[Rule] = RULES, command: str = LINT) -> str:
    """The rule table of `command`, as docs/policy-language.md shows it."""
    rows = ["| rule | level | what |", "|---|---|---|"]
    rows += [f"| `{r.id}` | {', '.join(r.levels)} | {r.description} |"
             for r in rules if command in r.commands]
    return "\n".join(rows) + "\n"


def main(argv: Sequence[str]) -> int:
    if list(argv) != ["--markdown"]:
        print("usage: python -m policyd.lint.rules --markdown", file=sys.stderr)
        return 2
    sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
