"""Plugin results as values: a code, reasons, and the plugin that said it.

Expected rejections are returned, never raised. `None` stands for Success everywhere
(as nil does upstream): it is the common case on the hot path and costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

from policyd.problems import Problem


class Code(IntEnum):
    SUCCESS = 0
    ERROR = 1  # internal error: the cycle fails and the pod is retried after backoff
    UNSCHEDULABLE = 2  # this node does not fit; preemption might help
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3  # does not fit, and preemption cannot help
    WAIT = 4
    SKIP = 5  # PreFilter/PreScore: the plugin has nothing to do for this pod
    PENDING = 6

    def __str__(self) -> str:
        return _CODE_NAMES[self]


_CODE_NAMES = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}


@dataclass(frozen=True, slots=True)
class Status:
    code: Code
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @classmethod
    def unschedulable(cls, *reasons: str) -> Status:
        return cls(Code.UNSCHEDULABLE, reasons)

    @classmethod
    def unresolvable(cls, *reasons: str) -> Status:
        return cls(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)

    @classmethod
    def error(cls, message: str) -> Status:
        return cls(Code.ERROR, (message,))

    @classmethod
    def skip(cls) -> Status:
        return SKIP

    @property
    def is_success(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def is_skip(self) -> bool:
        return self.code is Code.SKIP

    @property
    def is_rejected(self) -> bool:
        """Unschedulable, UnschedulableAndUnresolvable or Pending (upstream IsRejected)."""
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                             Code.PENDING)

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        return self if self.plugin == plugin else Status(self.code, self.reasons, plugin)


SKIP = Status(Code.SKIP)


class PluginError(Exception):
    """Raised by a plugin factory when its args are invalid.

    `problems` carry the field path inside the args (`field_problem`), so configuration
    validation can report every one of them with its place in the file.
    """

    def __init__(self, plugin: str, problems: Sequence[Problem]) -> None:
        super().__init__("; ".join(f"{p.path}: {p.message}" if p.path else p.message
                                   for p in problems))
        self.plugin = plugin
        self.problems = problems
