"""Kubernetes name rules: the character a look-alike hides is named, and `printable`
keeps what a terminal would act on from reaching it raw."""

from __future__ import annotations

import pytest

from policyd.model import k8snames


def test_a_cyrillic_letter_in_a_label_key_prefix_is_named_with_its_position() -> None:
    (message,) = k8snames.qualified_name("n\u043ede.kubernetes.io/instance-type")
    assert message.startswith("prefix part must be a lowercase RFC 1123 subdomain")
    assert "U+043E CYRILLIC SMALL LETTER O) at position 2 is not allowed" in message


@pytest.mark.parametrize(("check", "value", "char"), [
    (k8snames.qualified_name, "zon\u0435", "U+0435 CYRILLIC SMALL LETTER IE) at position 4"),
    (k8snames.label_value, "pr\u043ed", "U+043E CYRILLIC SMALL LETTER O) at position 3"),
    (k8snames.label_value, "a b", "U+0020 SPACE) at position 2"),
    (k8snames.dns1123_subdomain, "web/0", "U+002F SOLIDUS) at position 4"),
    (k8snames.dns1123_subdomain, "Web", "U+0057 LATIN CAPITAL LETTER W) at position 1"),
    (k8snames.dns1123_label, "a.b", "U+002E FULL STOP) at position 2"),
    (k8snames.dns1123_label, "n1\x1b[31m", "U+001B, a control character) at position 3"),
    (k8snames.dns1123_label, "web_1", "U+005F LOW LINE) at position 4"),
])
def test_the_first_character_outside_the_rule_is_named(check: object, value: str,
                                                       char: str) -> None:
    assert callable(check)
    messages = check(value)
    assert len(messages) == 1 and char in messages[0]


def test_misplaced_allowed_characters_get_no_character_note() -> None:
    (message,) = k8snames.dns1123_subdomain("-web")
    assert "is not allowed" not in message
    assert k8snames.dns1123_subdomain("web-0.shop") == []


@pytest.mark.parametrize(("text", "shown"), [
    ("n1\x1b[31mred", "n1\\x1b[31mred"),
    ("a\x00b\x07c\x7f", "a\\x00b\\x07c\\x7f"),
    ("\x9b2J", "\\x9b2J"),  # the C1 CSI
    ("abc\u202edcba", "abc\\u202edcba"),  # a bidi override reorders what follows
    ("zero\u200bwidth", "zero\\u200bwidth"),
    ("\ufeffbom", "\\ufeffbom"),
])
def test_printable_escapes_what_a_terminal_would_act_on(text: str, shown: str) -> None:
    assert k8snames.printable(text) == shown
    assert "\x1b" not in k8snames.printable(text)


def test_printable_keeps_lines_tabs_and_letters() -> None:
    text = "POD\tNODE\nweb  n\u043ede-\u00e9\n"
    assert k8snames.printable(text) is text
