"""Metadata the API server would refuse is refused, naming the object and the field,
with one rule for every labels map."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.errors import InvalidObjectError
from policyd.model.objectmeta import ANNOTATIONS_MAX_BYTES, check_metadata


def obj(kind: str, name: str = "x", **meta: Any) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name, **meta}}


@pytest.mark.parametrize(("kind", "name", "shown"), [
    ("Pod", "web/0", "default/web/0"),
    ("Pod", "Web-0", "default/Web-0"),
    ("Node", "n1\x1b[31m", "n1\\x1b[31m"),
    ("Node", "node_1", "node_1"),
    ("Node", "n" * 254, "n" * 254),
    ("Namespace", "shop.eu", "shop.eu"),  # a DNS label, no dots
    ("Service", "web.v2", "default/web.v2"),  # a DNS label
    ("StatefulSet", "db.main", "default/db.main"),  # a DNS label in v1.36
    ("ReplicaSet", "web/0", "default/web/0"),
    ("PersistentVolume", "PV1", "PV1"),
    ("PriorityClass", "high priority", "high priority"),
    ("CSIDriver", "d" * 64, "d" * 64),
])
def test_names_are_judged_per_kind(kind: str, name: str, shown: str) -> None:
    with pytest.raises(InvalidObjectError) as e:
        check_metadata(kind, obj(kind, name))
    assert e.value.field == "metadata.name"
    assert e.value.where == f"{kind} {shown}"
    assert "\x1b" not in str(e.value)


@pytest.mark.parametrize(("kind", "name"), [
    ("Pod", "web-0"), ("Node", "ip-10-0-0-1.eu-west-1.compute.internal"),
    ("Namespace", "shop"), ("Service", "web"), ("StatefulSet", "db"),
    ("Service", "1web"),  # RelaxedServiceNameValidation: beta, on in v1.36
    ("ReplicaSet", "web-7d4f.b"), ("CSIDriver", "EBS.csi.aws.com"),
    ("PodDisruptionBudget", "web.pdb"),
])
def test_valid_names_pass(kind: str, name: str) -> None:
    check_metadata(kind, obj(kind, name, labels={"app": "web"}))


def test_the_namespace_of_a_namespaced_object_is_a_dns_label() -> None:
    with pytest.raises(InvalidObjectError) as e:
        check_metadata("Pod", obj("Pod", "web", namespace="Shop_EU"))
    assert e.value.field == "metadata.namespace"
    assert "'Shop_EU': must be a lowercase RFC 1123 label" in str(e.value)


@pytest.mark.parametrize(("labels", "field", "message"), [
    ({"n\u043ede.kubernetes.io/zone": "a"}, "metadata.labels.n\u043ede.kubernetes.io/zone",
     "key: prefix part must be a lowercase RFC 1123 subdomain"),
    ({"a/b/c": "x"}, "metadata.labels.a/b/c", "key: a qualified name must consist"),
    ({"k" * 64: "x"}, f"metadata.labels.{'k' * 64}", "key: name part must be no more than 63"),
    ({f"{'p' * 254}/k": "x"}, f"metadata.labels.{'p' * 254}/k",
     "key: prefix part must be no more than 253"),
    ({"-app": "x"}, "metadata.labels.-app", "key: name part must consist"),
    ({"app": "v" * 64}, "metadata.labels.app", "must be no more than 63 characters"),
    ({"app": "web server"}, "metadata.labels.app", "' ' (U+0020 SPACE) at position 4"),
    ({"app": "web-"}, "metadata.labels.app", "value 'web-': a valid label value"),
    ({"app\x1b[2J": "x"}, "metadata.labels.app\\x1b[2J", "key: name part must consist"),
])
def test_label_keys_and_values_follow_the_api_servers_syntax(
        labels: dict[str, str], field: str, message: str) -> None:
    with pytest.raises(InvalidObjectError) as e:
        check_metadata("Node", obj("Node", "n1", labels=labels))
    assert e.value.field == field
    assert message in e.value.message
    assert "\x1b" not in str(e.value)


@pytest.mark.parametrize(("value", "message"), [
    (True, 'must be a string, not a boolean (quote it: "true")'),
    (False, 'must be a string, not a boolean (quote it: "false")'),
    (3, 'must be a string, not a number (quote it: "3")'),
    (1.5, 'must be a string, not a number (quote it: "1.5")'),
    (None, "must be a string, not null"),
    (["a"], "must be a string, not a list"),
])
@pytest.mark.parametrize("kind", ["Node", "Pod", "Namespace", "PersistentVolume", "Service"])
def test_every_labels_map_wants_strings_with_one_message(kind: str, value: Any,
                                                         message: str) -> None:
    with pytest.raises(InvalidObjectError) as e:
        check_metadata(kind, obj(kind, "x", labels={"pci": value}))
    assert e.value.field == "metadata.labels.pci"
    assert e.value.message == f"metadata.labels.pci: {message}"


@pytest.mark.parametrize("where", ["labels", "annotations"])
def test_a_key_that_is_not_a_string_is_refused(where: str) -> None:
    with pytest.raises(InvalidObjectError) as e:
        check_metadata("Node", obj("Node", "n1", **{where: {1: "a"}}))
    assert e.value.message == (f'metadata.{where}.1: key must be a string, not a number '
                               '(quote it: "1")')


def test_annotations_keys_values_and_total_size() -> None:
    # Keys are judged lowercased, as upstream's ValidateAnnotations does; values are free.
    check_metadata("Pod", obj("Pod", "p", annotations={"Example.COM/Note": "any \x1b text"}))
    with pytest.raises(InvalidObjectError, match="key: prefix part"):
        check_metadata("Pod", obj("Pod", "p", annotations={"ex ample.com/a": "x"}))
    with pytest.raises(InvalidObjectError, match="not a number"):
        check_metadata("Pod", obj("Pod", "p", annotations={"replicas": 3}))
    # Counted in bytes, not characters: 65,536 four-byte characters are 256 KiB.
    check_metadata("Node", obj("Node", "n", annotations={"b": "\U0001f600" * 65535}))
    with pytest.raises(InvalidObjectError, match="in total, got 262149"):
        check_metadata("Node", obj("Node", "n", annotations={"a": "\U0001f600" * 65537}))
    fits = {"a": "x" * (ANNOTATIONS_MAX_BYTES - 1)}
    check_metadata("Node", obj("Node", "n", annotations=fits))
    with pytest.raises(InvalidObjectError) as e:
        check_metadata("Node", obj("Node", "n", annotations={**fits, "b": ""}))
    assert e.value.field == "metadata.annotations"
    assert f"may not be more than {ANNOTATIONS_MAX_BYTES} bytes in total, got 262145" \
        in e.value.message


def test_missing_or_malformed_metadata_is_left_to_the_decoders() -> None:
    check_metadata("Pod", {"kind": "Pod"})
    check_metadata("Pod", {"kind": "Pod", "metadata": [1]})
    check_metadata("Pod", {"kind": "Pod", "metadata": {"name": 3, "labels": [1]}})


def test_the_look_alike_key_message_says_which_character() -> None:
    with pytest.raises(InvalidObjectError) as e:
        check_metadata("Node", obj("Node", "n1", labels={"n\u043ede.kubernetes.io/zone": "a"}))
    assert e.value.message.endswith(
        "'\u043e' (U+043E CYRILLIC SMALL LETTER O) at position 2 is not allowed")
