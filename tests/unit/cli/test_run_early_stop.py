"""`policyd run` asked to stop while it is still starting (SIGTERM during the imports or
the profile's load) stops with exit 0 before the daemon connects, instead of being
killed by the signal."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import typer

from policyd.cli import run_cmd
from policyd.daemon import run as daemon_run


@pytest.fixture
def restored_handlers() -> Iterator[None]:
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


@pytest.mark.usefixtures("restored_handlers")
def test_a_sigterm_while_loading_is_a_clean_stop(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    started: list[bool] = []
    hooks: list[Any] = []

    def slow_load(options: Any) -> Any:
        os.kill(os.getpid(), signal.SIGTERM)  # arrives while the profile loads
        return SimpleNamespace(settings=object())

    class NeverStarted:
        def __init__(self, options: Any, loaded: Any, client: Any, **kw: Any) -> None:
            hooks.append(kw.get("on_first_sync"))

        def start(self) -> None:
            started.append(True)

    monkeypatch.setattr(daemon_run, "load_config", slow_load)
    monkeypatch.setattr(daemon_run, "Daemon", NeverStarted)
    # Reading the kubeconfig is not what this is about (the test has none).
    monkeypatch.setattr(daemon_run, "connect", lambda options, settings: object())
    with pytest.raises(typer.Exit) as stopped:
        run_cmd.run(config=tmp_path / "profile.yaml", log_format=run_cmd.LogFormat("text"),
                    verbosity=0)
    assert stopped.value.exit_code == 0
    assert started == []
    # The process freezes its start-up heap at the first sync (an embedder need not).
    assert hooks == [daemon_run.freeze_startup_heap]
