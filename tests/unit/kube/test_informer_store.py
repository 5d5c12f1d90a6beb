"""The informer's store is keyed by uid: an object deleted and re-created under the
same name is a delete of the old uid and an add of the new one, on a re-list and on
the watch alike, never an update from one uid to the other (issue 12, item 2)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from policyd.kube.client import ApiError, KubeClient
from policyd.kube.informer import Informer, diff_relist, object_key, object_uid

Obj = dict[str, Any]


def _obj(name: str, uid: str, rv: str, ns: str = "default") -> Obj:
    meta: Obj = {"name": name, "uid": uid, "resourceVersion": rv}
    if ns:
        meta["namespace"] = ns
    return {"metadata": meta}


def _node(name: str, uid: str, rv: str) -> Obj:
    return _obj(name, uid, rv, ns="")


class Recorder:
    """A handler that writes down what it was told, as (what, key, uid[, old uid])."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, ...]] = []

    def on_add(self, obj: Obj) -> None:
        self.seen.append(("add", object_key(obj), object_uid(obj)))

    def on_update(self, old: Obj, new: Obj) -> None:
        self.seen.append(("update", object_key(new), object_uid(new), object_uid(old)))

    def on_delete(self, obj: Obj) -> None:
        self.seen.append(("delete", object_key(obj), object_uid(obj)))


class ListingClient:
    """Answers a list with whatever `items` holds now (one page)."""

    def __init__(self) -> None:
        self.items: list[Obj] = []
        self.rv = "1"

    def request(self, method: str, path: str, query: Obj | None = None) -> Obj:
        return {"items": [dict(o) for o in self.items],
                "metadata": {"resourceVersion": self.rv}}


def _informer(path: str = "/api/v1/pods") -> tuple[Informer, ListingClient, Recorder]:
    client, handler = ListingClient(), Recorder()
    return Informer(cast(KubeClient, client), path, handler), client, handler


# -- the diff ---------------------------------------------------------------------------

def test_a_new_uid_under_the_same_name_is_a_delete_and_an_add() -> None:
    old = _obj("web-0", "u1", "10")
    new = _obj("web-0", "u2", "20")
    added, updated, deleted = diff_relist({"u1": old}, [new])
    assert added == [new] and deleted == [old] and updated == []


def test_the_same_uid_at_a_new_version_is_an_update_and_unchanged_is_nothing() -> None:
    cached = {"u1": _obj("a", "u1", "1"), "u2": _obj("b", "u2", "1")}
    listed = [_obj("a", "u1", "1"), _obj("b", "u2", "7")]
    added, updated, deleted = diff_relist(cached, listed)
    assert added == [] and deleted == []
    assert [(object_uid(o), object_uid(n)) for o, n in updated] == [("u2", "u2")]


def test_renamed_slots_and_mixed_changes_in_one_relist() -> None:
    cached = {o["metadata"]["uid"]: o for o in (
        _obj("web-0", "a", "1"), _obj("web-1", "b", "1"), _obj("gone", "c", "1"),
        _obj("kept", "d", "1"))}
    listed = [_obj("web-0", "a2", "9"), _obj("web-1", "b", "9"), _obj("kept", "d", "1"),
              _obj("fresh", "e", "9")]
    added, updated, deleted = diff_relist(cached, listed)
    assert sorted(object_uid(o) for o in added) == ["a2", "e"]
    assert [object_uid(n) for _, n in updated] == ["b"]
    assert sorted(object_uid(o) for o in deleted) == ["a", "c"]


def test_objects_without_a_uid_are_keyed_by_name() -> None:
    assert object_uid({"metadata": {"name": "n1"}}) == "n1"
    assert object_uid({"metadata": {"name": "p", "namespace": "ns"}}) == "ns/p"
    assert object_uid(_obj("p", "u9", "1")) == "u9"


# -- a re-list ----------------------------------------------------------------------------

