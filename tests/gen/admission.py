"""Seeded cases for the live equivalence check of admission projection (issue 29):
a differential scene (`tests.gen.differential.gen_scene`, isolated the same way) whose
nodes and pods also carry the generated policies' vocabulary, one to three policies,
and the original pod under test, before any projection.

The test admits the pod (`policyd.admission`) for kube-scheduler and lets policyd's
engine decide the original pod with the policies; the claim compared is that
kube-scheduler's feasible nodes for the admitted pod are policyd's for the original
when every rule that applies is projected, and a superset of them when one is not.

What the mix aims at:
- about half the cases keep only the rule kinds kube-scheduler can express
  (`PROJECTED_KINDS`: nodeLabels, annotationToNodeLabel); the others draw every filter
  kind, most of which no constraint expresses (headroom, maxPodsPerNode, JMESPath,
  CEL, requireExtendedResource unless the pod requests the resource itself);
- nodes take the policies' label keys (`env` and `Env` both) and values, and pods
  their label and annotation keys, so rules do remove nodes; some cases add the
  shipped `policies/hw-encrypt.yaml` with nodes labelled for it and a pod annotated;
  about half the nodes are then relabelled to meet what the rules require of the pod
  (`_plant`), so that the pod often fits somewhere;
- policies filter only (their scores change no feasible set), none that `policyd
  lint` refuses, and a few are Audit mode, which filters and projects nothing;
- roomy nodes with fewer taints and less topology spread than `gen_case`'s mix, so
  that most pods are decided by the policies rather than by an early filter.
  A DoNotSchedule spread constraint that honors node affinity counts only the nodes
  the pod's required affinity admits, so the projection changes what it counts: the
  test compares such cases differently (see its docstring).

The pod under test carries no spec.priority and requests no extended resource from
the vocabulary: the API server would refuse the first without a PriorityClass and the
second without equal limits.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from policyd.admission.projection import project_pod
from policyd.model.records import pod_from_dict
from policyd.policy.compiler import compile_policy
from policyd.sourcefile import load_bytes
from tests.gen.clusters import MIXES, Mix
from tests.gen.differential import Case, gen_scene
from tests.gen.policies import (
    FILTER_KINDS,
    NODE_VOCABULARY,
    PROJECTED_KINDS,
    VALUES,
    VOCABULARY,
    filter_rule,
    policy_doc,
)
from tests.unit.policy.conftest import check_docs, errors

HW_ENCRYPT_POLICY = Path(__file__).resolve().parents[2] / "policies" / "hw-encrypt.yaml"
# What policies/hw-encrypt.yaml reads (its annotation and the node label it requires).
HW_ANNOTATION = "myorg.io/require-hw-encrypt"
HW_LABEL = "node.kubernetes.io/hw-encrypt"

POD_VOCABULARY = replace(VOCABULARY, resources=(), priorities=None)
# Mostly roomy nodes with few taints and little spreading; one case in four on the
# smaller nodes of the "fit" mix, where resources and headroom rules bite.
ADMISSION_MIX = Mix("admission", taints=0.3, roomy=True, spread=0.15, affinity=0.2)
ADMISSION_MIXES = (ADMISSION_MIX, ADMISSION_MIX, ADMISSION_MIX,
                   next(m for m in MIXES if m.name == "fit"))
# The share of cases whose policies keep only PROJECTED_KINDS, of cases with the
# hw-encrypt policy, of nodes labelled for it, and of policies in Audit mode.
PROJECTED_ONLY = 0.45
HW_ENCRYPT = 0.3
HW_NODES = 0.4
AUDIT = 0.1
# The share of nodes relabelled to meet the pod's projected requirements (`_plant`).
PLANTED = 0.5


@dataclass
class AdmissionCase:
    """A scene (`case`, whose `pod` is the original pod under test) and the policy
    documents of its profile, in order."""

    case: Case
    policies: list[dict[str, Any]]
    projected_only: bool  # its rules were drawn from PROJECTED_KINDS alone

    @property
    def prefix(self) -> str:
        return self.case.prefix

    @property
    def index(self) -> int:
        return self.case.index


def gen_admission_case(seed: int, index: int, prefix: str) -> AdmissionCase:
    """The admission case number `index` of the run with `seed`, its names starting
    with `prefix` (a DNS label), isolated as `tests.gen.differential` describes."""
    rng = random.Random(f"{seed}/admission/{index}")
    case = gen_scene(rng, seed, index, prefix, rng.choice(ADMISSION_MIXES),
                     vocabulary=POD_VOCABULARY, node_vocabulary=NODE_VOCABULARY)
    projected_only = rng.random() < PROJECTED_ONLY
    kinds = PROJECTED_KINDS if projected_only else FILTER_KINDS
    policies = [_policy(rng, j, kinds) for j in range(rng.randint(1, 3))]
    if rng.random() < HW_ENCRYPT:
        policies.insert(rng.randint(0, len(policies)), hw_encrypt_policy())
        for node in case.nodes:
            if rng.random() < HW_NODES:
                node["metadata"]["labels"][HW_LABEL] = rng.choice(["true", "true", "false"])
        annotations = case.pod["metadata"].setdefault("annotations", {})
        annotations[HW_ANNOTATION] = rng.choice(["true", "true", "false"])
    _plant(rng, case, policies)
    case.notes.append("projected kinds only" if projected_only else "every filter kind")
    return AdmissionCase(case, policies, projected_only)


def _policy(rng: random.Random, j: int, kinds: Sequence[str]) -> dict[str, Any]:
    """Policy `p<j>` (plugin `P<j>`) with one to three filter rules of `kinds`, no
    scores, drawn again until `policyd lint` finds no error in it: the generator
    writes rules that can never match (`Gt` on a key another requirement says does
    not exist), which policyd refuses to load."""
    for _ in range(50):
        doc = policy_doc(rng)
        doc["metadata"]["name"] = f"p{j}"
        spec = doc["spec"]
        spec["pluginName"] = f"P{j}"
        spec["filters"] = [filter_rule(rng, i, kinds) for i in range(rng.randint(1, 3))]
        spec["scores"] = []
        # Its one condition reads spec.priority, which is 0 for every pod here.
        spec.get("appliesTo", {}).pop("condition", None)
        if not spec.get("appliesTo", True):
            del spec["appliesTo"]
        if rng.random() < AUDIT:
            spec["mode"] = "Audit"
        if not errors(check_docs(doc).problems):
            return doc
    raise AssertionError(f"no valid policy in 50 draws of kinds {kinds}")


def _plant(rng: random.Random, case: Case, policies: list[dict[str, Any]]) -> None:
    """Relabel about PLANTED of the nodes so that they meet every requirement the
    policies project for the pod (`policyd.admission`), as far as the requirements
    agree: a few random requirements ANDed are met by almost no random node, and a
    case where every node fails teaches little."""
    pod = pod_from_dict(case.pod)
    requirements = [r for p in project_pod(pod, [compile_policy(d) for d in policies])
                    for r in p.requirements]
    for node in case.nodes:
        if requirements and rng.random() < PLANTED:
            labels = node["metadata"]["labels"]
            for r in requirements:
                _meet(rng, labels, r)


def _meet(rng: random.Random, labels: dict[str, str], r: Mapping[str, Any]) -> None:
    """Change `labels` so that the NodeSelectorRequirement `r` holds."""
    key, op, values = r["key"], r["operator"], list(r.get("values") or ())
    if op == "In":
        labels[key] = rng.choice(values)
    elif op == "Exists":
        labels.setdefault(key, rng.choice(VALUES))
    elif op == "DoesNotExist":
        labels.pop(key, None)
    elif op == "NotIn":
        others = [v for v in VALUES if v not in values]
        if others and rng.random() < 0.7:
            labels[key] = rng.choice(others)
        else:
            labels.pop(key, None)
    elif op in ("Gt", "Lt") and int(values[0]) + (1 if op == "Gt" else -1) >= 0:
        # A label value starts with a letter or digit: no negative numbers.
        labels[key] = str(int(values[0]) + (rng.randint(1, 3) if op == "Gt" else -1))


def hw_encrypt_policy() -> dict[str, Any]:
    """A fresh copy of the shipped policies/hw-encrypt.yaml document."""
    return copy.deepcopy(_hw_encrypt())


@cache
def _hw_encrypt() -> dict[str, Any]:
    source = load_bytes(HW_ENCRYPT_POLICY.read_bytes(), str(HW_ENCRYPT_POLICY))
    (document,) = source.documents
    data: dict[str, Any] = document.data
    return data
