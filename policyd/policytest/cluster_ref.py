"""A PolicyTest's `spec.cluster.file`: a snapshot (what `kubectl get nodes,pods -A -o
yaml` prints, path relative to the test file) loaded exactly as `simulate --cluster`
loads one (`policyd.model.cluster_files.load_snapshot`), so the same file tests and
simulates alike; a file it cannot load is one problem at `spec.cluster.file`."""

from __future__ import annotations

import os
from pathlib import Path

from policyd.errors import PolicydError
from policyd.model.cluster_files import Snapshot, load_snapshot
from policyd.model.spelling import show_value
from policyd.policytest.file_ref import unusable
from policyd.problems import Problem
from policyd.sourcefile import SourceDocument

CLUSTER_RULE = "cluster-file"


def load_cluster(doc: SourceDocument, file: str, base_dir: Path,
                 problems: list[Problem]) -> Snapshot | None:
    """The snapshot at `file`; None once why it cannot be used is in `problems`."""
    path = Path(os.path.normpath(base_dir / file))
    why = unusable(path)
    try:
        if why is None:
            return load_snapshot(path)
    except PolicydError as exc:
        why = str(exc)
    problems.append(doc.problem(("spec", "cluster", "file"), CLUSTER_RULE,
                                f"cluster file {show_value(file)}: {why}"))
    return None
