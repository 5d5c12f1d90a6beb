"""Polling for tests that wait on a real server or process: one helper for all."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(check: Callable[[], Any], timeout: float = 15.0, what: str = "condition",
             interval: float = 0.1) -> Any:
    """Poll `check` until it returns something truthy; that value is returned."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
