"""Output of `policyd test`: text, JSON, or JUnit XML (valid XML also when tests fail,
so CI systems always get a report they can parse)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # every command's start reads FORMATS: no runner, no XML until used
    from policyd.policytest.run_tests import RunResult

# Characters XML 1.0 cannot carry at all, even escaped.
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def render(result: RunResult, fmt: str) -> str:
    return RENDERERS[fmt](result)


def _summary(result: RunResult) -> str:
    """The last line: counts, and never "no tests found" for tests that were refused."""
    total = len(result.cases)
    refused = (f"{result.refused} file(s) or PolicyTest(s) refused as bad input, not run "
               "(the problems are on stderr)") if result.refused else ""
    if total == 0:
        if refused:
            return f"no tests run: {refused}"
        found = ", ".join(f"{n} {kind}" for kind, n in sorted(result.other_kinds.items()))
        return ("no tests found: a run without tests fails"
                + (f" ({result.files} file(s) read, no PolicyTest in them: {found})"
                   if found else ""))
    return f"{total - result.failed} passed, {result.failed} failed" + (
        f"; {refused}" if refused else "")


def _text(result: RunResult) -> str:
    lines = []
    for c in result.cases:
        lines.append(f"{'PASS' if c.passed else 'FAIL'} {c.suite} :: {c.name}")
        lines.extend(f"    {f}" for f in c.failures)
    lines.append(_summary(result))
    return "\n".join(lines) + "\n"


def _json(result: RunResult) -> str:
    return json.dumps({
        "tests": [{"suite": c.suite, "name": c.name, "passed": c.passed,
                   "failures": c.failures, "file": c.file, "line": c.line,
                   "seconds": round(c.seconds, 6)} for c in result.cases],
        "problems": [{"file": p.file, "line": p.line, "column": p.column, "path": p.path,
                      "rule": p.rule, "level": p.level, "message": p.message}
                     for p in result.problems],
        "summary": {"tests": len(result.cases), "failed": result.failed,
                    "badInput": result.bad_input, "refused": result.refused},
    }, indent=2) + "\n"


def _clean(s: str) -> str:
    return _XML_INVALID.sub("\ufffd", s)


def _junit(result: RunResult) -> str:
    from xml.etree import ElementTree as ET

    root = ET.Element("testsuites", name="policyd test", tests=str(len(result.cases)),
                      failures=str(result.failed), errors="0")
    suites: dict[str, ET.Element] = {}
    for c in result.cases:
        suite = suites.get(c.suite)
        if suite is None:
            suite = ET.SubElement(root, "testsuite", name=_clean(c.suite), tests="0",
                                  failures="0", errors="0", skipped="0")
            suites[c.suite] = suite
        suite.set("tests", str(int(suite.get("tests", "0")) + 1))
        case = ET.SubElement(suite, "testcase", classname=_clean(c.suite), name=_clean(c.name),
                             time=f"{c.seconds:.6f}", file=_clean(c.file), line=str(c.line))
        if not c.passed:
            suite.set("failures", str(int(suite.get("failures", "0")) + 1))
            failure = ET.SubElement(case, "failure", message=_clean(c.failures[0]),
                                    type="AssertionError")
            failure.text = _clean("\n".join(c.failures))
    if not result.cases:
        # No tests is a failure: say so in the report too, not only in the exit code.
        suite = ET.SubElement(root, "testsuite", name="policyd test", tests="1",
                              failures="1", errors="0", skipped="0")
        case = ET.SubElement(suite, "testcase", classname="policyd test", name="no tests")
        said = _summary(result)
        ET.SubElement(case, "failure", message=said.split(":")[0]).text = said
        root.set("tests", "1")
        root.set("failures", "1")
    elif result.refused:
        # Tests ran, but some files or suites did not: an error in the report, so a CI
        # view of it is not green while the run exits 2.
        suite = ET.SubElement(root, "testsuite", name="policyd test", tests="1",
                              failures="0", errors="1", skipped="0")
        case = ET.SubElement(suite, "testcase", classname="policyd test",
                             name="refused input")
        ET.SubElement(case, "error", message=f"{result.refused} file(s) or PolicyTest(s) "
                      "refused").text = _clean("\n".join(map(str, result.problems)))
        root.set("tests", str(len(result.cases) + 1))
        root.set("errors", "1")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(
        root, encoding="unicode") + "\n"


# The formats of `policyd test --format`, by name.
RENDERERS: dict[str, Callable[[RunResult], str]] = {
    "text": _text, "json": _json, "junit": _junit}
FORMATS = tuple(RENDERERS)
