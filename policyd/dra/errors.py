"""How an allocation fails, as upstream's Allocate returns it.

`AllocationError` is fatal for the scheduling attempt (bad claim or class, a CEL
error): the caller stops and reports it. `NodeAllocationError` concerns only the node
tried (upstream wraps ErrFailedAllocationOnNode): the pod is unschedulable there and
other nodes may still fit. "Cannot allocate" is not an error at all: Allocate returns
None. Messages are upstream's texts.
"""

from __future__ import annotations


class AllocationError(Exception):
    """Allocation cannot proceed for this pod (the message is upstream's)."""


class NodeAllocationError(AllocationError):
    """Allocation failed on this node only (e.g. invalid resource pools)."""


class AllocationAborted(AllocationError):
    """The caller asked the search to stop (a timeout or a cancelled cycle)."""

    def __init__(self, cause: str) -> None:
        super().__init__(f"filter operation aborted: {cause}")
        self.cause = cause
