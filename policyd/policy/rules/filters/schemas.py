"""What each filter kind declares beside its class: the JSON Schema of its value, its
row of the docs' filter table and an example rule.

`policy_schema` builds `filters[]` from `KINDS` (in this order) and each class in this
package names its declaration as `kind`, so a kind is named once. The declarations
sit in this one light module rather than in the class modules because `policyd lint`
validates against the schema without loading the rules' numpy code.
"""

from __future__ import annotations

from policyd.policy.schema_parts import (
    INT32_MAX,
    QUANTITY,
    STRING_MAP,
    RuleKind,
    schema_object,
)

# The docs table's columns after the kind's.
COLUMNS = ("what it checks", "code when it fails")
_UNRESOLVABLE = "UnschedulableAndUnresolvable"

ANNOTATION_TO_NODE_LABEL = RuleKind(
    "annotationToNodeLabel",
    schema_object({
        "annotation": {"type": "string", "description": "Pod annotation key."},
        "value": {"type": "string", "description":
                  "Only when the annotation has this value (absent: any value)."},
        "label": {"type": "string", "description": "Node label key required."},
        "labelValue": {"type": "string", "description": "The label's required value."},
        "useAnnotationValue": {"type": "boolean", "description":
                               "The label must equal the annotation's own value."},
    }, ("annotation", "label")),
    ("when the pod has annotation A (optionally with value V), the node must have label L "
     "with a fixed value (`labelValue`) or with the annotation's own value "
     "(`useAnnotationValue: true`)", _UNRESOLVABLE),
    """\
- id: hw-encrypt-node
  message: node(s) didn't offer hardware encryption
  annotationToNodeLabel:
    annotation: myorg.io/require-hw-encrypt
    value: "true"
    label: node.kubernetes.io/hw-encrypt
    labelValue: "true"
""")

NODE_LABELS = RuleKind(
    "nodeLabels",
    schema_object({
        "matchLabels": STRING_MAP,
        "matchExpressions": {"type": "array",
                             "items": {"$ref": "#/$defs/nodeRequirement"}},
    }, description="Node labels that must match (ANDed); keys and values are "
                   "case-sensitive."),
    ("`matchLabels` and/or `matchExpressions` with `In`, `NotIn`, `Exists`, "
     "`DoesNotExist`, `Gt`, `Lt` (Kubernetes node-affinity semantics)", _UNRESOLVABLE),
    """\
- id: big-nodes
  message: node(s) have fewer than 16 cores
  nodeLabels:
    matchExpressions:
      - {key: myorg.io/cores, operator: Gt, values: ["15"]}
""")

HEADROOM = RuleKind(
    "headroom",
    schema_object({
        "resource": {"type": "string", "description": "Any resource name."},
        "quantity": QUANTITY,
        "percent": {"type": "number", "minimum": 0, "maximum": 100},
    }, ("resource",), "Free capacity the node must keep after placing the pod.",
        oneOf=[{"required": ["quantity"]}, {"required": ["percent"]}]),
    ("after placing the pod, the node keeps at least `quantity` (e.g. `1Gi`, `500m`) or "
     "`percent` of allocatable free, for any resource including extended ones and `pods`",
     "Unschedulable"),
    """\
- id: keep-memory
  message: node(s) would have less than 2Gi memory free
  headroom: {resource: memory, quantity: 2Gi}
""")

REQUIRE_EXTENDED_RESOURCE = RuleKind(
    "requireExtendedResource",
    schema_object({
        "name": {"type": "string", "description": "e.g. example.com/gpu"},
        "quantity": {**QUANTITY, "description":
                     "Allocatable amount the node must offer (default 1)."},
    }, ("name",), "The node must offer this extended resource."),
    ("the node's allocatable has at least `quantity` (default 1) of `name`, e.g. "
     "`example.com/gpu`", f"{_UNRESOLVABLE} (evicting pods never adds allocatable)"),
    """\
- id: fpga
  message: node(s) have no FPGA
  requireExtendedResource: {name: example.com/fpga}
""")

MAX_PODS_PER_NODE = RuleKind(
    "maxPodsPerNode",
    {"type": "integer", "minimum": 1, "maximum": INT32_MAX, "description":
     "At most this many pods this policy applies to on one node (an int32)."},
    ("at most N pods this policy applies to on one node (existing ones counted; the pod "
     "itself not twice)", "Unschedulable"),
    """\
- id: spread-db
  message: node(s) already run 2 database pods
  maxPodsPerNode: 2
""")

SAME_TOPOLOGY = RuleKind(
    "sameTopology",
    schema_object({
        "key": {"type": "string", "minLength": 1, "description":
                "Node label key of the topology domain (a zone, a rack)."},
    }, ("key",), description="A pod group's pods share one domain of this node label."),
    ("the pods of one pod group (either PodGroup API) share one domain of node label "
     "`key`: a node without the label fails; once members are placed, only nodes in "
     "their domain pass (pods of no group are not constrained)", _UNRESOLVABLE),
    """\
- id: one-zone
  message: node(s) are not in the zone the rest of the job runs in
  sameTopology:
    key: topology.kubernetes.io/zone
""")

JMESPATH = RuleKind(
    "jmespath",
    {"type": "string", "description":
     "JMESPath over {pod, node}; the node passes when truthy."},
    ("a JMESPath expression over `{pod, node}` (the raw Kubernetes objects) is truthy",
     _UNRESOLVABLE),
    """\
- id: same-rack
  message: node(s) are not in the pod's rack
  jmespath: "label(node, 'myorg.io/rack') == annotation(pod, 'myorg.io/rack')"
""")

CEL = RuleKind(
    "cel",
    {"type": "string", "description":
     "CEL over pod and node (raw objects, with labels and annotations shortcuts); "
     "the node passes when true."},
    ("a [CEL](#cel) expression over `pod` and `node` (the raw Kubernetes objects, "
     "with `labels` and `annotations` shortcuts) is true; false or an error (a missing "
     "key) rejects", _UNRESOLVABLE),
    """\
- id: same-tier
  message: node(s) are not in the pod's tier
  cel: 'node.labels["tier"] == pod.annotations["myorg.io/tier"]'
""")

KINDS = (ANNOTATION_TO_NODE_LABEL, NODE_LABELS, HEADROOM, REQUIRE_EXTENDED_RESOURCE,
         MAX_PODS_PER_NODE, SAME_TOPOLOGY, JMESPATH, CEL)
