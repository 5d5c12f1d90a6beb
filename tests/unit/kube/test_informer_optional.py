"""An optional resource (resource.k8s.io, which a server may turn off) whose list
answers 404 is synced as empty and listed again until it is served; a resource that is
not optional keeps retrying unsynced, as before, and counts the failures."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, cast

import pytest

from policyd.kube.backoff import Backoff
from policyd.kube.client import ApiError, KubeClient
from policyd.kube.informer import Informer, object_key

Obj = dict[str, Any]
PATH = "/apis/resource.k8s.io/v1/deviceclasses"


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def on_add(self, obj: Obj) -> None:
        self.seen.append(("add", object_key(obj)))

    def on_update(self, old: Obj, new: Obj) -> None:
        self.seen.append(("update", object_key(new)))

    def on_delete(self, obj: Obj) -> None:
        self.seen.append(("delete", object_key(obj)))


class EmptyStream:
    """A watch that ends at once; it stops the loop when the script says so."""

    def __init__(self, client: ScriptedClient) -> None:
        self.client = client

    def events(self) -> list[Obj]:
        self.client.watches += 1
        if self.client.stop_on_watch:
            self.client.stop.set()
        return []

    def interrupt(self) -> None:
        pass

    def close(self) -> None:
        pass


class Settings:
    watch_silence = 60.0


class ScriptedClient:
    """Lists answer from `answers` in turn (an ApiError is raised); the last stays."""

    def __init__(self, answers: list[list[Obj] | ApiError], stop: threading.Event,
                 *, stop_after_lists: int = 0, stop_on_watch: bool = True) -> None:
        self.answers = answers
        self.stop = stop
        self.lists = 0
        self.watches = 0
        self.stop_after_lists = stop_after_lists
        self.stop_on_watch = stop_on_watch
        self.settings = Settings()

    def request(self, method: str, path: str, query: Obj | None = None) -> Obj:
        answer = self.answers[min(self.lists, len(self.answers) - 1)]
        self.lists += 1
        if self.stop_after_lists and self.lists >= self.stop_after_lists:
            self.stop.set()
        if isinstance(answer, ApiError):
            raise answer
        return {"items": [dict(o) for o in answer], "metadata": {"resourceVersion": "9"}}

    def stream(self, path: str, query: Obj | None = None) -> EmptyStream:
        return EmptyStream(self)


def _class(name: str, uid: str) -> Obj:
    return {"metadata": {"name": name, "uid": uid, "resourceVersion": "3"}}


NOT_FOUND = ApiError(404, "NotFound", "the server could not find the requested resource")


def _run(client: ScriptedClient, *, optional: bool) -> tuple[Informer, Recorder,
                                                              list[ApiError]]:
    errors: list[ApiError] = []
    handler = Recorder()
    informer = Informer(cast(KubeClient, client), PATH, handler, name="DeviceClass",
                        backoff=Backoff(initial=0.001, maximum=0.002),
                        on_error=errors.append, optional=optional)
    worker = threading.Thread(target=informer.run, args=(client.stop,))
    worker.start()
    worker.join(10)
    assert not worker.is_alive()
    return informer, handler, errors


def test_an_optional_resource_not_served_is_synced_empty(caplog: pytest.LogCaptureFixture
                                                         ) -> None:
    stop = threading.Event()
    client = ScriptedClient([NOT_FOUND], stop, stop_after_lists=3)
    with caplog.at_level(logging.WARNING, logger="policyd.kube.informer"):
        informer, handler, errors = _run(client, optional=True)
    assert informer.synced.is_set() and informer.absent
    assert handler.seen == [] and errors == []  # not a failure, nothing delivered
    assert client.lists >= 3  # it keeps asking
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == [f"DeviceClass: the API server does not serve {PATH}; taken as "
                        "empty until it does"]  # once, not once per retry


def test_an_optional_resource_served_later_is_listed_then() -> None:
    stop = threading.Event()
    client = ScriptedClient([NOT_FOUND, NOT_FOUND, [_class("gpu", "u1")]], stop)
    informer, handler, _ = _run(client, optional=True)
    assert handler.seen == [("add", "gpu")]
    assert informer.synced.is_set() and not informer.absent and client.watches == 1


def test_what_was_listed_stays_when_the_api_goes_away() -> None:
    # Listed, then the watch fails with 404 and so does the next list: the objects stay.
    stop = threading.Event()
    client = ScriptedClient([[_class("gpu", "u1")], NOT_FOUND], stop, stop_after_lists=3,
                            stop_on_watch=False)

    def watch_gone(path: str, query: Obj | None = None) -> EmptyStream:
        raise NOT_FOUND

    client.stream = watch_gone  # type: ignore[method-assign]
    informer, handler, _ = _run(client, optional=True)
    assert handler.seen == [("add", "gpu")]
    assert informer.absent and [o["metadata"]["name"] for o in informer.cache.values()] \
        == ["gpu"]


def test_a_required_resource_not_served_stays_unsynced_and_counts_errors() -> None:
    stop = threading.Event()
    client = ScriptedClient([NOT_FOUND], stop, stop_after_lists=3)
    informer, _, errors = _run(client, optional=False)
    assert not informer.synced.is_set() and not informer.absent
    assert len(errors) >= 2 and all(e.status == 404 for e in errors)


def test_other_failures_of_an_optional_resource_are_failures() -> None:
    stop = threading.Event()
    client = ScriptedClient([ApiError(403, "Forbidden")], stop, stop_after_lists=2)
    informer, _, errors = _run(client, optional=True)
    assert not informer.synced.is_set() and errors and errors[0].status == 403


def test_a_relist_asked_for_is_answered_while_the_api_is_absent() -> None:
    """A new leader asks every informer for a fresh list and waits for each: an absent
    API answers at once (its 404 is as fresh as a list can be), not after the backoff."""
    stop = threading.Event()
    client = ScriptedClient([NOT_FOUND], stop)
    errors: list[ApiError] = []
    informer = Informer(cast(KubeClient, client), PATH, Recorder(), name="DeviceClass",
                        backoff=Backoff(initial=30.0, maximum=30.0), on_error=errors.append,
                        optional=True)
    worker = threading.Thread(target=informer.run, args=(stop,))
    worker.start()
    try:
        assert informer.synced.wait(5)
        token = informer.request_relist()
        deadline = time.monotonic() + 5
        while not informer.listed_since(token) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert informer.listed_since(token) and client.lists >= 2
    finally:
        stop.set()
        worker.join(5)
    assert not worker.is_alive() and errors == []
