"""The policy language: loading, validation, compilation into scheduler plugins.

`load_policies(paths)` is the registry's factory: it returns every policy it could
compile (each a plugin named by `spec.pluginName`) and every problem found. Imports are
lazy so that importing this package costs nothing until a policy is loaded.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from policyd.policy.compiler import CompiledPolicy
    from policyd.problems import Problem


def load_policies(
    paths: Iterable[str | Path],
) -> tuple[list[CompiledPolicy], list[Problem]]:
    """Load, validate and compile the policies in `paths` (files or directories).

    A policy with any error is not compiled; warnings do not stop compilation.
    """
    from policyd.policy.from_paths import load_policies as _load

    return _load(paths)


__all__ = ["load_policies"]
