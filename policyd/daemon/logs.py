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
from collections.abc import Callable
from typing import Any, TextIO

ROOT = "policyd"


class JsonFormatter(logging.Formatter):
    """One JSON object per line, as klog's JSON format writes them (component-base's
    logs/json: zap through zapr), so a pipeline that parses kube-scheduler's logs
    parses policyd's alike:

    - `ts`: milliseconds since the epoch, a float; `logger`: the logger's name;
      `caller`: `dir/file.py:line` (zap's short caller); `msg`: the message;
    - then `v`, the verbosity the line is shown from (a record's `v` extra; DEBUG is 4,
      other levels 0) on every line but errors, which have none and carry `err` (the
      exception, or the record's `err` extra) when there is one;
    - then the record's extras as key/value pairs; a pod given as `namespace/name` is
      written as klog writes `klog.KObj(pod)`: `{"name": ..., "namespace": ...}`.
    """

    _skip = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
        "message", "asctime", "v", "err"}

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": record.created * 1000.0,
            "logger": record.name,
            "caller": _short_caller(record),
            "msg": record.getMessage(),
        }
        if record.levelno >= logging.ERROR:
            err = record.__dict__.get("err")
            if record.exc_info and record.exc_info[1] is not None:
                err = str(record.exc_info[1]) or type(record.exc_info[1]).__name__
            if err is not None:
                out["err"] = str(err)
        else:
            out["v"] = record.__dict__.get("v", 4 if record.levelno <= logging.DEBUG else 0)
        for key, value in record.__dict__.items():
            if key not in self._skip and not key.startswith("_"):
                out[key] = _object_ref(value) if key in OBJECT_REF_KEYS else value
        return json.dumps(out, default=str)


# Extras that name a namespaced object by `namespace/name`, written as klog.KObj is.
OBJECT_REF_KEYS = frozenset({"pod"})


def _object_ref(value: object) -> object:
    if isinstance(value, str) and value.count("/") == 1:
        namespace, name = value.split("/")
        return {"name": name, "namespace": namespace}
    return value


def _short_caller(record: logging.LogRecord) -> str:
    """zapcore.ShortCallerEncoder: the file's last directory, the file, the line."""
    parts = record.pathname.replace("\\", "/").rsplit("/", 2)
    return f"{'/'.join(parts[-2:])}:{record.lineno}"


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
