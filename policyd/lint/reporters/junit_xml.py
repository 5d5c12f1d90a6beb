"""JUnit XML, the report every CI system parses, for any command that checks things.

Not a lint format (it has no `render(Report)`): the shared writer for commands whose
results are suites of cases (`policyd audit`: a suite per policy, a case per pod), so
the XML escaping rules and the counts CI systems read are written once. The document
is valid XML whatever the text holds: characters XML 1.0 cannot carry are replaced.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from xml.etree import ElementTree as ET

# Characters XML 1.0 cannot carry at all, even escaped.
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


@dataclass(frozen=True, slots=True)
class Failure:
    message: str  # one line, the `message` attribute CI systems show in lists
    text: str = ""  # the element's body: details
    type: str = "AssertionError"


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    classname: str
    failures: tuple[Failure, ...] = ()
    seconds: float | None = None  # the `time` attribute, left out when None
    file: str = ""
    line: int | None = None
    # A case not run, and why (`<skipped message=...>`): audit's exempted rules.
    skipped: str = ""


@dataclass(frozen=True, slots=True)
class Suite:
    name: str
    cases: Sequence[Case]


def clean(s: str) -> str:
    """`s` with the characters XML 1.0 cannot carry replaced by U+FFFD."""
    return _XML_INVALID.sub("\ufffd", s)


def render(name: str, suites: Sequence[Suite]) -> str:
    """The `<testsuites>` document. Each suite's and the root's `failures` count the
    cases that failed (a case may hold several `<failure>` elements, one per finding:
    `tests - failures` is then still the number of cases that passed)."""
    total = failed = skipped = 0
    root = ET.Element("testsuites", name=clean(name))
    for s in suites:
        suite_failed = sum(1 for c in s.cases if c.failures)
        suite_skipped = sum(1 for c in s.cases if c.skipped)
        suite = ET.SubElement(root, "testsuite", name=clean(s.name), tests=str(len(s.cases)),
                              failures=str(suite_failed), errors="0",
                              skipped=str(suite_skipped))
        total += len(s.cases)
        failed += suite_failed
        skipped += suite_skipped
        for c in s.cases:
            attrs = {"classname": clean(c.classname), "name": clean(c.name)}
            if c.seconds is not None:
                attrs["time"] = f"{c.seconds:.6f}"
            if c.file:
                attrs["file"] = clean(c.file)
            if c.line is not None:
                attrs["line"] = str(c.line)
            case = ET.SubElement(suite, "testcase", attrs)
            for f in c.failures:
                failure = ET.SubElement(case, "failure", message=clean(f.message),
                                        type=clean(f.type))
                failure.text = clean(f.text)
            if c.skipped:
                ET.SubElement(case, "skipped", message=clean(c.skipped))
    root.set("tests", str(total))
    root.set("failures", str(failed))
    root.set("errors", "0")
    root.set("skipped", str(skipped))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(
        root, encoding="unicode") + "\n"
