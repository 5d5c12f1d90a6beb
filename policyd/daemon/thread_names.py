"""Give each daemon thread its name at the OS level too (Linux `comm`), so that
per-thread CPU can be read from /proc/PID/task/*/stat without a profiler: the
benchmark's CPU split (scheduling loop, binders, events, informers) reads these names.

Python 3.11 names threads only inside the interpreter. The kernel keeps 15 bytes of a
thread's name, so the common `policyd-` prefix is dropped ("watch-pods", "bind_3",
"events-0", "scheduler"). Off Linux, or when libc cannot be loaded, nothing happens:
the names only serve observation.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading
from collections.abc import Callable
from typing import Any

PR_SET_NAME = 15  # <linux/prctl.h>
KERNEL_NAME_BYTES = 15
PREFIX = "policyd-"


def native_name(name: str) -> str:
    """What the kernel is told: the name without the common prefix, cut to 15 bytes."""
    short = name.removeprefix(PREFIX)
    return short.encode("utf-8", "replace")[:KERNEL_NAME_BYTES].decode("utf-8", "ignore")


def _prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    return libc.prctl


_PRCTL = _prctl()


def name_current_thread() -> None:
    """Set the calling thread's OS name from its Python name."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_NAME, native_name(threading.current_thread().name).encode(), 0, 0, 0)


def named(target: Callable[..., None]) -> Callable[..., None]:
    """`target`, naming its thread first (for threading.Thread(target=...))."""

    def run(*args: Any, **kwargs: Any) -> None:
        name_current_thread()
        target(*args, **kwargs)

    return run
