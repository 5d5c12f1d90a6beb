"""The end of a differential test: the run's summary, the checks that the comparison
did not switch itself off, and each failing case with a one-line command replaying
it (and its whole batch), reported as one pytest failure.

Every differential test ends with it (each adds the checks of its own run).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import pytest

# At most this many failing cases are described (the count says how many there were).
SHOWN = 20


class Described(Protocol):
    def describe(self) -> str: ...


def fail_if_any(problems: Sequence[str], summary: str,
                failures: Sequence[tuple[int, int, Described]],
                replay: Callable[[int, int], str], batch: int) -> None:
    """Fail the test when there are `problems` (checks of the run as a whole) or
    `failures`: (first case of its batch, the case's index, the outcome) each. `replay`
    gives the command for (first, count)."""
    report = list(problems)
    if failures:
        report.append(f"{len(failures)} of {summary} differ:")
        for first, index, outcome in failures[:SHOWN]:
            report.append(outcome.describe())
            report.append(f"  replay: {replay(index, 1)}   (whole batch: "
                          f"{replay(first, batch)})")
    if report:
        pytest.fail("\n".join(report), pytrace=False)
