"""The two ways a CEL expression fails, as values callers can report.

Their str() is the text upstream puts after "CEL compile error: " / "CEL runtime
error: " (the allocator adds those prefixes and the class or claim it was reading, as
k8s.io/dynamic-resource-allocation's allocator does), so a caller that wraps them the
same way prints kube-scheduler's message.
"""

from __future__ import annotations


class CelError(ValueError):
    """Base of both errors; `expression` is the source text."""

    def __init__(self, message: str, expression: str) -> None:
        super().__init__(message)
        self.message = message
        self.expression = expression


class CelCompileError(CelError):
    """The expression does not compile (syntax, undeclared name, wrong result type).

    `line` and `column` (1-based, in characters of the expression) are where the
    first problem is, when the compiler says; the message itself is upstream's text,
    which already names every position ("ERROR: <input>:1:5: ...").
    """

    def __init__(self, message: str, expression: str, line: int | None = None,
                 column: int | None = None) -> None:
        super().__init__(message, expression)
        self.line = line
        self.column = column


class CelRuntimeError(CelError):
    """Evaluation failed (missing key, no such overload, cost limit, non-bool result)."""
