"""Decoding a node's status.declaredFeatures: kept in order, refused where the API
server's ValidateNode refuses it (v1.36), naming the node and the field."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.errors import InvalidObjectError
from policyd.model.records import node_from_dict
from tests.builders import make_node


def _node(features: Any) -> dict[str, Any]:
    raw = make_node("n1").raw()
    raw["status"]["declaredFeatures"] = features
    return raw


@pytest.mark.parametrize(("features", "want"), [
    (None, ()),
    ([], ()),
    (["RestartAllContainersOnContainerExits"], ("RestartAllContainersOnContainerExits",)),
    (["A", "B/sub", "B/sub2", "Zeta9"], ("A", "B/sub", "B/sub2", "Zeta9")),
    # Not a feature policyd knows: kept (the plugin ignores it), as upstream keeps it.
    (["SomethingNew/part"], ("SomethingNew/part",)),
])
def test_decoded(features: Any, want: tuple[str, ...]) -> None:
    assert node_from_dict(_node(features)).declared_features == want


def test_absent_by_default() -> None:
    assert node_from_dict(make_node("n1").raw()).declared_features == ()


@pytest.mark.parametrize(("features", "field", "fragment"), [
    ("RestartAllContainersOnContainerExits", "status.declaredFeatures", "must be a list"),
    ([True], "status.declaredFeatures[0]", "must be a string"),
    (["lowerCase"], "status.declaredFeatures[0]", "invalid feature name 'lowerCase'"),
    ([""], "status.declaredFeatures[0]", "invalid feature name ''"),
    (["A", "Has space"], "status.declaredFeatures[1]", "invalid feature name"),
    (["Trailing/"], "status.declaredFeatures[0]", "invalid feature name"),
    (["A/9digit"], "status.declaredFeatures[0]", "invalid feature name"),
    (["A" * 254], "status.declaredFeatures[0]", "at most 253 characters"),
    (["Zeta", "Alpha"], "status.declaredFeatures[1]", "'Alpha' is out of order"),
    (["Alpha", "Alpha"], "status.declaredFeatures[1]", "duplicate 'Alpha'"),
    # A Cyrillic letter looks the same and is not allowed.
    (["Rеstart"], "status.declaredFeatures[0]", "invalid feature name"),
])
def test_refused_as_the_api_server_refuses(features: Any, field: str, fragment: str) -> None:
    with pytest.raises(InvalidObjectError) as e:
        node_from_dict(_node(features))
    assert e.value.field == field
    assert e.value.kind == "Node" and e.value.name == "n1"
    assert fragment in str(e.value)


def test_longest_name_allowed() -> None:
    name = "A" * 253
    assert node_from_dict(_node([name])).declared_features == (name,)
