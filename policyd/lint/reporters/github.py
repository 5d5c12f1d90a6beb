"""GitHub Actions workflow commands, so problems show as annotations on the diff.

Format: `::error file=F,line=L,col=C,title=T::MESSAGE`, with the escaping GitHub
requires (`%`, CR and LF in messages; also `:` and `,` in properties).
"""

from __future__ import annotations

from policyd.lint.reporters import Report


def _data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(s: str) -> str:
    return _data(s).replace(":", "%3A").replace(",", "%2C")


def render(report: Report) -> str:
    lines: list[str] = []
    for p in report.problems:
        props = [f"file={_prop(p.file)}"]
        if p.line:
            props += [f"line={p.line}", f"col={p.column}"]
        props.append(f"title={_prop(f'{report.tool} ({p.rule})')}")
        msg = p.message + (f" (at {p.path})" if p.path else "")
        if p.detail:
            msg += "\n" + "\n".join(p.detail)
        lines.append(f"::{p.level} {','.join(props)}::{_data(msg)}")
    lines.append(f"{report.tool}: {report.errors} error(s), {report.warnings} warning(s) "
                 f"in {report.files} file(s)")
    return "\n".join(lines) + "\n"
