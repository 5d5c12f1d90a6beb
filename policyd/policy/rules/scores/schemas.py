"""What each score kind declares beside its class: the JSON Schema of its value, its
row of the docs' score table and an example rule.

`policy_schema` builds `scores[]` from `KINDS` (in this order) and each class in this
package names its declaration as `kind`, so a kind is named once. The declarations
sit in this one light module rather than in the class modules because `policyd lint`
validates against the schema without loading the rules' numpy code.
"""

from __future__ import annotations

from policyd.policy.schema_parts import (
    MAX_RAW_VALUE,
    METRIC_NAME_PATTERN,
    RuleKind,
    schema_object,
)

# The docs table's columns after the kind's.
COLUMNS = ("raw value of a node",)
_JSON_NUMBER = "[JSON number](#numbers-and-quantities)"

LABEL_VALUE = RuleKind(
    "labelValue",
    schema_object({
        "label": {"type": "string"},
        "values": {"type": "object",
                   "additionalProperties": {"type": "number", "minimum": 0,
                                            "maximum": MAX_RAW_VALUE}},
        "default": {"type": "number", "minimum": 0, "maximum": MAX_RAW_VALUE,
                    "description": "Points when the label is missing or unlisted."},
    }, ("label", "values")),
    ("the points of the node's label value; `default` (0) when the label is missing or "
     "not listed",),
    """\
- id: fast-disks
  weight: 50
  normalize: max
  labelValue:
    label: myorg.io/disk
    values: {nvme: 100, ssd: 60, hdd: 10}
""",
    shape="{label, values: {value: points}, default}")

NUMERIC = RuleKind(
    "numeric",
    schema_object({
        "label": {"type": "string"},
        "annotation": {"type": "string"},
        "prefer": {"enum": ["highest", "lowest"]},
    }, (), "A number read from a node label or annotation.",
        oneOf=[{"required": ["label"]}, {"required": ["annotation"]}]),
    ("the number in a node label or annotation (e.g. measured latency in ms), read as a "
     f"{_JSON_NUMBER}; `prefer: lowest` reverses",),
    """\
- id: low-latency
  weight: 80
  normalize: minmax
  numeric: {label: myorg.io/latency-ms, prefer: lowest}
""",
    shape="{label \\| annotation, prefer: highest \\| lowest}")

ALLOCATION = RuleKind(
    "allocation",
    schema_object({
        "strategy": {"enum": ["least", "most"]},
        "resources": {"type": "array", "minItems": 1, "items": schema_object({
            "name": {"type": "string"},
            "weight": {"type": "integer", "minimum": 1, "maximum": 100},
        }, ("name",))},
    }, ("strategy",), "Least/most allocated, as NodeResourcesFit scores it."),
    ("NodeResourcesFit's LeastAllocated/MostAllocated formula over the chosen resources "
     "(default cpu and memory, weight 1 each), 0..100",),
    """\
- id: pack-gpus
  weight: 30
  normalize: none
  allocation:
    strategy: most
    resources: [{name: example.com/gpu, weight: 2}, {name: cpu}]
""",
    shape="{strategy: least \\| most, resources: [{name, weight}]}")

JMESPATH = RuleKind(
    "jmespath",
    {"type": "string", "description": "JMESPath over {pod, node} giving a number."},
    ("a JMESPath expression over `{pod, node}` giving a number (or a string holding a "
     f"{_JSON_NUMBER})",),
    """\
- id: newer-kernel
  weight: 10
  normalize: minmax
  jmespath: "label(node, 'myorg.io/kernel-minor')"
""")

METRIC = RuleKind(
    "metric",
    schema_object({
        "name": {"type": "string", "pattern": METRIC_NAME_PATTERN, "description":
                 "A metric a metricsProviders entry of the profile defines."},
        "prefer": {"enum": ["highest", "lowest"]},
        "missing": {"enum": ["worst", "neutral", "skip"], "description":
                    "What a node without a fresh value scores: worst (0, the "
                    "default), neutral (50), skip (the rule does not count for it)."},
    }, ("name", "prefer"), "A node metric from the background cache (no I/O while "
                           "scoring)."),
    ("the node's value of a metric from the node metrics cache that the profile's "
     "`metricsProviders` fill in the background "
     "([below](#node-metrics-metric-rules-and-metricsproviders)); `prefer: lowest` "
     "reverses",),
    """\
- id: least-loaded
  weight: 60
  normalize: minmax
  metric: {name: node_cpu_busy, prefer: lowest, missing: neutral}
""",
    shape="{name, prefer: highest \\| lowest, missing: worst \\| neutral \\| skip}")

CEL = RuleKind(
    "cel",
    {"type": "string", "description":
     "CEL over pod and node giving an int, uint or double."},
    ("a [CEL](#cel) expression over `pod` and `node` giving an int, uint or "
     "double; an error (a missing key) or another type is a missing value",),
    """\
- id: more-memory
  weight: 20
  normalize: max
  cel: 'quantity(node.status.allocatable.memory).asApproximateFloat()'
""")

KINDS = (LABEL_VALUE, NUMERIC, ALLOCATION, JMESPATH, METRIC, CEL)
