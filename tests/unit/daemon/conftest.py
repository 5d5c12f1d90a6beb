"""Shared fixtures for the daemon's unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client as k8s

from policyd.config.plugins import default_framework
from policyd.daemon.coordinator import Scheduler
from policyd.daemon.event_recorder import EventSink
from policyd.daemon.metrics import Metrics
from policyd.kube.client import ConnectionSettings, KubeClient


@pytest.fixture
def sched() -> Iterator[Scheduler]:
    """A scheduler with the default profile and a client that reaches no server."""
    kube = KubeClient(k8s.ApiClient(k8s.Configuration()), ConnectionSettings())
    metrics = Metrics()
    s = Scheduler(kube, {"policyd": default_framework([])}, metrics=metrics,
                  events=EventSink(kube, metrics, "test"))
    try:
        yield s
    finally:
        s.shutdown(0)
        kube.close()
