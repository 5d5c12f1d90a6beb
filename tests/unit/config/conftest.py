"""Helpers for profile tests: write a profile next to a copy of two example policies."""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from policyd.config.loader import validate_config_file
from policyd.problems import Problem

ROOT = Path(__file__).resolve().parents[3]

HEAD = """\
apiVersion: policyd.io/v1alpha1
kind: PolicydConfiguration
policies: [pol]
"""

Check = Callable[[str], list[Problem]]


@pytest.fixture
def policy_dir(tmp_path: Path) -> Path:
    pol = tmp_path / "pol"
    pol.mkdir()
    for name in ("hw-encrypt.yaml", "low-latency.yaml"):
        shutil.copy(ROOT / "policies" / name, pol / name)
    return pol


@pytest.fixture
def check(tmp_path: Path, policy_dir: Path) -> Check:
    """Validate `HEAD + body` (dedented) and return every problem."""

    def run(body: str) -> list[Problem]:
        path = tmp_path / "profile.yaml"
        path.write_text(HEAD + textwrap.dedent(body))
        return validate_config_file(path)[2]

    return run


def where(problems: list[Problem]) -> list[tuple[int, int, str]]:
    return [(p.line, p.column, p.rule) for p in problems]
