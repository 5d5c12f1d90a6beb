"""Daemon logging: verbosity levels and the JSON line format."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

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


def test_json_lines_carry_level_logger_message_and_extras() -> None:
    out = io.StringIO()
    logs.setup(0, "json", out)
    logging.getLogger("policyd.daemon.scheduler").info(
        "bound %s", "ns/p", extra={"node": "n1"})
    line = json.loads(out.getvalue())
    assert (line["level"], line["logger"], line["msg"], line["node"]) == (
        "info", "policyd.daemon.scheduler", "bound ns/p", "n1")
    assert line["ts"].endswith("Z")


def test_verbosity_four_enables_debug() -> None:
    out = io.StringIO()
    logs.setup(0, "text", out)
    logging.getLogger("policyd.x").debug("hidden")
    logs.setup(4, "text", out)
    logging.getLogger("policyd.x").debug("shown")
    text = out.getvalue()
    assert "hidden" not in text and "shown" in text
