"""Read a PolicydConfiguration file into frameworks, one per profile.

The full strict schema and position-aware validation of the profile is
`policyd.config.validate.validate_config_file` (what `policyd check-config`, `explain
--config`, `simulate --config` and the daemon use); this module is the plain-data core
under it: profiles, their plugins and args, and the policies they load, with every
problem reported by JSON path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from policyd.config.plugins import Problem, ProfileError, build_framework
from policyd.errors import InputFileError, PolicydError
from policyd.framework.interfaces import Plugin
from policyd.framework.runtime import Framework
from policyd.model.datafile import read_documents
from policyd.model.spelling import show_value

API_VERSION = "policyd.io/v1alpha1"
KIND = "PolicydConfiguration"
DEFAULT_SCHEDULER_NAME = "policyd"


class ConfigError(PolicydError):
    """An invalid profile: every problem, each with its path in the file."""

    def __init__(self, path: Path, problems: Sequence[Problem]) -> None:
        lines = [f"{path}: {p.path}: {p.message}" if p.path else f"{path}: {p.message}"
                 for p in problems]
        super().__init__(f"invalid configuration ({len(problems)} problem(s)):\n  "
                         + "\n  ".join(lines))
        self.problems = list(problems)


def read_config(path: Path) -> dict[str, Any]:
    docs = read_documents(path)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise InputFileError("expected exactly one PolicydConfiguration document",
                             where=str(path))
    doc: dict[str, Any] = docs[0]
    if doc.get("apiVersion") != API_VERSION or doc.get("kind") != KIND:
        raise InputFileError(f"expected apiVersion {API_VERSION} and kind {KIND}, got "
                             f"{show_value(doc.get('apiVersion'))} "
                             f"{show_value(doc.get('kind'))}", where=str(path))
    return doc


def policy_paths(config: Mapping[str, Any], config_path: Path) -> list[Path]:
    """The `policies` entries, relative to the configuration file's directory."""
    return [config_path.parent / p for p in config.get("policies") or []
            if isinstance(p, str)]


def frameworks_from_config(
    config: Mapping[str, Any], config_path: Path, policies: Mapping[str, Plugin],
    *, seed: int | None = None,
) -> dict[str, Framework]:
    problems: list[Problem] = []
    frameworks: dict[str, Framework] = {}
    profiles = config.get("profiles") or [{"schedulerName": DEFAULT_SCHEDULER_NAME}]
    for i, profile in enumerate(profiles):
        path = ("profiles", i)
        if not isinstance(profile, Mapping):
            problems.append(Problem(path, "must be an object"))
            continue
        name = profile.get("schedulerName") or DEFAULT_SCHEDULER_NAME
        if name in frameworks:
            problems.append(Problem((*path, "schedulerName"), f'Duplicate value: "{name}"',
                                    "duplicate-scheduler-name"))
            continue
        try:
            frameworks[name] = build_framework(profile, policies, seed=seed, path=path)
        except ProfileError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ConfigError(config_path, problems)
    return frameworks
