"""Daemon logging: verbosity levels and the JSON line format."""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from policyd.daemon import logs


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    logger = logging.getLogger(logs.ROOT)
    saved = (list(logger.handlers), logger.level, logger.propagate)
    try:
        yield
    finally:
        logger.handlers[:] = saved[0]
        logger.setLevel(saved[1])
        logger.propagate = saved[2]


def _json_line(emit: Callable[[logging.Logger], None]) -> dict[str, Any]:
    out = io.StringIO()
    logs.setup(5, "json", out)
    emit(logging.getLogger("policyd.daemon.scheduler"))
    line: dict[str, Any] = json.loads(out.getvalue())
    return line


def test_json_lines_are_klogs() -> None:
    before = time.time() * 1000
    line = _json_line(lambda log: log.info("bound %s", "ns/p",
                                           extra={"v": 1, "pod": "ns/p", "node": "n1"}))
    # klog's keys in zap's order, then the key/value pairs.
    assert list(line) == ["ts", "logger", "caller", "msg", "v", "pod", "node"]
    assert before <= line["ts"] <= time.time() * 1000  # milliseconds, a float
    assert isinstance(line["ts"], float)
    assert line["caller"].startswith("daemon/test_logs.py:")  # zap's short caller
    assert (line["logger"], line["msg"], line["v"], line["node"]) == (
        "policyd.daemon.scheduler", "bound ns/p", 1, "n1")
    assert line["pod"] == {"name": "p", "namespace": "ns"}  # as klog.KObj writes it


def test_v_is_the_lines_verbosity() -> None:
    assert _json_line(lambda log: log.info("started"))["v"] == 0
    assert _json_line(lambda log: log.warning("retrying"))["v"] == 0
    assert _json_line(lambda log: log.debug("watch event"))["v"] == 4


def test_errors_carry_err_and_no_v() -> None:
    def failing(log: logging.Logger) -> None:
        try:
            raise ValueError("the server refused")
        except ValueError:
            log.exception("binding ns/p failed", extra={"pod": "ns/p"})

    line = _json_line(failing)
    assert "v" not in line
    assert (line["msg"], line["err"]) == ("binding ns/p failed", "the server refused")
    plain = _json_line(lambda log: log.error("no such pod"))
    assert "v" not in plain and "err" not in plain
    given = _json_line(lambda log: log.error("write failed", extra={"err": "409"}))
    assert given["err"] == "409"


def test_verbosity_four_enables_debug() -> None:
    out = io.StringIO()
    logs.setup(0, "text", out)
    logging.getLogger("policyd.x").debug("hidden")
    logs.setup(4, "text", out)
    logging.getLogger("policyd.x").debug("shown")
    text = out.getvalue()
    assert "hidden" not in text and "shown" in text
