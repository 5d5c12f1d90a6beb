"""Helpers: build policy documents as dicts and lint/compile them in memory."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from policyd.policy.from_paths import PolicySet, check_documents, is_policy_document
from policyd.problems import Problem
from policyd.sourcefile import load_bytes


def make_policy(name: str = "p", plugin: str = "P", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policyd.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": name},
        "spec": {"pluginName": plugin, **copy.deepcopy(spec)},
    }


def check_texts(*texts: str | bytes) -> PolicySet:
    """Load each text as one file (named f0.yaml, f1.yaml...) and run every check."""
    result = PolicySet()
    for i, text in enumerate(texts):
        data = text.encode() if isinstance(text, str) else text
        src = load_bytes(data, f"f{i}.yaml")
        result.files.append(src)
        result.problems.extend(src.problems)
        for doc in src.documents:
            if is_policy_document(doc, result.problems):
                result.documents.append(doc)
    check_documents(result)
    return result


def check_docs(*docs: dict[str, Any]) -> PolicySet:
    return check_texts(*(json.dumps(d, indent=1) for d in docs))


def rules(problems: list[Problem], *, warnings: bool = False) -> list[tuple[str, str]]:
    """(rule, path) of the errors (and warnings too when asked), sorted."""
    return sorted((p.rule, p.path) for p in problems if warnings or p.level == "error")


def errors(problems: list[Problem]) -> list[Problem]:
    return [p for p in problems if p.level == "error"]


@pytest.fixture
def policy() -> Any:
    return make_policy
