"""Errors that the CLI's single error boundary turns into one clear line and an exit code.

Expected bad input (a broken snapshot, a wrong profile) raises one of these with a
location; anything else reaching the boundary is a bug and is reported as such.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_PROBLEMS = 1  # lint problems, failed tests, unschedulable pod, invalid profile
EXIT_USAGE = 2  # usage errors, unreadable or invalid input files
# `policyd run` cannot go on for a reason outside its input (its metrics port is taken):
# the same code kube-scheduler exits with on any failure.
EXIT_RUNTIME = 1
EXIT_INTERRUPTED = 130


class PolicydError(Exception):
    """A known failure with a message fit for users; `exit_code` is the CLI's contract."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, *, where: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.where = where

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


class RuntimeFailure(PolicydError):
    """The daemon cannot run in this environment (an address in use, a port it may not
    bind): not a usage error, the same command may work elsewhere or later."""

    exit_code = EXIT_RUNTIME


class InvalidObjectError(PolicydError):
    """A Kubernetes object (Node, Pod) in a snapshot or pod file is not valid.

    `where` names the object (`Pod default/web-1`) and `field` the offending field path.
    """

    def __init__(self, kind: str, name: str, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}", where=f"{kind} {name}")
        self.kind = kind
        self.name = name
        self.field = field


class InputFileError(PolicydError):
    """A file could not be read or parsed (missing, not UTF-8, not YAML/JSON)."""


class FileTooLargeError(InputFileError):
    """A file or pipe holds more than the limit for its kind: the loaders of policies
    and profiles report it as a finding of their own (`file-too-large`)."""


class InputDecodeError(InputFileError):
    """A file's content is not YAML or JSON policyd reads, at a known place: the same
    problem (`rule`, message, line, column) whatever kind of file it is in, raised by
    the data-file reader and reported as a finding by the policy and profile loaders."""

    def __init__(self, message: str, *, file: str, line: int, column: int,
                 rule: str) -> None:
        super().__init__(message, where=f"{file}:{line}:{column}")
        self.file = file
        self.line = line
        self.column = column
        self.rule = rule