def test_relist_delivers_the_replaced_pod_as_delete_then_add() -> None:
    inf, client, seen = _informer()
    client.items = [_obj("web-0", "old", "5"), _obj("other", "o", "5")]
    inf._list()
    seen.seen.clear()
    # While the watch was down: web-0 deleted and re-created (new uid), other edited.
    client.items = [_obj("web-0", "new", "9"), _obj("other", "o", "8")]
    inf._list()
    assert seen.seen == [("delete", "default/web-0", "old"),
                         ("add", "default/web-0", "new"),
                         ("update", "default/other", "o", "o")]
    assert set(inf.cache) == {"new", "o"}


def test_relist_of_a_recreated_node_is_delete_then_add() -> None:
    inf, client, seen = _informer("/api/v1/nodes")
    client.items = [_node("n1", "n1-a", "3")]
    inf._list()
    client.items = [_node("n1", "n1-b", "3")]  # even at an equal resourceVersion
    inf._list()
    assert seen.seen[1:] == [("delete", "n1", "n1-a"), ("add", "n1", "n1-b")]


def test_watch_after_a_relist_knows_the_new_uid() -> None:
    inf, client, seen = _informer()
    client.items = [_obj("web-0", "old", "5")]
    inf._list()
    client.items = [_obj("web-0", "new", "9")]
    inf._list()
    seen.seen.clear()
    # A late DELETED of the old uid must not take away the new pod.
    inf._apply({"type": "DELETED", "object": _obj("web-0", "old", "10")})
    inf._apply({"type": "MODIFIED", "object": _obj("web-0", "new", "11")})
    assert seen.seen == [("update", "default/web-0", "new", "new")]


# -- the watch ----------------------------------------------------------------------------

@pytest.mark.parametrize("etype", ["ADDED", "MODIFIED"])
def test_watch_event_with_another_uid_first_deletes_the_old_one(etype: str) -> None:
    inf, client, seen = _informer()
    client.items = [_obj("web-0", "old", "5")]
    inf._list()
    seen.seen.clear()
    inf._apply({"type": etype, "object": _obj("web-0", "new", "6")})
    assert seen.seen == [("delete", "default/web-0", "old"),
                         ("add", "default/web-0", "new")]
    assert list(inf.cache) == ["new"]
    assert inf.resource_version == "6"


def test_watch_delete_and_readd_in_order() -> None:
    inf, client, seen = _informer()
    client.items = [_obj("web-0", "old", "5")]
    inf._list()
    seen.seen.clear()
    inf._apply({"type": "DELETED", "object": _obj("web-0", "old", "6")})
    inf._apply({"type": "ADDED", "object": _obj("web-0", "new", "7")})
    inf._apply({"type": "MODIFIED", "object": _obj("web-0", "new", "8")})
    assert seen.seen == [("delete", "default/web-0", "old"),
                         ("add", "default/web-0", "new"),
                         ("update", "default/web-0", "new", "new")]


def test_same_name_in_two_namespaces_are_two_objects() -> None:
    inf, _client, seen = _informer()
    inf._list()
    inf._apply({"type": "ADDED", "object": _obj("web-0", "a", "2", ns="one")})
    inf._apply({"type": "ADDED", "object": _obj("web-0", "b", "3", ns="two")})
    assert [s[0] for s in seen.seen] == ["add", "add"]
    assert set(inf.cache) == {"a", "b"}


def test_delete_of_an_unknown_uid_is_not_delivered() -> None:
    inf, client, seen = _informer("/api/v1/nodes")
    client.items = [_node("n1", "n1-b", "5")]
    inf._list()
    seen.seen.clear()
    inf._apply({"type": "DELETED", "object": _node("n1", "n1-a", "6")})
    assert seen.seen == []
    assert list(inf.cache) == ["n1-b"]


def test_an_error_event_is_raised_not_applied() -> None:
    inf, _, seen = _informer()
    inf._list()
    with pytest.raises(ApiError) as err:
        inf._apply({"type": "ERROR", "object": {"code": 410, "reason": "Expired"}})
    assert err.value.status == 410 and seen.seen == []
