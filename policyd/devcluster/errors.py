"""The one error type of the dev cluster, so callers (CLI, fixtures) can report it as a line.

It derives from the project's `PolicydError` so the CLI's error boundary prints it as
one clear line; its exit code is 1 (an operational failure: build failed, port busy,
binary missing, process did not start), not 2 (usage). A failed start also carries the
tail of the failing process's log in `details`, which the CLI prints under the line and
which `str()` includes so a failing test shows it too.
"""

from __future__ import annotations

from policyd.errors import EXIT_PROBLEMS, PolicydError


class DevClusterError(PolicydError):
    """Building, starting, stopping or loading the local control plane failed."""

    exit_code = EXIT_PROBLEMS

    def __init__(self, message: str, *, details: str = "") -> None:
        super().__init__(message)
        self.details = details

    def __str__(self) -> str:
        line = super().__str__()
        return f"{line}\n{self.details}" if self.details else line
