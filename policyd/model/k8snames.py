"""Kubernetes name rules (apimachinery's validation.IsQualifiedName, IsValidLabelValue,
IsDNS1123Subdomain/Label), so lint and the snapshot loader reject what
the API server would reject, and `printable`, which makes a name safe to print.

Each check returns a list of messages (empty when valid), like upstream's; a message
about a character outside the rule's set names the first such character, its code point
and position, so a look-alike (a Cyrillic `о` in `nоde.kubernetes.io/...`) is seen.
"""

from __future__ import annotations

import re
import unicodedata

_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# The characters each rule allows anywhere (where they may stand is the regex's job).
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
_SUBDOMAIN_CHARS = _LABEL_CHARS | {"."}
# What a terminal would act on rather than show: C0 and C1 controls but newline and
# tab, DEL, and the invisible format characters (zero-width, bidi overrides, BOM).
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e"
                          "\u2060-\u2069\ufeff]")

QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63
DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253

# Label keys the Kubernetes project sets or documents; a key that differs from one of
# these only by case is almost certainly a typo that silently matches nothing.
WELL_KNOWN_LABELS = (
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "kubernetes.io/metadata.name",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "node.kubernetes.io/windows-build",
    "node.kubernetes.io/exclude-from-external-load-balancers",
    "node-role.kubernetes.io/control-plane",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/component",
    "app.kubernetes.io/part-of",
    "app.kubernetes.io/managed-by",
)

NATIVE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods", "storage")


def qualified_name(value: str) -> list[str]:
    """Label keys and annotation keys: `[prefix/]name`."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend(f"prefix part {m}" for m in dns1123_subdomain(prefix))
    else:
        return ["a qualified name must consist of alphanumeric characters, '-', '_' or "
                "'.', and must start and end with an alphanumeric character, with an "
                "optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX:
        errs.append(f"name part must be no more than {QUALIFIED_NAME_MAX} characters")
    elif not _QUALIFIED_NAME.match(name):
        errs.append("name part must consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character"
                    + _first_bad(name, _NAME_CHARS))
    return errs


def label_value(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > LABEL_VALUE_MAX:
        errs.append(f"must be no more than {LABEL_VALUE_MAX} characters")
    if not _LABEL_VALUE.match(value):
        errs.append("a valid label value must be an empty string or consist of "
                    "alphanumeric characters, '-', '_' or '.', and must start and end "
                    "with an alphanumeric character" + _first_bad(value, _NAME_CHARS))
    return errs


def dns1123_label(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > DNS1123_LABEL_MAX:
        errs.append(f"must be no more than {DNS1123_LABEL_MAX} characters")
    if not _DNS1123_LABEL.match(value):
        errs.append("must be a lowercase RFC 1123 label: lowercase alphanumeric "
                    "characters or '-', starting and ending with an alphanumeric character"
                    + _first_bad(value, _LABEL_CHARS))
    return errs


def dns1123_subdomain(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(f"must be no more than {DNS1123_SUBDOMAIN_MAX} characters")
    if not _DNS1123_SUBDOMAIN.match(value):
        errs.append("must be a lowercase RFC 1123 subdomain: lowercase alphanumeric "
                    "characters, '-' or '.', starting and ending with an alphanumeric "
                    "character" + _first_bad(value, _SUBDOMAIN_CHARS))
    return errs


def describe_char(char: str) -> str:
    """`U+043E CYRILLIC SMALL LETTER O`: what a character is, whatever it looks like."""
    if unicodedata.category(char) == "Cc":  # controls have no name in the database
        return f"U+{ord(char):04X}, a control character"
    return f"U+{ord(char):04X} {unicodedata.name(char, 'unnamed character')}"


def _first_bad(value: str, allowed: frozenset[str]) -> str:
    """`; 'о' (U+043E CYRILLIC SMALL LETTER O) at position 2 is not allowed`, for the
    first character outside `allowed` (1-based position), or "" when the fault is only
    where an allowed character stands."""
    for i, char in enumerate(value):
        if char not in allowed:
            return (f"; {printable(repr(char))} ({describe_char(char)}) at position "
                    f"{i + 1} is not allowed")
    return ""


def printable(text: str) -> str:
    """`text` with every character a terminal would act on instead of showing (ESC,
    other controls, bidi overrides, zero-width characters) written as an escape
    (`\\x1b`, `\\u202e`); newlines and tabs kept. Used wherever a name or a value
    read from a file reaches a terminal."""
    if not _UNPRINTABLE.search(text):
        return text
    return _UNPRINTABLE.sub(_escape, text)


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def resource_name(value: str) -> list[str]:
    """Resource names: a native name, `hugepages-<size>`, or a qualified name."""
    if value in NATIVE_RESOURCES or value.startswith("hugepages-"):
        return []
    return qualified_name(value)


def is_extended_resource(value: str) -> bool:
    """Extended resources carry a domain prefix outside kubernetes.io (v1helper)."""
    if "/" not in value:
        return False
    prefix = value.split("/", 1)[0]
    return not (prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io")
                or prefix == "requests")
