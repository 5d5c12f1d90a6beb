"""Logging for the daemon: `-v N` verbosity and `--log-format text|json`.

Verbosity follows klog's convention: 0 shows what an operator needs (start, leader
changes, reloads, errors); 1 adds binds; 2 adds every scheduling decision, a pod that
fits nowhere included (kube-scheduler's V(2)); 4 and up add debug detail: each watch
event received (kind, type, object, resourceVersion) and each retried API call (which
call, which attempt, why).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

ROOT = "policyd"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, plus `extra` fields."""

    _skip = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
        "message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in self._skip and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def _text_formatter() -> logging.Formatter:
    return logging.Formatter("%(asctime)s %(levelname).1s %(name)s: %(message)s")


# `--log-format NAME`: the one list of log formats (policyd.cli.run_cmd.LOG_FORMATS
# names its keys for the CLI; a test keeps the two equal).
FORMATTERS: dict[str, Callable[[], logging.Formatter]] = {
    "text": _text_formatter,
    "json": JsonFormatter,
}


def level_for(verbosity: int) -> int:
    if verbosity >= 4:
        return logging.DEBUG
    return logging.INFO


def setup(verbosity: int = 0, fmt: str = "text", stream: TextIO | None = None) -> None:
    logger = logging.getLogger(ROOT)
    for h in list(logger.handlers):
        logger.removeHandler(h)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(FORMATTERS[fmt]())
    logger.addHandler(handler)
    logger.setLevel(level_for(verbosity))
    logger.propagate = False
