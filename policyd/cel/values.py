"""How Kubernetes' two CEL object types, Quantity and Semver, travel through the library.

cel-expr-python (cel-cpp underneath) passes only CEL's own values and protobuf messages
between Python and the evaluator, so each is a one-field message of a private
descriptor pool, `kubernetes.Quantity` / `kubernetes.Semver` (the type names upstream's
library gives them, so `type(quantity("1"))` prints the same). The field holds one
canonical spelling per value (`quantity.canonical`, `Version.canonical`), so CEL's
equality of two messages, field by field, is upstream's `Equal` (the same amount, the
same precedence). The messages are built from a descriptor in code: no generated
`_pb2` module, no .proto file to ship.
"""

from __future__ import annotations

from decimal import Decimal
from functools import lru_cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from policyd.cel import quantity as quantity_text
from policyd.cel import semver as semver_text

QUANTITY_TYPE = "kubernetes.Quantity"
SEMVER_TYPE = "kubernetes.Semver"
# The one field of both messages. An expression can read it (`q.policyd_canonical`),
# which upstream would refuse to compile; the name makes that an unlikely accident.
FIELD = "policyd_canonical"


def _pool() -> descriptor_pool.DescriptorPool:
    proto = descriptor_pb2.FileDescriptorProto(
        name="policyd/cel/kubernetes_types.proto", package="kubernetes", syntax="proto3")
    for name in ("Quantity", "Semver"):
        message = proto.message_type.add(name=name)
        message.field.add(name=FIELD, number=1,
                          type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                          label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return pool


POOL = _pool()
QuantityMessage: Any = message_factory.GetMessageClass(
    POOL.FindMessageTypeByName(QUANTITY_TYPE))
SemverMessage: Any = message_factory.GetMessageClass(POOL.FindMessageTypeByName(SEMVER_TYPE))


def quantity_message(value: Decimal) -> Any:
    return QuantityMessage(**{FIELD: quantity_text.canonical(value)})


@lru_cache(maxsize=4096)
def quantity_from_text(text: str) -> Any:
    """The message for a quantity string; QuantityParseError with upstream's text."""
    return quantity_message(quantity_text.parse(text))


@lru_cache(maxsize=4096)
def _decimal(canonical: str) -> Decimal:
    return Decimal(canonical)


def quantity_value(message: Any) -> Decimal:
    return _decimal(getattr(message, FIELD))


def semver_message(version: semver_text.Version) -> Any:
    return SemverMessage(**{FIELD: version.canonical()})


@lru_cache(maxsize=4096)
def semver_from_text(text: str) -> Any:
    """The message for a strict semantic version; SemverParseError otherwise."""
    return semver_message(semver_text.parse(text))


def semver_value(message: Any) -> semver_text.Version:
    # The canonical text is itself a strict version (no build metadata).
    return semver_text.parse(getattr(message, FIELD))


def is_quantity(value: object) -> bool:
    return isinstance(value, QuantityMessage)


def is_semver(value: object) -> bool:
    return isinstance(value, SemverMessage)
